"""Tests of epochal.state: key groups here, one folder per subpackage (backends, checkpoint, delta, recovery)."""
