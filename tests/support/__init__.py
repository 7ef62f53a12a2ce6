"""Helpers the tests share (import as tests.support.<module>); not tests themselves."""
