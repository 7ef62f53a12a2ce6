"""How ``make test`` hands tests to its pytest-xdist workers (``--dist loadscope``, refined by tests/conftest.py).

Each test is a unit of its own, in collection order (the slow ones first), except that the tests of a module
defining a module-scoped fixture (an example run over a few epochs, say) form one unit: one worker runs them
together, so the fixture is built once. With plain ``--dist load`` every worker handed one of them built it
again (27 s of clickstream epochs twice, 17 s of a savepoint twice, 2026-11-29). xdist's own
``--dist loadgroup`` would do this from ``xdist_group`` marks, but pytest-xdist 3.8 names the group through a
node attribute pytest 9.2 no longer reads, so the marks are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

#: A module-scoped fixture in a test module's source.
MODULE_FIXTURE = re.compile(r"""@pytest\.fixture\(\s*scope\s*=\s*["']module["']""")


def shares_a_module_fixture(path: Path) -> bool:
    """True if the test module at ``path`` defines a module-scoped fixture."""
    return path.suffix == ".py" and path.is_file() and MODULE_FIXTURE.search(path.read_text()) is not None


def unit_of(nodeid: str, root: Path, shared: dict[str, bool]) -> str:
    """The unit ``nodeid`` is handed out in: its module's path if the module shares a fixture, else itself.
    ``shared`` remembers what each module's source said."""
    module = nodeid.split("::", 1)[0]
    if module not in shared:
        shared[module] = shares_a_module_fixture(root / module)
    return module if shared[module] else nodeid


class ModuleFixtureScheduling(LoadScopeScheduling):
    """``loadscope`` whose units are single tests, but for the modules with a module-scoped fixture."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self._root = Path(config.rootpath)
        self._shared: dict[str, bool] = {}

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid, self._root, self._shared)
