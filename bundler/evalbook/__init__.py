"""EvalBook bundles: the store, export, verification by claim group, and the audit."""
