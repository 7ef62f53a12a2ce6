"""A smoke test of the benchmark harness (bench/)."""
