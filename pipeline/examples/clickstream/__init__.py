"""The clickstream example (DESIGN.md section 5).

Modules (import them directly; this package imports nothing heavy):

- ``layout``: hourly partition keys (``2026-11-01-13:00``), windows, landing paths.
- ``reasons``: the quarantine reason codes.
- ``generator``: deterministic landing data with every kind of bad line
  (``python -m epochal.pipeline.examples.clickstream.generator --help``).
- ``samples``: hand-written lines, one or more per outcome, with the expected result.
- ``parse``: Spark parsing of one epoch's files into events and quarantine.
- ``transforms``: Spark per-batch aggregates for ``user_totals`` and ``hourly_revenue``.
- ``reference``: an independent pure-Python computation of every expected sink.
- ``stages``: the stateful stages (parse, dedupe, aggregate_users, aggregate_hours,
  sessionize) and the reusable ``EventTimeTimers``.
- ``pipeline``: ``build_pipeline(settings)``, the DAG and its sinks.
"""
