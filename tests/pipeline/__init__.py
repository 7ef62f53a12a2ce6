"""Tests of epochal.pipeline: the epoch runner, its lease, faults and crash recovery (the toy pipeline)."""
