"""Tests of epochal.state.backends: keyed, per-key and operator state."""
