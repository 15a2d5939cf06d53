"""What a run returns: per-file results with their findings located, and the run's options. The data
every layer above the checker shares; light, so a run the cache answers imports nothing heavier."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.source import TOP_OF_FILE, FileRegion

if TYPE_CHECKING:
    from placement_lint.context.evidence import Context, Evidence
    from placement_lint.edits import Applicability
    from placement_lint.fixes.apply import AppliedFix  # imported only by a run that fixes, diffs or adds noqa
    from placement_lint.notebook import NotebookSource
    from placement_lint.rules.spans import Related
    from placement_lint.rules.violation import Violation
    from placement_lint.source import SourceFile


# Records that are never changed after they are made are named tuples, the others plain classes:
# creating a dataclass costs about 1 ms (each generated method is an exec), and every run imports this
# module.


class RunOptions(NamedTuple):
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    context: str | None = None  # --context
    jobs: int | None = None
    ignore_noqa: bool = False  # report what noqa comments suppress
    force_exclude: bool = False  # the configured excludes apply to paths named explicitly too

    @property
    def allowed(self) -> set[Applicability]:
        from placement_lint.edits import applicable  # asked only of a run with fixes to show or apply

        return applicable(self.unsafe_fixes)

    @property
    def fixing(self) -> bool:
        return self.fix or self.diff


class _NoqaRow(NamedTuple):
    """A finding's noqa line, worked out when asked (it tokenizes the file); picklable for the pool."""

    source: SourceFile
    offset: int

    def row(self) -> int:
        from placement_lint.rules.noqa import noqa_row

        return self.source.location(self.source.line_starts[noqa_row(self.source, self.offset) - 1])[1]


class Finding:
    """A violation located in its file, as the reports show it."""

    __slots__ = ("display", "violation", "context", "row", "column", "end_row", "end_column", "noqa_row_of", "cell")

    def __init__(
        self,
        display: str,
        violation: Violation,
        context: Context,
        row: int,
        column: int,
        end_row: int,
        end_column: int,
        noqa_row_of: int | _NoqaRow = 0,
        cell: int | None = None,
    ) -> None:
        self.display = display
        self.violation = violation
        self.context = context
        self.row = row
        self.column = column
        self.end_row = end_row
        self.end_column = end_column
        # The line whose comment can suppress it (0: its first line); worked out when first asked:
        # it tokenizes the file, which only the JSON output needs.
        self.noqa_row_of = noqa_row_of
        self.cell = cell  # in a notebook: the cell (1-based among all cells); rows and columns are in it

    # A value, as the API promises (`placement_lint.Finding`): equal when it says the same of the same
    # place. The noqa line is left out: it is worked out from the rest.
    def _value(self) -> tuple[object, ...]:
        return (self.display, self.violation, self.context, self.row, self.column, self.end_row, self.end_column, self.cell)

    def __eq__(self, other: object) -> bool:
        return self._value() == other._value() if isinstance(other, Finding) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._value())

    def __repr__(self) -> str:
        return f"Finding({self.display!r}, {self.code}, row={self.row}, column={self.column}, message={self.message!r})"

    @property
    def noqa_row(self) -> int:
        if isinstance(self.noqa_row_of, _NoqaRow):
            self.noqa_row_of = self.noqa_row_of.row()
        return self.noqa_row_of

    @property
    def code(self) -> str:
        return self.violation.code

    @property
    def file_region(self) -> FileRegion | None:
        """Its rows and columns among the file's own lines; None in a notebook, where they are in its cell."""
        if self.cell is not None:
            return None
        return FileRegion(self.row, self.column, self.end_row, self.end_column)

    @property
    def annotated_region(self) -> FileRegion:
        """Where a report that must name a line of the file puts it: its region, or a notebook's first line."""
        return self.file_region or TOP_OF_FILE

    @property
    def message(self) -> str:
        return self.violation.message


class PlacedWarning(NamedTuple):
    """A warning about one place in a file (a `# noqa` naming no rule): printed as every warning is,
    and shown by an editor at its place. Rows and columns as a Finding has them."""

    message: str
    row: int
    column: int
    end_row: int
    end_column: int
    cell: int | None = None


class FileResult:
    """What checking one file gave: its findings, or why it could not be checked."""

    __slots__ = (
        "display",
        "findings",
        "error",
        "fixed",
        "diff",
        "warnings",
        "placed_warnings",
        "source",
        "path",
        "dependencies",
        "unwritten",
    )

    def __init__(
        self,
        display: str,
        findings: list[Finding] | None = None,
        error: str | None = None,
        fixed: list[AppliedFix] | None = None,
        diff: str | None = None,
        warnings: list[str] | None = None,
        source: SourceFile | None = None,
        path: Path | None = None,
        dependencies: list[Path] | None = None,
    ) -> None:
        self.display = display
        self.findings: list[Finding] = findings if findings is not None else []
        self.error = error
        self.fixed: list[AppliedFix] = fixed if fixed is not None else []  # with --fix: written; with --diff: would be
        self.diff = diff
        self.warnings: list[str] = warnings if warnings is not None else []
        self.placed_warnings: list[PlacedWarning] = []
        self.source = source
        self.path = path
        self.dependencies: list[Path] = dependencies if dependencies is not None else []  # configs its evidence read
        # A pool worker's fixed file, for the run's own process to write: (the new bytes, the bytes
        # the file must still hold). `fixed` and `findings` already say what it will be.
        self.unwritten: tuple[bytes, bytes] | None = None

    @property
    def reports_anything(self) -> bool:
        return bool(self.findings or self.error or self.warnings or self.placed_warnings or self.fixed or self.diff)


class Screened(NamedTuple):
    """What reading and pre-checking a file (and checking it, if that was due) gave."""

    digest: str | None  # its content hash, for the cache
    # Findings, an error or a warning; or only the configs and modules a check read (for the cache);
    # None: nothing to report and nothing read.
    result: FileResult | None = None
    raw: bytes | None = None  # a rule could fire in it: the bytes still to check
    cacheable: bool = True


class RunResult:
    """What a run gives: every file's result, and the run's own errors and warnings."""

    __slots__ = ("files", "checked", "errors", "warnings", "interrupted", "noqa_added", "baselined", "rule_url_base")

    def __init__(
        self,
        files: list[FileResult],
        checked: int,
        errors: list[str] | None = None,
        warnings: list[str] | None = None,
        interrupted: int = 0,
        rule_url_base: str | None = None,
    ) -> None:
        self.files = files
        self.checked = checked
        self.errors: list[str] = errors if errors is not None else []
        self.warnings: list[str] = warnings if warnings is not None else []
        self.interrupted = interrupted  # files not checked because the run was interrupted
        self.noqa_added = 0  # --add-noqa: comments written
        self.baselined: list[Finding] = []  # --add-noqa: the findings they suppress
        self.rule_url_base = rule_url_base  # the setting the reports link the rule pages with

    @property
    def findings(self) -> list[Finding]:
        return [finding for result in self.files for finding in result.findings]


def finding_at(source: SourceFile, display: str, violation: Violation) -> Finding:
    """A violation located in its file: rows and columns (in a notebook, in its cell)."""
    from placement_lint.context.evidence import Context  # a run with nothing to report never needs it

    cell, row, column = source.location(violation.start)
    _, end_row, end_column = source.location(violation.end)
    noqa_row = _NoqaRow(source, violation.start)
    return Finding(display, violation, violation.context or Context(), row, column, end_row, end_column, noqa_row, cell)


def display_path(path: Path, cwd: Path) -> str:
    """A path as messages name it: relative to the working folder when inside it (a resolved path
    needs the resolved folder)."""
    name, base = str(path), str(cwd)
    # As text: a run names thousands of files, and `relative_to` parses both paths each time.
    prefix = base if base.endswith(os.sep) else base + os.sep
    if name.startswith(prefix):
        return name[len(prefix) :].replace(os.sep, "/")
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return name


# -- a notebook's findings told by cell ----------------------------------------------------------

# "TrainingArguments(...), line 9" in a message or note: a row of the text the rules read.
_LINE_REFERENCE = LazyPattern(r"\bline (\d+)\b")


def fix_in_cell(source: NotebookSource, applied: AppliedFix) -> AppliedFix:
    from dataclasses import replace  # only a notebook's findings: every run imports this module (0.65 ms)

    cell, row, _ = source.location(applied.offset)
    return replace(applied, cell=cell, row=row)


def violations_in_cells(source: NotebookSource, violations: list[Violation], display: str) -> list[Violation]:
    """ "TrainingArguments(...), line 9" names a row of the joined cells: say which cell, as ruff does."""

    def cells(text: str) -> str:
        return _LINE_REFERENCE.sub(lambda m: source.describe_row(int(m.group(1))), text)

    return [
        v._replace(
            message=cells(v.message),
            context=in_cells(source, v.context, display) if v.context is not None else None,
            notes=tuple(note._replace(text=cells(note.text)) for note in v.notes),
            related=tuple(_span_in_cell(source, span, display) for span in v.related),
        )
        for v in violations
    ]


def _span_in_cell(source: NotebookSource, span: Related, display: str) -> Related:
    if span.path != display or not span.row or source.notebook is None or not source.notebook.cells:
        return span
    cell = source.notebook.cell_at(span.row)
    shift = cell.first_row - 1
    return span._replace(row=span.row - shift, end_row=span.end_row - shift, cell=cell.number)


def in_cells(source: NotebookSource, context: Context, display: str) -> Context:
    """A notebook's own evidence located by cell (`train.ipynb:cell 4:2`) instead of a row of the joined cells."""

    def located(evidence: Evidence) -> Evidence:
        if evidence.origin != "file" or evidence.path != display or source.notebook is None or not source.notebook.cells:
            return evidence
        cell = source.notebook.cell_at(evidence.line)
        return evidence._replace(cell=cell.number, line=evidence.line - cell.first_row + 1)

    return context.replace(evidence=tuple(located(e) for e in context.evidence))
