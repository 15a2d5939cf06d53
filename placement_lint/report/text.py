"""Human formats: `full` (a code frame per finding, like ruff) and `concise` (one line per finding)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.source import displayed_path, quoted_lines

if TYPE_CHECKING:
    from placement_lint.report.formats import Report
    from placement_lint.results import FileResult, Finding, RunOptions, RunResult
    from placement_lint.rules.spans import Related

# A tiny style vocabulary; `style(text, name)` renders it in colour (the CLI's ANSI codes) or leaves it plain.
Style = Callable[[str, str], str]


def plain(text: str, _: str) -> str:
    return text


def render_full(report: Report) -> str:
    return "\n".join(full(report.result, report.options, report.style, report.cwd))


def render_concise(report: Report) -> str:
    return "\n".join(concise(report.result, report.options, report.style))


def marker(finding: Finding, options: RunOptions) -> str:
    fix = finding.violation.fix
    if fix is None:
        return ""
    if fix.safe or options.unsafe_fixes:
        return "[*] "
    return ""


def finding_position(finding: Finding) -> str:
    """`train.py:12:5`, or in a notebook `train.ipynb:cell 3:2:15` (ruff's spelling)."""
    return f"{finding_row(finding)}:{finding.column}"


def finding_row(finding: Finding) -> str:
    """`12`, or in a notebook `cell 3:2`."""
    return f"cell {finding.cell}:{finding.row}" if finding.cell is not None else str(finding.row)


CONCISE_LIMIT = 200  # a concise line, path and position included, when the launch is added to it


def launched_by(finding: Finding) -> str | None:
    """Where the command that runs the finding's file is (`scripts/run.sh:3`), if a launch does."""
    return next((span.where for span in finding.violation.related if span.role == "launch"), None)


def one_line(finding: Finding, prefix: str = "", limit: int | None = None) -> str:
    """The headline, and the launch that runs the file when there is one (and `prefix` + it fit in `limit`)."""
    headline = finding.violation.message
    launch = launched_by(finding)
    if launch is None:
        return headline
    longer = f"{headline} (launched by {launch})"
    return longer if limit is None or len(prefix) + len(longer) <= limit else headline


def concise(result: RunResult, options: RunOptions, style: Style = plain) -> list[str]:
    lines = []
    for f in result.findings:
        head = f"{f.display}:{finding_position(f)}: {f.code} {marker(f, options)}"
        lines.append(
            f"{style(f'{f.display}:{finding_position(f)}', 'location')}: {style(f.code, 'code')} {marker(f, options)}"
            f"{one_line(f, head, CONCISE_LIMIT)}"
        )
    return lines


def full(result: RunResult, options: RunOptions, style: Style = plain, cwd: Path | None = None) -> list[str]:
    """Each finding: its headline, a numbered frame for each span of its path (launch, config, imports,
    load, consumer) in the order the data flows, then its notes."""
    quoted = _Quoted(cwd or Path.cwd())
    lines: list[str] = []
    for file in result.files:
        for finding in file.findings:
            lines.append(
                f"{style(f'{finding.display}:{finding_position(finding)}', 'location')}: "
                f"{style(finding.code, 'code')} {marker(finding, options)}{finding.violation.message}"
            )
            lines += _frames(file, finding, style, quoted)
            notes = finding.violation.notes
            for note in notes:
                lines.append(f"  {style('= ' + note.label, 'help')}: {note.text}")
            fix = finding.violation.fix
            if fix is not None and not any(note.label == "help" for note in notes):
                suffix = "" if fix.safe else " (unsafe fix)"
                lines.append(f"  {style('= help', 'help')}: {fix.message}{suffix}")
            lines.append("")
    return lines


class _Quoted:
    """The lines of the files frames quote, read once per report; None for a file that cannot be quoted."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self._files: dict[str, list[str] | None] = {}

    def lines(self, display: str) -> list[str] | None:
        if display not in self._files:
            self._files[display] = quoted_lines(displayed_path(display, self.cwd))
        return self._files[display]

    def cell(self, display: str, cell: int) -> list[str] | None:
        """A cell of another notebook (a launch in a shell escape), as written, with its own rows."""
        key = f"{display}\0cell {cell}"
        if key not in self._files:
            self._files[key] = _cell_lines(displayed_path(display, self.cwd), cell)
        return self._files[key]


def _cell_lines(path: Path, cell: int) -> list[str] | None:
    from placement_lint.decode import read_source
    from placement_lint.source import QUOTED_FILE_LIMIT, SourceError

    try:
        if path.stat().st_size > QUOTED_FILE_LIMIT:
            return None
        notebook = read_source(path, path.read_bytes())
    except (OSError, ValueError, SourceError):
        return None
    source = notebook.frame_source(cell)
    if source is notebook:  # no such cell: the notebook changed since the check
        return None
    return [source.line(row) for row in range(1, source.line_count + 1)]


class _Frame:
    """A span's quoted lines and its caret label (a plain class: this module is imported by every run)."""

    __slots__ = ("span", "rows", "label")

    def __init__(self, span: Related, rows: list[tuple[int, str]], label: str) -> None:
        self.span = span
        self.rows = rows  # (row, text) quoted, context included
        self.label = label


def _frames(file: FileResult, finding: Finding, style: Style, quoted: _Quoted) -> list[str]:
    from placement_lint.rules.spans import Related  # a run with nothing to report never needs it

    related = finding.violation.related
    own = Related("finding", finding.display, finding.row, finding.column, finding.end_row, finding.end_column, "", finding.cell)
    spans = list(related) if related else [own]
    frames: list[_Frame | Related] = []
    for span in spans:
        primary = span.path == finding.display and (span.row, span.column, span.cell) == (
            finding.row,
            finding.column,
            finding.cell,
        )
        frame = _quote(file, finding, span, quoted, primary)
        frames.append(frame if frame is not None else span)
    width = max((len(str(row)) for frame in frames if isinstance(frame, _Frame) for row, _ in frame.rows), default=1)
    gutter = " " * (width + 1)
    bar = style("|", "gutter")
    out: list[str] = []
    for frame in frames:
        if not isinstance(frame, _Frame):  # the line cannot be quoted (a deleted or binary file): say where
            out.append(f"{gutter}{style('= ' + frame.role, 'help')}: {frame.where}")
            continue
        span = frame.span
        if len(spans) > 1:
            cell = f"cell {span.cell}:" if span.cell is not None else ""
            where = f"{span.path}:{cell}{span.row}:{span.column}"
            out.append(f"{' ' * width}{style('-->', 'gutter')} {style(where, 'location')}")
        out.append(f"{gutter}{bar}")
        for row, text in frame.rows:
            numbered = f"{style(str(row).rjust(width), 'gutter')} {bar}"
            out.append(f"{numbered} {text}" if text else numbered)  # an empty line ends at its bar, as ruff's
            if span.row <= row <= span.end_row:
                code = text.rstrip().removesuffix("\\").rstrip()
                start = span.column - 1 if row == span.row else len(text) - len(text.lstrip())
                end = span.end_column - 1 if row == span.end_row else len(code)
                if (span.row, span.column) == (span.end_row, span.end_column):  # only the line is known: all of it
                    start, end = len(code) - len(code.lstrip()), len(code)
                label = f" {frame.label}" if row == span.end_row and frame.label else ""
                out.append(f"{gutter}{bar} {' ' * start}{style('^' * max(1, end - start) + label, 'caret')}")
        out.append(f"{gutter}{bar}")
    return out


_LABELS = {"launch": "launched here", "config": "makes it distributed", "import": "imported here"}


def _quote(file: FileResult, finding: Finding, span: Related, quoted: _Quoted, primary: bool) -> _Frame | None:
    """The span's lines (the flagged one with a line of context either side), or None when they cannot be read."""
    if span.row < 1:
        return None
    if span.path == finding.display and file.source is not None:
        lines = file.source.frame_source(span.cell)
        found = [lines.line(row) for row in range(max(1, span.row - 1), min(lines.line_count, span.end_row + 1) + 1)]
        offset = max(1, span.row - 1)
        count = lines.line_count
    else:
        # A cell of another notebook (its file's lines are JSON), or a file.
        whole = quoted.cell(span.path, span.cell) if span.cell is not None else quoted.lines(span.path)
        if whole is None:
            return None
        found, offset, count = whole, 1, len(whole)
    if span.end_row > count:
        return None
    first, last = (max(1, span.row - 1), min(count, span.end_row + 1)) if primary else (span.row, span.end_row)
    rows = [(row, found[row - offset].expandtabs(4)) for row in range(first, last + 1)]
    label = finding.code if primary else _LABELS.get(span.role, span.message)
    return _Frame(span, rows, label)


def statistics(result: RunResult, names: dict[str, str], unsafe_fixes: bool = False) -> list[str]:
    """`--statistics`, as ruff prints it (after flake8): count, code, then `[*]` when every finding of
    the rule has a fix this run would apply (an unsafe one only with --unsafe-fixes), `[-]` when some
    have, `[ ]` when none has; no marks at all when no rule has such a fix."""
    counts, fixable = statistic_counts(result, unsafe_fixes)
    width = max((len(str(n)) for n in counts.values()), default=1)
    code_width = max((len(code) for code in counts), default=0)
    marks = any(fixable.values())

    def mark(code: str) -> str:
        if not marks:
            return ""
        return "[*] " if fixable[code] == counts[code] else "[-] " if fixable[code] else "[ ] "

    return [
        f"{str(count).rjust(width)}\t{code.ljust(code_width)}\t{mark(code)}{names.get(code, '')}"
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def statistic_counts(result: RunResult, unsafe_fixes: bool) -> tuple[Counter[str], Counter[str]]:
    """Per rule: its findings, and those with a fix that --fix (with `unsafe_fixes`, --fix
    --unsafe-fixes) applies."""
    counts = Counter(f.code for f in result.findings)
    from placement_lint.edits import applicable  # only for --statistics: a warm run imports no edits

    allowed = applicable(unsafe_fixes)
    fixable = Counter(f.code for f in result.findings if f.violation.fix is not None and f.violation.fix.applicability in allowed)
    return counts, fixable


def summary(result: RunResult, options: RunOptions) -> str:
    findings = result.findings
    fixed = sum(len(f.fixed) for f in result.files)
    files_with = len({f.display for f in findings})
    hidden = hidden_fixes(result, options)
    if options.fix and fixed:
        fixed_files = plural(len([f for f in result.files if f.fixed]), "file")
        return f"Fixed {plural(fixed, 'problem')} in {fixed_files}, {len(findings)} remaining{_parenthesised([hidden])}."
    if not findings:
        failed = len(result.errors) + sum(1 for f in result.files if f.error)
        return f"No problems found, but {plural(failed, 'path')} could not be checked." if failed else "All checks passed!"
    allowed = options.allowed
    fixable = sum(1 for f in findings if f.violation.fix and f.violation.fix.applicability in allowed)
    with_flags = "--fix --unsafe-fixes" if options.unsafe_fixes else "--fix"
    parts = [f"{fixable} fixable with {with_flags}" if fixable else "", hidden]
    return f"Found {plural(len(findings), 'problem')} in {plural(files_with, 'file')}{_parenthesised(parts)}."


def would_fix(result: RunResult, options: RunOptions) -> str:
    """--diff's summary: the problems its patch fixes, and ruff's note on the fixes it leaves out."""
    count = sum(len(f.fixed) for f in result.files)
    return f"Would fix {plural(count, 'problem')}{_parenthesised([hidden_fixes(result, options)])}."


def hidden_fixes(result: RunResult, options: RunOptions) -> str:
    """ruff's note on the fixes a run leaves out (the unsafe ones, without --unsafe-fixes), or ""."""
    if not result.findings:
        return ""  # a clean run imports no fixes' classes (options.allowed does)
    allowed = options.allowed
    count = sum(1 for f in result.findings if f.violation.fix and f.violation.fix.applicability not in allowed)
    if not count:
        return ""
    return f"{count} hidden {'fix' if count == 1 else 'fixes'} can be enabled with --unsafe-fixes"


def _parenthesised(parts: list[str]) -> str:
    given = [part for part in parts if part]
    return f" ({', '.join(given)})" if given else ""


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
