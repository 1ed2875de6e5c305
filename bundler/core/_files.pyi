"""New files written with the GIL released for a whole batch; see importers/batchwrite."""


def write_new(items: list[tuple[str, bytes]], /) -> int:
    """Create each (path, bytes) as a new file (O_EXCL), in order; OSError names the first
    that fails, and the rest are not written. Returns how many were written."""
