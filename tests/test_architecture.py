"""Dependencies point one way: orchestration -> pipeline -> state -> config."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["config", "state", "pipeline", "orchestration"]
# A layer may import itself and the layers listed before it, never those after it.
FORBIDDEN = {layer: set(LAYERS[i + 1 :]) for i, layer in enumerate(LAYERS)}
FORBIDDEN["state"] |= {"dagster"}
FORBIDDEN["pipeline"] |= {"dagster"}
FORBIDDEN["config"] |= {"pyspark", "delta", "dagster"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_point_one_way(layer):
    offenders = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        bad = _imports(path) & FORBIDDEN[layer]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)
