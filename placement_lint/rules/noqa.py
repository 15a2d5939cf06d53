"""`# noqa` directives: which findings they suppress, and where they sit (DPL100 edits them).

Only comments are directives, as in ruff: `"# noqa"` inside a string literal suppresses nothing.
A directive belongs to its line: it suppresses the findings that start there.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize

from placement_lint.analysis.index import index_of
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.source import SourceError, SourceFile

# `[^\S\r\n]` rather than `\s`: a directive never runs on into the next line's text.
NOQA = LazyPattern(
    r"#[^\S\r\n]*noqa(?::[^\S\r\n]?(?P<codes>[A-Z]+[0-9]+(?:(?:[^\S\r\n]*,[^\S\r\n]*|[^\S\r\n]+)[A-Z]+[0-9]+)*))?",
    re.IGNORECASE,
)
_CODE = LazyPattern(r"[A-Z]+[0-9]+", re.IGNORECASE)


class Code(NamedTuple):
    text: str  # as written
    start: int  # character offsets into the file's text
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper()


class Directive(NamedTuple):
    row: int
    start: int  # the `#` that opens it
    end: int  # after `noqa`, or after its last code
    codes: tuple[Code, ...]  # empty: a bare noqa comment, which suppresses every rule

    def suppresses(self, code: str) -> bool:
        return not self.codes or any(c.upper == code for c in self.codes)


def directives(source: SourceFile, module: ast.Module) -> dict[int, Directive]:
    """The first `# noqa` comment of each line, by 1-based row."""
    text = source.text
    if not _mentions_noqa(text):
        return {}
    matches = list(NOQA.finditer(text))
    if not matches:
        return {}
    rows = {source.position(m.start())[0] for m in matches}
    strings = _string_spans(source, module, rows)
    found: dict[int, Directive] = {}
    for match in matches:
        row = source.position(match.start())[0]
        if row in found or any(start <= match.start() < end for start, end in strings):
            continue
        codes = ()
        if match.group("codes"):
            base = match.start("codes")
            codes = tuple(Code(c.group(), base + c.start(), base + c.end()) for c in _CODE.finditer(match.group("codes")))
        found[row] = Directive(row, match.start(), match.end(), codes)
    return found


def _mentions_noqa(text: str) -> bool:
    """Whether `noqa` is written anywhere, in any case. Asked of the UTF-8 bytes: `re`'s case-insensitive
    scan of a text with one character beyond Latin-1 (an emoji in a docstring) costs 4-5x more than
    encoding it and lowering ASCII. No other character folds to these four letters, so nothing is missed."""
    return b"noqa" in text.encode("utf-8", "surrogatepass").lower()


def _string_spans(source: SourceFile, module: ast.Module, rows: set[int]) -> list[tuple[int, int]]:
    """The spans of the string literals on these rows: a `#` inside one does not open a comment."""
    spans = []
    for node in index_of(module).nodes:
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))):
            first, last = node.lineno, node.end_lineno or node.lineno
            if any(first <= row <= last for row in rows):
                spans.append(source.node_span(node))
    return spans


# Without these, every line ends where a comment may follow: no need to tokenize.
_MULTI_LINE_HINTS = ('"""', "'''", "\\\n", "\\\r")


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


def suppressed(found: dict[int, Directive], row: int, code: str) -> bool:
    directive = found.get(row)
    return directive is not None and directive.suppresses(code)


def check_known_codes(source: SourceFile, found: dict[int, Directive], known: frozenset[str]) -> None:
    """A `# noqa: DPL…` naming no rule is a mistake worth an error (other linters' codes are theirs)."""
    for directive in found.values():
        for code in directive.codes:
            if code.upper.startswith("DPL") and code.upper not in known:
                raise SourceError(
                    f"line {directive.row}: unknown rule code {code.text} in noqa (rules are {', '.join(sorted(known))})"
                )
