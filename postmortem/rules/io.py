"""Rule family (filled in by the root-cause engine)."""
