"""Apply fixes to a file's text, pass after pass, until nothing fixable is left.

Only the spans of the chosen edits change; every other character is copied. A pass takes the
fixes in order of position and skips any that overlap one already taken; the next pass, on the
re-linted text, gets another chance at it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from placement_lint.edits import Applicability, Edit, Fix

MAX_PASSES = 10


class FixFailed(Exception):
    """The fixed text does not parse: the file is left as it was."""


@dataclass
class FixOutcome:
    text: str
    applied: list[tuple[str, str]] = field(default_factory=list)  # (code, fix message) per applied fix
    passes: list[list[Edit]] = field(default_factory=list)  # the edits of each pass, on the text before it
    converged: bool = True


def choose(fixes: Sequence[tuple[str, Fix]]) -> list[tuple[str, Fix]]:
    chosen: list[tuple[str, Fix]] = []
    for code, fix in sorted(fixes, key=lambda item: item[1].edits[0].start if item[1].edits else 0):
        if not any(fix.overlaps(taken) for _, taken in chosen):
            chosen.append((code, fix))
    return chosen


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    unique = sorted(set(edits), key=lambda e: (e.start, e.end), reverse=True)
    for edit in unique:
        text = text[: edit.start] + edit.content + text[edit.end :]
    return text


def fix_to_fixed_point(
    text: str,
    lint: Callable[[str], Sequence[tuple[str, Fix | None]]],
    allowed: set[Applicability],
    first: Sequence[tuple[str, Fix | None]],
) -> FixOutcome:
    """`lint` re-checks a text and returns (code, fix) pairs; it raises FixFailed if the text does not parse."""
    outcome = FixOutcome(text)
    findings = first
    for _ in range(MAX_PASSES):
        fixable = [(code, fix) for code, fix in findings if fix is not None and fix.applicability in allowed]
        if not fixable:
            return outcome
        chosen = choose(fixable)
        edits = [edit for _, fix in chosen for edit in fix.edits]
        new_text = apply_edits(outcome.text, edits)
        if new_text == outcome.text:
            return outcome
        findings = lint(new_text)  # raises FixFailed: the caller keeps the original
        outcome.text = new_text
        outcome.passes.append(edits)
        outcome.applied += [(code, fix.message) for code, fix in chosen]
    outcome.converged = False
    return outcome
