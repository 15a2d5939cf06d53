"""Apply fixes to a file's text, pass after pass, until nothing fixable is left.

Only the spans of the chosen edits change; every other character is copied. A pass takes the
fixes in order of position and skips any that overlap one already taken; the next pass, on the
re-linted text, gets another chance at it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.source import line_starts_of

MAX_PASSES = 10


class FixFailed(Exception):
    """The fixed text does not parse: the file is left as it was."""


# What a fix pass works on: a finding's code, its fix, and where the finding starts in the pass's text.
Fixable = tuple[str, Fix | None, int]


@dataclass(frozen=True)
class AppliedFix:
    code: str
    message: str  # the fix's message: what it did
    row: int  # 1-based line of the finding in the original text, the one `check` reported
    applicability: Applicability = Applicability.SAFE
    offset: int = 0  # where the finding starts in the original text
    cell: int | None = None  # in a notebook: the cell (`row` is then the line in it)


@dataclass
class FixOutcome:
    text: str
    applied: list[AppliedFix] = field(default_factory=list)
    passes: list[list[Edit]] = field(default_factory=list)  # the edits of each pass, on the text before it
    converged: bool = True


def choose(fixes: Sequence[tuple[str, Fix, int]]) -> list[tuple[str, Fix, int]]:
    chosen: list[tuple[str, Fix, int]] = []
    for code, fix, start in sorted(fixes, key=lambda item: item[1].edits[0].start if item[1].edits else 0):
        if not any(fix.overlaps(taken) for _, taken, _ in chosen):
            chosen.append((code, fix, start))
    return chosen


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    unique = sorted(set(edits), key=lambda e: (e.start, e.end), reverse=True)
    for edit in unique:
        text = text[: edit.start] + edit.content + text[edit.end :]
    return text


def original_offset(offset: int, passes: Sequence[Sequence[Edit]]) -> int:
    """Where an offset in the text after `passes` (each pass's edits, over the text before it) was
    in the original text; inside inserted text, where that insertion was made."""
    for edits in reversed(passes):
        offset = _before_edits(offset, edits)
    return offset


def _before_edits(offset: int, edits: Sequence[Edit]) -> int:
    shift = 0
    for edit in sorted(set(edits), key=lambda e: (e.start, e.end)):
        new_start = edit.start + shift
        if offset < new_start:
            break
        if offset < new_start + len(edit.content):
            return edit.start
        shift += len(edit.content) - (edit.end - edit.start)
    return offset - shift


def fix_to_fixed_point(
    text: str,
    lint: Callable[[str], Sequence[Fixable]],
    allowed: set[Applicability],
    first: Sequence[Fixable],
) -> FixOutcome:
    """`lint` re-checks a text and returns (code, fix, start) triples; it raises FixFailed if the text does not parse."""
    outcome = FixOutcome(text)
    findings = first
    starts = line_starts_of(text)
    for _ in range(MAX_PASSES):
        fixable = [(code, fix, start) for code, fix, start in findings if fix is not None and fix.applicability in allowed]
        if not fixable:
            return outcome
        chosen = choose(fixable)
        edits = [edit for _, fix, _ in chosen for edit in fix.edits]
        new_text = apply_edits(outcome.text, edits)
        if new_text == outcome.text:
            return outcome
        findings = lint(new_text)  # raises FixFailed: the caller keeps the original
        outcome.text = new_text
        for code, fix, start in chosen:
            offset = original_offset(start, outcome.passes)
            row = bisect.bisect_right(starts, offset)
            outcome.applied.append(AppliedFix(code, fix.message, row, fix.applicability, offset))
        outcome.passes.append(edits)
    outcome.converged = False
    return outcome
