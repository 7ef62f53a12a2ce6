"""The checkpoint engine: state backends, checkpoint storage, coordinator, restore, retention."""

from epochal.state.delta.objectstore import configure_fsspec

# s3fs must not cache listings of folders the JVM writes to (see state.objectstore).
configure_fsspec()
