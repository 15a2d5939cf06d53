"""setup.py read as data, never run: parsed once a run however many readers ask (the module graph's
package layout, the console scripts, the pinned versions), and its values taken as literals only."""

from __future__ import annotations

import ast
import functools


@functools.lru_cache(maxsize=32)
def setup_py_tree(text: str) -> ast.Module:
    """The parsed file (read-only for the callers); one that does not parse raises each time."""
    return ast.parse(text)


def module_literals(module: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound once, to a value (`ENTRY_POINTS = {...}`; read as a literal or not at all)."""
    bound: dict[str, ast.expr] = {}
    seen: set[str] = set()
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in seen:
                bound.pop(name, None)
            else:
                bound[name] = node.value
            seen.add(name)
    return bound


def literal(node: ast.expr, names: dict[str, ast.expr] | None = None) -> object:
    """`node`'s value when it is a literal (or a name `names` binds to one), else None."""
    if names and isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
