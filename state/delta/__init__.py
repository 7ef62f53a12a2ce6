"""Delta access and every path spelling, in one place.

* :mod:`~epochal.state.delta.paths` — one location spelled as an fsspec URL, a Spark path or a handle path;
* :mod:`~epochal.state.delta.io` — table details, versions and commit metrics;
* :mod:`~epochal.state.delta.tables` — create, snapshot and restore a table;
* :mod:`~epochal.state.delta.log` — which files make up a version (the log, read without Spark);
* :mod:`~epochal.state.delta.checkpoints` — the log's checkpoints (classic, multi-part, V2 with sidecars) and compactions, and the replay's plan;
* :mod:`~epochal.state.delta.objectstore` — S3 and S3-compatible stores for fsspec and Spark.
"""
