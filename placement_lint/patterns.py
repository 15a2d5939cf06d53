"""Regular expressions compiled when first used.

A run imports far more patterns than it uses: the readers of shell scripts, YAML, reStructuredText
and Makefiles, the notebook magics, the noqa comments. Most repositories need few of them, and
compiling them all as the modules were imported cost every run that reads launch files 4-5 ms,
before the first file was looked at. `re` compiles a `LazyPattern` at its first search, once.
"""

from __future__ import annotations

import re
from typing import Any

_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class LazyPattern:
    """`re.compile(source, flags)`, done at the first call of a pattern method. That call puts the
    compiled pattern's methods in place of this lookup: later calls cost what a compiled pattern's do."""

    __slots__ = ("source", "flags", *_METHODS)

    def __init__(self, source: str | bytes, flags: int = 0) -> None:
        self.source = source
        self.flags = flags

    def __getattr__(self, name: str) -> Any:
        if name not in _METHODS:
            raise AttributeError(name)
        compiled = re.compile(self.source, self.flags)
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self.source!r}, {self.flags!r})"
