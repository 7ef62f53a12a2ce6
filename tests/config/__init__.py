"""Tests of epochal.config."""
