"""Tests of epochal.state.checkpoint: the coordinator, its storage, store, ids, metadata, savepoints and retention."""
