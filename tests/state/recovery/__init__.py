"""Tests of epochal.state.recovery: restore, fallback, schema checks, savepoint restore."""
