"""Tests of epochal.state.delta: Delta tables read by other readers, object storage."""
