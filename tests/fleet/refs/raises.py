"""A module whose import raises."""

raise RuntimeError("configuration missing")
