"""Fixes as data: text edits over a file's decoded source, with how safe they are to apply."""

from __future__ import annotations

import enum

from placement_lint.records import NamedTuple


class Applicability(enum.Enum):
    SAFE = "safe"  # applied by --fix
    UNSAFE = "unsafe"  # applied only with --unsafe-fixes: may change behaviour the user relies on


def applicable(unsafe_fixes: bool) -> set[Applicability]:
    """The fixes a run applies: safe ones, and unsafe ones too with --unsafe-fixes."""
    return {Applicability.SAFE, Applicability.UNSAFE} if unsafe_fixes else {Applicability.SAFE}


class Edit(NamedTuple):
    start: int  # character offsets into the decoded text
    end: int
    content: str


class Fix(NamedTuple):
    applicability: Applicability
    message: str
    edits: tuple[Edit, ...]

    @property
    def safe(self) -> bool:
        """Applied by --fix; else only with --unsafe-fixes."""
        return self.applicability is Applicability.SAFE

    def overlaps(self, other: Fix) -> bool:
        for a in self.edits:
            for b in other.edits:
                if a == b:
                    continue  # the same import added by two fixes is one edit
                if a.start < b.end and b.start < a.end:
                    return True
                if a.start == b.start and (a.start == a.end or b.start == b.end):
                    return True
        return False
