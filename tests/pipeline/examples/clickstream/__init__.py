"""Tests of epochal.pipeline.examples.clickstream: generator, reference, parser, stages."""
