"""Where an import's module lives in the repository: what both the launch context (following a
launched script's imports) and the class lookups (a trainer's base classes) ask. Apart from the
launch context's builder, so checking a file does not import it."""

from __future__ import annotations

import functools
from pathlib import Path

IMPORT_DEPTH = 3  # how many imports deep the launch context and the class lookups follow


def module_file(name: str, level: int, importer: Path, root: Path) -> Path | None:
    """The repository file `import name` (with `level` leading dots) in `importer` loads, if any."""
    return _module_file_from(name, level, importer.parent, root)


@functools.lru_cache(maxsize=8192)
def _module_file_from(name: str, level: int, folder: Path, root: Path) -> Path | None:
    if not name and not level:
        return None
    relative = Path(*name.split(".")) if name else Path()
    if level:
        bases = [folder.parents[level - 2] if level > 1 else folder] if len(folder.parents) >= level - 1 else []
    else:
        bases = [folder, root, root / "src"]
    for base in bases:
        for candidate in (base / relative.with_suffix(".py") if name else None, base / relative / "__init__.py"):
            if candidate is not None and candidate.is_file():
                resolved = candidate.resolve()
                if resolved.is_relative_to(root):
                    return resolved
    return None
