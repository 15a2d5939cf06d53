"""`# noqa` directives: which findings they suppress, and where they sit (DPL100 edits them).

Only comments are directives, as in ruff: `"# noqa"` inside a string literal suppresses nothing.
A line's directive (`# noqa`, `# noqa: DPL001`) suppresses the findings that start on its line; a
file's (`# placement-lint: noqa`, `# placement-lint: noqa: DPL001`, ruff's `# ruff: noqa`), on a line
of its own anywhere in the file, suppresses them in the whole file.

A directive that cannot do what it says (a DPL code no rule has, a file directive after code) is a
warning at its place, as ruff warns: it suppresses nothing more, and hides nothing else of the file.
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
from placement_lint.source import SourceFile

# `[^\S\r\n]` rather than `\s`: a directive never runs on into the next line's text.
_CODE_LIST = r"[A-Z]+[0-9]+(?:(?:[^\S\r\n]*,[^\S\r\n]*|[^\S\r\n]+)[A-Z]+[0-9]+)*"
NOQA = LazyPattern(rf"#[^\S\r\n]*noqa(?::[^\S\r\n]?(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
# The file's directive, spelled as ruff's `# ruff: noqa` (the tool's name as written, `noqa` in any case).
FILE_PREFIX = "placement-lint"
FILE_NOQA = LazyPattern(rf"#[^\S\r\n]*{FILE_PREFIX}[^\S\r\n]*:[^\S\r\n]*(?i:noqa)(?![A-Za-z0-9_])")
# After a file directive's `noqa`: its codes, if a colon follows (ruff allows blanks around it).
_FILE_CODES = LazyPattern(rf"[^\S\r\n]*:[^\S\r\n]*(?P<codes>{_CODE_LIST})?", re.IGNORECASE)
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
    file_level: bool = False  # `# placement-lint: noqa`: for the whole file, not its line

    def suppresses(self, code: str) -> bool:
        return not self.codes or any(c.upper == code for c in self.codes)

    @property
    def spelled(self) -> str:
        return f"# {FILE_PREFIX}: noqa" if self.file_level else "# noqa"


class DirectiveProblem(NamedTuple):
    """Why a directive cannot do what it says, for a warning at its place: `{head} at path:line{tail}`,
    as ruff words it."""

    start: int  # what is wrong: the code, or the whole directive
    end: int
    head: str
    tail: str = ""


class Suppressions(NamedTuple):
    """A file's directives: by line, for the whole file, and the ones that are mistaken."""

    lines: dict[int, Directive]
    file: tuple[Directive, ...] = ()
    problems: tuple[DirectiveProblem, ...] = ()

    @property
    def present(self) -> bool:
        return bool(self.lines or self.file)

    @property
    def whole_file(self) -> bool:
        return any(not directive.codes for directive in self.file)

    def in_file(self, code: str) -> bool:
        """Whether a file directive suppresses this rule."""
        return any(directive.suppresses(code) for directive in self.file)

    def suppresses(self, source: SourceFile, start: int, code: str) -> bool:
        """Whether a finding of rule `code` starting at `start` is suppressed: by the file, or its line."""
        if self.in_file(code):
            return True
        return bool(self.lines) and suppressed(self.lines, noqa_row(source, start), code)


NO_SUPPRESSIONS = Suppressions({})


def directives(source: SourceFile, module: ast.Module) -> dict[int, Directive]:
    """The first `# noqa` comment of each line, by 1-based row."""
    return read_suppressions(source, module).lines


def read_suppressions(source: SourceFile, module: ast.Module, known: frozenset[str] | None = None) -> Suppressions:
    """The file's directives; with `known`, the rule codes there are, also the problems of the ones
    that name DPL codes no rule has (other linters' codes are theirs)."""
    text = source.text
    if not _mentions_noqa(text):
        return NO_SUPPRESSIONS
    line_matches = list(NOQA.finditer(text))
    file_matches = list(FILE_NOQA.finditer(text))
    if not line_matches and not file_matches:
        return NO_SUPPRESSIONS
    rows = {source.position(m.start())[0] for m in (*line_matches, *file_matches)}
    strings = _string_spans(source, module, rows)

    def commented(match: re.Match[str]) -> bool:
        return not any(start <= match.start() < end for start, end in strings)

    lines: dict[int, Directive] = {}
    for match in line_matches:
        row = source.position(match.start())[0]
        if row in lines or not commented(match):
            continue
        lines[row] = Directive(row, match.start(), match.end(), _codes(match.group("codes"), match.start("codes")))
    problems: list[DirectiveProblem] = []
    file: list[Directive] = []
    for match in file_matches:
        if not commented(match):
            continue
        row = source.position(match.start())[0]
        if text[source.line_starts[row - 1] : match.start()].strip():
            problems.append(
                DirectiveProblem(
                    match.start(),
                    match.end(),
                    f"Unexpected `# {FILE_PREFIX}: noqa` directive",
                    f". File-level suppression comments must appear on their own line. "
                    f"For line-level suppression, omit the `{FILE_PREFIX}:` prefix.",
                )
            )
            continue
        listed = _FILE_CODES.match(text, match.end())
        if listed is not None and not listed.group("codes"):
            problems.append(
                DirectiveProblem(
                    match.start(),
                    match.end(),
                    f"Invalid `# {FILE_PREFIX}: noqa` directive",
                    f": expected a comma-separated list of codes (e.g., `# {FILE_PREFIX}: noqa: DPL001, DPL002`).",
                )
            )
            continue
        if listed is None:
            file.append(Directive(row, match.start(), match.end(), (), file_level=True))
        else:
            codes = _codes(listed.group("codes"), listed.start("codes"))
            file.append(Directive(row, match.start(), listed.end(), codes, file_level=True))
    if known is not None:
        for directive in sorted((*lines.values(), *file), key=lambda d: d.start):
            problems += [
                DirectiveProblem(code.start, code.end, f"Invalid rule code provided to `{directive.spelled}`", f": {code.text}")
                for code in directive.codes
                if unknown_code(code.upper, known)
            ]
    problems.sort(key=lambda problem: problem.start)
    return Suppressions(lines, tuple(file), tuple(problems))


# How a file that may hold a noqa comment is told apart without decoding it (DPL100's anchors, the
# pre-check's scan): the word in each of its sixteen casings, as the comment is read without case
# (`# NoQA: DPL999` is a suppression too; with only the usual three spellings looked for, a file whose
# one comment was written so was never read, and its unknown code never reported).
NOQA_TOKENS = tuple(
    "".join(letter.upper() if mask >> place & 1 else letter for place, letter in enumerate("noqa")).encode()
    for mask in (0, 15, 1, *range(2, 15))  # the usual spellings first: `noqa`, `NOQA`, `Noqa`
)


def unknown_code(code: str, known: frozenset[str]) -> bool:
    """A code of ours that no rule has (other tools' codes are theirs to judge)."""
    return code.startswith("DPL") and code not in known


def _codes(listed: str | None, base: int) -> tuple[Code, ...]:
    if not listed:
        return ()
    return tuple(Code(c.group(), base + c.start(), base + c.end()) for c in _CODE.finditer(listed))


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
