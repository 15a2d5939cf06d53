"""What a run returns: per-file results with their findings located, and the run's options. The data
every layer above the checker shares; light, so a run the cache answers imports nothing heavier."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from placement_lint.context.evidence import Context
    from placement_lint.edits import Applicability
    from placement_lint.fixes.apply import AppliedFix  # imported only by a run that fixes, diffs or adds noqa
    from placement_lint.rules.violation import Violation
    from placement_lint.source import SourceFile


# Records that are never changed after they are made are named tuples: creating a dataclass costs a
# warm run about 1% of its time, and every run imports this module.


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
        from placement_lint.edits import Applicability  # asked only of a run with fixes to show or apply

        return {Applicability.SAFE, Applicability.UNSAFE} if self.unsafe_fixes else {Applicability.SAFE}

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


@dataclass(frozen=True)
class Finding:
    display: str
    violation: Violation
    context: Context
    row: int
    column: int
    end_row: int
    end_column: int
    # The line whose comment can suppress it (0: its first line); a function when it is worked out on
    # demand: it tokenizes the file, which only the JSON output asks for.
    noqa_row_of: int | _NoqaRow = 0
    cell: int | None = None  # in a notebook: the cell (1-based among all cells); rows and columns are in it

    @property
    def noqa_row(self) -> int:
        if isinstance(self.noqa_row_of, _NoqaRow):
            object.__setattr__(self, "noqa_row_of", self.noqa_row_of.row())
        return self.noqa_row_of  # type: ignore[return-value]

    @property
    def code(self) -> str:
        return self.violation.code

    @property
    def message(self) -> str:
        return self.violation.message


@dataclass
class FileResult:
    display: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    fixed: list[AppliedFix] = field(default_factory=list)  # with --fix: written; with --diff: would be
    diff: str | None = None
    warnings: list[str] = field(default_factory=list)
    source: SourceFile | None = None
    path: Path | None = None
    dependencies: list[Path] = field(default_factory=list)  # configs the file's own evidence read


class Screened(NamedTuple):
    """What reading and pre-checking a file (and checking it, if that was due) gave."""

    digest: str | None  # its content hash, for the cache
    result: FileResult | None = None  # findings, an error or a warning; None: nothing to report
    raw: bytes | None = None  # a rule could fire in it: the bytes still to check
    cacheable: bool = True


@dataclass
class RunResult:
    files: list[FileResult]
    checked: int
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    interrupted: int = 0  # files not checked because the run was interrupted
    noqa_added: int = 0  # --add-noqa: comments written
    baselined: list[Finding] = field(default_factory=list)  # --add-noqa: the findings they suppress

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
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return str(path)
