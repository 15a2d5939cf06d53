"""A Python file's import lines, read from its text without parsing it: what the module graph looks
at first (does a file import anything of the repository?), and what a cached launch context needs
unchanged in a script whose imports were all it looked at."""

from __future__ import annotations

import re

from placement_lint.patterns import LazyPattern
from placement_lint.source import content_hash

IMPORT_LINE = LazyPattern(rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import|import[ \t]+([\w.]+))", re.MULTILINE)


def import_lines_digest(raw: bytes) -> str:
    """What a cached context needs unchanged in a script whose imports were all it looked at. A
    script that touches `sys.path` counts whole: the folders it adds decide where its imports lead."""
    if b"sys.path" in raw:
        return content_hash(raw)
    return content_hash(b"\n".join(m.group(0) for m in IMPORT_LINE.finditer(raw)))
