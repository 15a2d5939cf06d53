"""`# noqa` comments: which line a finding's comment belongs on, and adding them (`--add-noqa`).

A comment cannot end a line that is inside a multi-line string or that a backslash continues, so,
as ruff does, a finding starting on such a line is suppressed by a comment on the first line after
it that can hold one: the end of the string, the end of the continued statement. Suppression and
`--add-noqa` both ask `noqa_row`, so an added comment always suppresses what it was added for.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from collections.abc import Iterable

from placement_lint.edits import Edit
from placement_lint.fixes.apply import apply_edits
from placement_lint.source import SourceFile

NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_SPLIT = re.compile(r"[,\s]+")
_DIRECTIVE = "noqa"  # spelled apart, or ruff reads this module's own line as a directive
# Without these, every line ends where a comment may follow: no need to tokenize.
_MULTI_LINE_HINTS = ('"""', "'''", "\\\n", "\\\r")


def noqa_codes(line: str) -> set[str] | None:
    """The codes a line's noqa comment names; an empty set for a bare `# noqa`; None without one."""
    match = NOQA.search(line)
    if match is None:
        return None
    return {code.upper() for code in _SPLIT.split(match.group("codes") or "") if code}


def noqa_row(source: SourceFile, offset: int) -> int:
    """The line whose noqa comment suppresses a finding starting at `offset`."""
    row, _ = source.position(offset)
    if not any(hint in source.text for hint in _MULTI_LINE_HINTS):
        return row
    blocked = _rows_without_comment_end(source.text)
    while row in blocked:
        row += 1
    return row


@functools.lru_cache(maxsize=16)
def _rows_without_comment_end(text: str) -> frozenset[int]:
    """The lines whose end is inside a string, or continued by a backslash."""
    blocked: set[int] = set()
    commented: set[int] = set()
    open_strings: list[int] = []  # rows where f-/t-strings (3.12+ tokenizes their parts) opened
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            name = tokenize.tok_name[token.type]
            if name == "STRING" and token.end[0] > token.start[0]:
                blocked.update(range(token.start[0], token.end[0]))
            elif name.endswith("STRING_START"):
                open_strings.append(token.start[0])
            elif name.endswith("STRING_END") and open_strings:
                blocked.update(range(open_strings.pop(), token.end[0]))
            elif name == "COMMENT":
                commented.add(token.start[0])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return frozenset()  # the file parsed with `ast`; if tokenize disagrees, keep the finding's own line
    for row, line in enumerate(io.StringIO(text, newline="").readlines(), start=1):
        if line.rstrip("\r\n").endswith("\\") and row not in commented:
            blocked.add(row)
    return frozenset(blocked)


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
