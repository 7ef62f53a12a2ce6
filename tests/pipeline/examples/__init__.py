"""Tests of the example pipelines."""
