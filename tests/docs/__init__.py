"""Checks of the documentation: README.md, docs/*.md, bench/README.md."""
