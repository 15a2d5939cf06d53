"""`# noqa` comments: which line a finding's comment belongs on, and adding them (`--add-noqa`).

A comment cannot end a line that is inside a multi-line string or that a backslash continues, so,
as ruff does, a finding starting on such a line is suppressed by a comment on the first line after
it that can hold one: the end of the string, the end of the continued statement. Suppression and
`--add-noqa` both ask `noqa_row`, so an added comment always suppresses what it was added for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from placement_lint.edits import Edit
from placement_lint.fixes.apply import apply_edits
from placement_lint.rules.noqa import noqa_row
from placement_lint.source import SourceFile

NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_SPLIT = re.compile(r"[,\s]+")
_DIRECTIVE = "noqa"  # spelled apart, or ruff reads this module's own line as a directive


def noqa_codes(line: str) -> set[str] | None:
    """The codes a line's noqa comment names; an empty set for a bare `# noqa`; None without one."""
    match = NOQA.search(line)
    if match is None:
        return None
    return {code.upper() for code in _SPLIT.split(match.group("codes") or "") if code}


def add_noqa(source: SourceFile, findings: Iterable[tuple[str, int]]) -> tuple[str, int]:
    """The text with a `# noqa: CODE` for each (code, start offset) not yet suppressed, merged into a
    line's existing noqa comment (other tools' codes kept), and how many lines got one."""
    wanted: dict[int, set[str]] = {}
    for code, start in findings:
        wanted.setdefault(noqa_row(source, start), set()).add(code)
    edits = []
    for row, codes in sorted(wanted.items()):
        edit = _noqa_edit(source, row, codes)
        if edit is not None:
            edits.append(edit)
    return apply_edits(source.text, edits), len(edits)


def _noqa_edit(source: SourceFile, row: int, codes: set[str]) -> Edit | None:
    line = source.line(row)
    start = source.line_starts[row - 1]
    match = NOQA.search(line)
    if match is None:
        content = line.rstrip(" \t")
        # As ruff writes it: two spaces, then the comment, in place of any trailing whitespace.
        return Edit(start + len(content), start + len(line), f"  # {_DIRECTIVE}: {', '.join(sorted(codes))}")
    present = noqa_codes(line) or set()
    if not present:
        return None  # a bare directive already suppresses everything on the line
    missing = sorted(codes - present)
    if not missing:
        return None
    end = start + match.end("codes")
    return Edit(end, end, "".join(f", {code}" for code in missing))
