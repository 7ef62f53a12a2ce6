"""The checkpoint engine between the coordinator and the state tables (DESIGN sections 1 and 3).

The public entry points live one level up, where the epoch runner imports them:

* :mod:`epochal.state.snapshots` — what a checkpoint's handles point at (incremental: the
  working tables' versions; full checkpoints and savepoints: self-contained copies);
* :mod:`epochal.state.restore` — bring the working tables back to a checkpoint or savepoint,
  with fallback, validation, schema migration and rescale;
* :mod:`epochal.state.retention` — release subsumed checkpoints and the shared files no
  retained checkpoint needs.

This package holds the parts they share:

* :mod:`~state.lifecycle.paths` — URLs, Spark paths and handle paths (relative ones included);
* :mod:`~state.lifecycle.deltalog` — which files make up a Delta version, read from the log
  with fsspec (no Spark job);
* :mod:`~state.lifecycle.schema` — schema comparison and migration expressions;
* :mod:`~state.lifecycle.errors` — the errors and the fallback warning;
* :mod:`~state.lifecycle.testing` — a tiny checkpointed stage for tests.
"""
