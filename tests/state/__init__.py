"""Tests of epochal.state (state descriptors and key groups here; one folder per subpackage)."""
