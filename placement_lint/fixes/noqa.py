"""`# noqa` comments: which line a finding's comment belongs on, and adding them (`--add-noqa`).

A comment cannot end a line that is inside a multi-line string or that a backslash continues, so,
as ruff does, a finding starting on such a line is suppressed by a comment on the first line after
it that can hold one: the end of the string, the end of the continued statement. Suppression and
`--add-noqa` both ask `noqa_row`, so an added comment always suppresses what it was added for.
"""

from __future__ import annotations

from collections.abc import Iterable

from placement_lint.edits import Edit
from placement_lint.fixes.apply import apply_edits
from placement_lint.rules.noqa import Directive, directives, noqa_row
from placement_lint.source import SourceFile, parse_python

_DIRECTIVE = "noqa"  # spelled apart, or ruff reads this module's own line as a directive


def add_noqa(source: SourceFile, findings: Iterable[tuple[str, int]]) -> tuple[str, int]:
    """The text with a `# noqa: CODE` for each (code, start offset) not yet suppressed, merged into a
    line's existing noqa comment (other tools' codes kept), and how many lines got one. The existing
    comments are the ones suppression reads (`rules.noqa.directives`): never `"# noqa"` in a string."""
    edits = noqa_edits(source, findings)
    return apply_edits(source.text, edits), len(edits)


def noqa_edits(source: SourceFile, findings: Iterable[tuple[str, int]]) -> list[Edit]:
    """The edits `add_noqa` makes, one per line at most: for an editor to offer as an action."""
    wanted: dict[int, set[str]] = {}
    for code, start in findings:
        wanted.setdefault(noqa_row(source, start), set()).add(code)
    found = directives(source, parse_python(source)) if wanted else {}
    edits = []
    for row, codes in sorted(wanted.items()):
        edit = _noqa_edit(source, row, codes, found.get(row))
        if edit is not None:
            edits.append(edit)
    return edits


def _noqa_edit(source: SourceFile, row: int, codes: set[str], directive: Directive | None) -> Edit | None:
    if directive is None:
        line = source.line(row)
        start = source.line_starts[row - 1]
        content = line.rstrip(" \t")
        # As ruff writes it: two spaces, then the comment, in place of any trailing whitespace.
        return Edit(start + len(content), start + len(line), f"  # {_DIRECTIVE}: {', '.join(sorted(codes))}")
    if not directive.codes:
        return None  # a bare directive already suppresses everything on the line
    missing = sorted(codes - {code.upper for code in directive.codes})
    if not missing:
        return None
    return Edit(directive.end, directive.end, "".join(f", {code}" for code in missing))
