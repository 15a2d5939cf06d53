"""Settings of the Python process that runs the checks (the CLI's, or a pool worker)."""

from __future__ import annotations

import gc


def collect_garbage_rarely() -> None:
    """A check allocates hundreds of thousands of short-lived AST nodes and almost no reference
    cycles; CPython's default (a collection every 700 allocations) spent a quarter of the checking
    time on trl's trainers scanning them. Called only by processes the tool owns: the API leaves
    its caller's collector alone."""
    gc.set_threshold(100_000, 50, 100)
