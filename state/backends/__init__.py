"""The state backends: how a stage reads and writes its state (Flink's heap vs RocksDB choice).

* :mod:`~epochal.state.backends.keyed` — keyed state, set-oriented: DataFrame reads and one MERGE per write;
* :mod:`~epochal.state.backends.per_key` — keyed state through a per-key function (Flink's KeyedProcessFunction);
* :mod:`~epochal.state.backends.operator` — operator state (split, union, broadcast) and CheckpointedFunction;
* :mod:`~epochal.state.backends.timers` — event-time timers, kept as keyed state.

Every backend keeps its state in Delta tables through :mod:`epochal.state.delta`.
"""
