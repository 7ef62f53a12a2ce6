"""Restore and recovery: bring the state back to a checkpoint or savepoint (DESIGN section 3).

* :mod:`~epochal.state.recovery.restore` — choose the checkpoint (latest with fallback, an id, a savepoint) and apply it;
* :mod:`~epochal.state.recovery.plan` — what each state table becomes, checked before anything changes;
* :mod:`~epochal.state.recovery.types` — the typed results (RestoreResult, RestoredState, SkippedCheckpoint);
* :mod:`~epochal.state.recovery.schema` — schema comparison and migration;
* :mod:`~epochal.state.recovery.testing` — a tiny checkpointed stage for tests.
"""
