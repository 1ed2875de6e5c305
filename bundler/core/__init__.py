"""Foundations every other part builds on: errors, canonical JSON, digests, schemas, atomic outputs, safe text."""
