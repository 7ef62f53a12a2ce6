"""Spark's Python workers get the functions and classes of tests.* by value (tests/conftest.py registers the
package with PySpark's cloudpickle): they load in a process that cannot import ``tests``, without PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys

import tests.support.toy_pipeline as toy


def _square(x: int) -> int:
    return x * x


def test_functions_and_classes_of_test_modules_load_where_tests_cannot_be_imported(tmp_path):
    from pyspark import cloudpickle

    payload = cloudpickle.dumps((_square, toy.Sum, toy.build))
    code = (
        "import importlib.util, pickle, sys\n"
        "assert importlib.util.find_spec('tests') is None, 'tests is importable here'\n"
        "square, stage, build = pickle.loads(sys.stdin.buffer.read())\n"
        "assert square(3) == 9 and stage().name == 'sum' and callable(build)\n"
        "assert not any(m == 'tests' or m.startswith('tests.') for m in sys.modules), 'unpickling imported tests'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
