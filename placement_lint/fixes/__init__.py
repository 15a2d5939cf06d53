"""Apply fixes: choose non-overlapping edits, repeat to a fixed point, write atomically."""
