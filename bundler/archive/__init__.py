"""The archive: deterministic tar writer, strict streaming reader, BagIt files, bag reader, safe extraction."""
