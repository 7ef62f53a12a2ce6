"""The orders example: the state kinds and patterns the clickstream example does not show.

Modules (read them in this order; this package imports nothing heavy):

- ``options``: the pipeline's own options (``inactivity``, ``allowed_lateness``, ``last_items``, ``rates_dir``).
- ``generator``: deterministic, tiny landing data (orders and currency-rate files).
- ``stages``: ``price`` (broadcast state), ``customers`` (reducing, aggregating, list and
  map state), ``activity`` (a per-key function with event-time timers).
- ``pipeline``: ``build_pipeline(settings)``, the DAG and its sinks.
- ``reference``: every sink and state computed again in plain Python (the tests' oracle).
"""
