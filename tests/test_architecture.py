"""Dependencies point one way: orchestration -> pipeline -> state -> config; one installed namespace."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["config", "state", "pipeline", "orchestration"]
# A layer may import itself and the layers listed before it, never those after it.
FORBIDDEN = {layer: set(LAYERS[i + 1 :]) for i, layer in enumerate(LAYERS)}
FORBIDDEN["state"] |= {"dagster"}
FORBIDDEN["pipeline"] |= {"dagster"}
FORBIDDEN["config"] |= {"pyspark", "delta", "dagster"}
SOURCE_TREES = ["epochal", *LAYERS]


def _imports(path: Path) -> set[str]:
    """Imported top-level names, with ``epochal.<layer>`` counted as ``<layer>``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()

    def add(module: str) -> None:
        parts = module.split(".")
        names.add(parts[1] if parts[0] == "epochal" and len(parts) > 1 else parts[0])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            add(node.module)
    return names


def _bare_layer_imports(path: Path) -> set[str]:
    """Imports of ``config``, ``state``... as top-level packages: they do not exist once installed."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bare = set()
    for node in ast.walk(tree):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
        )
        bare |= {m for m in modules if m.split(".")[0] in LAYERS}
    return bare


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_point_one_way(layer):
    offenders = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        bad = _imports(path) & FORBIDDEN[layer]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)


def test_every_import_goes_through_the_epochal_namespace():
    offenders = []
    for tree in [*SOURCE_TREES, "tests", "bench"]:
        for path in sorted((ROOT / tree).rglob("*.py")):
            bare = _bare_layer_imports(path)
            if bare:
                offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bare)} (write epochal.<layer>)")
    assert not offenders, "\n".join(offenders)


def test_packages_listed_in_pyproject_are_every_source_folder():
    """A new subfolder is packaged: pyproject's explicit package list covers every folder with an __init__.py."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = setuptools["package-dir"]
    on_disk = set()
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            on_disk.add(".".join([name, *relative]))
    assert on_disk == set(setuptools["packages"])


def test_import_epochal_is_cheap():
    """The public API resolves on use: ``import epochal`` loads neither Spark nor Dagster (the CLI starts fast)."""
    code = "import sys, epochal; print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'dagster', 'delta'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_the_pipeline_modules_import_no_pandas():
    """The commands that start no JVM (``checkpoints list``, ``inspect``) import the pipelines and the state
    backends; pandas, which only the pandas-function state APIs need where they run, would add 0.3 s to each."""
    code = ("import sys, epochal.pipeline.registry, epochal.pipeline.runner, epochal.state.checkpoint.store; "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "False"


def test_public_api_names_resolve():
    import epochal

    missing = [name for name in epochal.__all__ if getattr(epochal, name, None) is None]
    assert not missing
    assert epochal.Pipeline.__module__ == "epochal.pipeline.dag"


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_package(tmp_path):
    """After ``pip install .``, site-packages gains ``epochal`` and no ``config``, ``state``, ``pipeline``..."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    (wheel,) = tmp_path.glob("epochal-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"epochal"}
    assert "epochal/state/checkpoint/coordinator.py" in names
    assert "epochal/config/example.yaml" in names
