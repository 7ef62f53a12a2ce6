"""epochal.state.checkpoint depends on config and state only: no Dagster, pipeline, orchestration, nor Spark at import."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("dagster", "pipeline", "orchestration", "pyspark", "delta")


def test_import_direction() -> None:
    code = (
        "import sys, epochal.state.checkpoint, epochal.state.checkpoint.testing\n"
        f"print(sorted({{m.split('.')[1] if m.startswith('epochal.') else m.split('.')[0] for m in sys.modules}} & set({FORBIDDEN!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names_resolve() -> None:
    import epochal.state.checkpoint as checkpoint

    assert all(hasattr(checkpoint, name) for name in checkpoint.__all__)
