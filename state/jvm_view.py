"""The driver's py4j view of the JVM, remembering the classes and static methods it has looked up.

PySpark names JVM classes and their static methods afresh on every call: each ``F.col`` is a lookup of
``org.apache.spark.sql.functions`` and one of its member ``col``, each column conversion a lookup of
``PythonUtils`` and its ``toSeq``; every package segment of a name (``org``, ``org.apache``...) is a round
trip of its own. Each is a py4j round trip to the gateway, and a class the JVM does not find at once (a short
name tried against each of the view's imports, a package tried as a class) is a search of every jar on the
class path. An epoch of the orders example made some 2,500 of them, six epochs 15,000 (3.9 s of the
driver's time, docs/performance.md).

A class does not change while its JVM runs, nor does a static method stop being one, so :func:`remember`
makes the session's view keep what it found: classes by name on the view, on their package, static methods
and nested classes on their class, and the packages that hold a class found. Static fields are read every
time (their values can change); a name py4j found no class for (it answers "a package") is not remembered
until a class is found in it, and a name that is not found at all is never remembered.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView

_PARENT = "_epochal_parent"  # on a package not remembered yet: where to remember it once a class is found in it


def _kept(owner: Any, name: str, found: Any) -> Any:
    """``found``, the lookup of ``name`` on ``owner``. A class or a static method is remembered on ``owner``.
    py4j answers a package for any name it finds no class for, so a package is remembered only once a class
    is found in it (then on its parent, and so on up)."""
    if type(found) is JavaPackage:
        found.__class__ = _RememberingPackage
        setattr(found, _PARENT, (owner, name))
    elif isinstance(found, (JavaClass, JavaMember)):
        if type(found) is JavaClass:
            found.__class__ = _RememberingClass
        _remember(owner, name, found)
    return found


def _remember(owner: Any, name: str, found: Any) -> None:
    owner.__dict__[name] = found  # read from here on without __getattr__
    parent = owner.__dict__.pop(_PARENT, None)
    if parent is not None:
        _remember(*parent, owner)


class _RememberingView(JVMView):
    def __getattr__(self, name: str) -> Any:
        return _kept(self, name, super().__getattr__(name))


class _RememberingPackage(JavaPackage):
    def __getattr__(self, name: str) -> Any:
        return _kept(self, name, super().__getattr__(name))


class _RememberingClass(JavaClass):
    def __getattr__(self, name: str) -> Any:
        return _kept(self, name, super().__getattr__(name))


def remember(jvm: Any) -> Any:
    """Make ``jvm`` (a py4j ``JVMView``, e.g. ``spark.sparkContext._jvm``) remember its lookups; returns it."""
    if type(jvm) is JVMView:
        jvm.__class__ = _RememberingView
    return jvm
