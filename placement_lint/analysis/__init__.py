"""Facts about one parsed Python file: names, reaching values, conditions, model flow, placements."""
