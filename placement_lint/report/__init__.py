"""Report: turn a run's findings into text for people (full, concise) or machines (json)."""
