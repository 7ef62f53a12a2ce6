"""Fixtures of the runner tests: the toy pipeline registered under the name ``toy``."""

from __future__ import annotations

import pytest

import tests.support.toy_pipeline as toy


@pytest.fixture()
def toy_registered():
    from epochal.pipeline.registry import PIPELINES

    toy.register()
    yield
    PIPELINES.pop("toy", None)
