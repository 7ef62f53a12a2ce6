"""Example pipelines built on epochal (pure data parts; no Dagster import)."""
