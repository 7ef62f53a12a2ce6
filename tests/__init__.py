"""The test suite: a package mirroring the source tree (tests.config, tests.state, ...), helpers in tests.support."""
