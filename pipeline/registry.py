"""Which pipeline a deployment runs (``settings.pipeline``), and the deployment built from settings.

``pipeline:`` is resolved in this order:

1. a name in :data:`PIPELINES` (the built-in ``clickstream`` and ``orders``, or one a process registered);
2. a name an installed package registers in the entry-point group ``epochal.pipelines``
   (``[project.entry-points."epochal.pipelines"] totals = "mypkg.totals:build"``);
3. an import path ``package.module:factory`` (the module on ``sys.path``, e.g. ``PYTHONPATH``).

The target is a factory ``factory(settings) -> Pipeline`` or a :class:`Pipeline` object.
The package that holds it travels to Spark's Python workers by value (cloudpickle), so
per-key and per-subtask functions run on a cluster whose workers do not have it installed.
Every failure is a :class:`PipelineDefinitionError` naming what failed (the module, the
attribute, or what the factory returned), raised before any Spark work.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points
from typing import Any, Callable

from epochal.config import Settings
from epochal.errors import EpochalError
from epochal.pipeline.dag import Pipeline
from epochal.pipeline.errors import PipelineDefinitionError

ENTRY_POINT_GROUP = "epochal.pipelines"


def _clickstream(settings: Settings) -> Pipeline:
    from epochal.pipeline.examples.clickstream.pipeline import build_pipeline

    return build_pipeline(settings)


def _orders(settings: Settings) -> Pipeline:
    from epochal.pipeline.examples.orders.pipeline import build_pipeline

    return build_pipeline(settings)


PIPELINES: dict[str, Callable[[Settings], Pipeline]] = {"clickstream": _clickstream, "orders": _orders}


def _registered(name: str) -> Any | None:
    """The object an installed package registers under ``name`` in ``epochal.pipelines``."""
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            return entry.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is named, whatever it raised
            raise PipelineDefinitionError(
                f"pipeline {name!r} (entry point {entry.value!r} of {ENTRY_POINT_GROUP!r}) failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return None


#: How errors name the setting (with the configuration file, when there is one).
KEY = "config key 'pipeline'"


def _import_path(ref: str, where: str = KEY) -> Any:
    """The attribute ``ref`` (``package.module:attr[.attr]``) names."""
    module_name, _, attribute = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        raise PipelineDefinitionError(
            f"pipeline {ref!r} ({where}): no module named {missing!r}; "
            "is its package installed or on PYTHONPATH?"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        raise PipelineDefinitionError(
            f"pipeline {ref!r} ({where}): importing module {module_name!r} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise PipelineDefinitionError(
                f"pipeline {ref!r} ({where}): module {module_name!r} has no attribute {attribute!r}"
            )
        target = getattr(target, part)
    return target


def _ship_by_value(target: Any) -> None:
    """Have Spark's workers get the user's package by value (its functions and classes pickled whole)."""
    from pyspark import cloudpickle

    top = (getattr(target, "__module__", None) or getattr(target, "__name__", "") or "").split(".")[0]
    if top and top != "epochal" and top in sys.modules:
        cloudpickle.register_pickle_by_value(sys.modules[top])


def resolve_pipeline(ref: str, where: str = KEY) -> Callable[[Settings], Pipeline] | Pipeline:
    """The factory or Pipeline that ``ref`` (the ``pipeline`` setting, ``where`` for errors) names."""
    if ref in PIPELINES:
        return PIPELINES[ref]
    if ":" in ref:
        target = _import_path(ref, where)
        _ship_by_value(target)
        return target
    registered = _registered(ref)
    if registered is not None:
        _ship_by_value(registered)
    if registered is None:
        known = sorted(set(PIPELINES) | {e.name for e in entry_points(group=ENTRY_POINT_GROUP)})
        raise PipelineDefinitionError(
            f"unknown pipeline {ref!r} ({where}); known: {known}, "
            "or give an import path package.module:factory"
        )
    return registered


def build_pipeline(settings: Settings) -> Pipeline:
    """The pipeline the settings name, built (a factory is called with the settings)."""
    origin = settings.set_by("pipeline")  # the EPOCHAL__PIPELINE variable when it overrides the file
    where = KEY + (f" in {origin}" if origin else "")
    target = resolve_pipeline(settings.pipeline, where)
    if isinstance(target, Pipeline):
        _check_max_parallelism(settings, target)
        return target
    if not callable(target):
        raise PipelineDefinitionError(
            f"pipeline {settings.pipeline!r} names a {type(target).__name__}, not a Pipeline or a factory "
            "`factory(settings) -> Pipeline`"
        )
    try:
        pipeline = target(settings)
    except EpochalError:  # says what is wrong already (a SinkSpec, the pipeline's options...)
        raise
    except Exception as exc:  # a user's factory: name it, or the error says only "factory exploded"
        raise PipelineDefinitionError(
            f"pipeline {settings.pipeline!r} ({where}): its factory raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(pipeline, Pipeline):
        raise PipelineDefinitionError(
            f"pipeline {settings.pipeline!r}: the factory returned {type(pipeline).__name__}, not an epochal.Pipeline"
        )
    _check_max_parallelism(settings, pipeline)
    return pipeline


def _check_max_parallelism(settings: Settings, pipeline: Pipeline) -> None:
    """A ``spark.max_parallelism`` the configuration sets (other than the default) must be the pipeline's: the
    pipeline's fixes the key groups (as Flink's ``setMaxParallelism`` in code beats ``pipeline.max-parallelism``),
    so another in the file would be silently ignored. (The default is not told apart from a value set to it:
    Dagster's Spark resource passes every setting.)"""
    configured = settings.spark.max_parallelism
    default = type(settings.spark).model_fields["max_parallelism"].default
    if configured != default and configured != pipeline.max_parallelism:
        origin = settings.set_by("spark.max_parallelism")
        where = "" if origin is None else f" ({origin})" if origin.startswith("environment") else f" in {origin}"
        raise PipelineDefinitionError(
            f"spark.max_parallelism is {configured}{where}, but pipeline {settings.pipeline!r} is built with "
            f"max_parallelism={pipeline.max_parallelism}, which fixes its key groups",
            action="set them equal, or build the Pipeline with max_parallelism=settings.spark.max_parallelism",
        )


def build_deployment(settings: Settings, spark=None, *, clock=None, lazy: bool = False):
    """The pipeline, one SparkSession for the process, and everything around them.

    ``lazy``: the session starts on first use (a command that may need no Spark, such as a savepoint).
    """
    from epochal.pipeline.deployment import Deployment
    from epochal.state.session import LazySparkSession, build_spark_session

    pipeline = build_pipeline(settings)
    if spark is None:
        def start(short_run: bool = False):
            return build_spark_session(settings.spark, locations=settings.storage_locations(), short_run=short_run)

        spark = LazySparkSession(start) if lazy else start()
    return Deployment(settings, spark, pipeline, clock=clock)
