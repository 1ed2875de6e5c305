"""Fixture generators for `make fixtures`, the tests and the benchmark; never imported at runtime."""
