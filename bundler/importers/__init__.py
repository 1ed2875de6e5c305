"""Runs of other evaluation tools brought into an EvalBook store (SPEC 16)."""
