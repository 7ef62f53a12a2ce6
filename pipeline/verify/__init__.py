"""``epochal verify``: the exactly-once invariants checked on a user's own pipeline and input.

``engine`` runs the scenarios (straight twice, restores, crashes at every named point and at
random instants), ``compare`` diffs every sink and state table in Spark, ``report`` prints them.
"""
