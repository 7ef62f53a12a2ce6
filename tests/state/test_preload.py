"""A new driver imports what PySpark's py4j converters need (pandas, through ``pyspark.testing.utils``) on a thread
while its JVM starts, instead of after, with the JVM waiting."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from epochal.state.session import _preload_while_the_jvm_starts

#: Which thread imported pyspark.testing.utils, in a process that starts its own driver.
PROBE = textwrap.dedent("""
    import json, sys, threading
    importers = {}

    class Probe:
        def find_spec(self, name, path=None, target=None):
            if name in ("pyspark.testing.utils", "pandas"):
                importers.setdefault(name, threading.current_thread().name)
            return None

    sys.meta_path.insert(0, Probe())
    from epochal.config import SparkSettings
    from epochal.state.session import build_spark_session

    spark = build_spark_session(SparkSettings(master="local[1]", jit="quick"))
    assert spark.range(3).count() == 3
    print(json.dumps({"importers": importers, "threads": [t.name for t in threading.enumerate()]}))
""")


def test_a_new_driver_imports_the_converters_modules_on_a_thread_of_its_own_and_joins_it():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["importers"] == {"pyspark.testing.utils": "epochal-preload", "pandas": "epochal-preload"}
    assert "epochal-preload" not in report["threads"], "the thread is joined once the session is up"


def test_a_process_whose_jvm_runs_already_starts_no_thread(spark):
    assert _preload_while_the_jvm_starts() is None
