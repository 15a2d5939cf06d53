"""What a rule reports: a code, a message, a span of the source and maybe a fix. Apart from the rules,
so the cache can read findings back without importing them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement_lint.records import NamedTuple

if TYPE_CHECKING:
    from placement_lint.context.evidence import Context
    from placement_lint.edits import Fix
    from placement_lint.rules.spans import Note, Related


class Violation(NamedTuple):
    code: str
    message: str  # the headline: what is wrong, and under which setup (at most 160 characters)
    start: int
    end: int
    fix: Fix | None = None
    context: Context | None = None  # the evidence behind the finding
    notes: tuple[Note, ...] = ()  # one fact each, in the order they are shown (rules/spans.py)
    related: tuple[Related, ...] = ()  # the path, as data: every span, the flagged one included, in data-flow order
