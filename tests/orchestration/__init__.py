"""Tests of epochal.orchestration: the epochal command line and the Dagster definitions, runs and UI."""
