"""What a rule reports: a code, a message, a span of the source and maybe a fix. Apart from the rules,
so the cache can read findings back without importing them."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from placement_lint.context.evidence import Context
    from placement_lint.edits import Fix


class Related(NamedTuple):
    """Another place a finding points to: the load a reported value reaches, the call of the helper
    that returned it, or (when the helper is in another module) the value where it is written."""

    path: str  # as messages name files
    line: int
    column: int  # 1-based
    role: str  # "load", "helper call", "origin"
    label: str  # the code there, shortened


class Violation(NamedTuple):
    code: str
    message: str
    start: int
    end: int
    fix: Fix | None = None
    context: Context | None = None  # the evidence behind the finding
    related: tuple[Related, ...] = ()
