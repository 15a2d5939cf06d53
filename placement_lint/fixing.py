"""Fixing one checked file: its fixes applied until they settle, then written (atomically, only if
the file is unchanged on disk and the result parses), or shown as a diff. A notebook is written as
its JSON with only the changed cells' sources changed. Imported only by a run that fixes or diffs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.notebook import NotebookSource, notebook_source
from placement_lint.results import FileResult, RunOptions, fix_in_cell
from placement_lint.source import SourceError, SourceFile, split_lines

if TYPE_CHECKING:
    from placement_lint.fixes.apply import Fixable
    from placement_lint.rules.violation import Violation


def fix_file(
    path: Path,
    source: SourceFile,
    violations: list[Violation],
    result: FileResult,
    write: bool,
    options: RunOptions,
    lint: Callable[[SourceFile], list[Violation]],
    defer_write: bool = False,
) -> list[Violation]:
    """Apply a checked file's fixes until they settle (`lint` checks each fixed text again), then write
    them (with `defer_write`, leave them in `result.unwritten` for the caller to write), or with --diff
    show them; what cannot be fixed is said in `result`. The violations left."""
    import difflib

    from placement_lint.fixes.apply import FixFailed, fix_to_fixed_point
    from placement_lint.fixes.notebook import NotebookFixError, cell_diff
    from placement_lint.fixes.notebook import rewrite as rewrite_notebook
    from placement_lint.fixes.write import ChangedOnDisk, NotLossless, verify_lossless, write_atomically

    if not source.round_trips:
        result.warnings.append(f"{result.display}: not fixed: its text does not encode back to the same bytes")
        return violations

    def relint(text: str) -> list[Fixable]:
        nonlocal latest
        try:
            latest = lint(source.with_text(text))
        except SourceError as exc:
            raise FixFailed(str(exc)) from exc
        return [(v.code, v.fix, v.start) for v in latest]

    latest = violations
    try:
        outcome = fix_to_fixed_point(source.text, relint, options.allowed, [(v.code, v.fix, v.start) for v in violations])
    except FixFailed as exc:
        result.warnings.append(f"{result.display}: fixes reverted, the fixed file would not parse ({exc})")
        return violations
    if not outcome.converged:
        result.warnings.append(f"{result.display}: fixes did not converge after several passes")
    if isinstance(source, NotebookSource):  # a fix is listed by its cell and line, as findings are
        outcome.applied = [fix_in_cell(source, applied) for applied in outcome.applied]
    if outcome.text == source.text:
        return violations
    new_source = source.with_text(outcome.text)
    # What is written: the fixed text, or for a notebook its JSON with only the changed cells' sources.
    data, expected, cell_changes = new_source.raw, source.raw, None
    notebook = source.notebook if isinstance(source, NotebookSource) else None
    if notebook is not None:
        try:
            rewritten = rewrite_notebook(notebook, outcome.text, outcome.passes)
        except NotebookFixError as exc:
            result.warnings.append(f"{result.display}: not fixed: {exc}")
            return violations
        data, expected, cell_changes = rewritten.raw, notebook.raw, rewritten.changes
    if options.diff and cell_changes is not None:
        result.diff = cell_diff(result.display, cell_changes)
        result.fixed = outcome.applied
        return violations
    if options.diff:
        lines = difflib.unified_diff(
            split_lines(source.text),
            split_lines(outcome.text),
            fromfile=f"a/{result.display}",
            tofile=f"b/{result.display}",
        )
        # As `diff -u` does, mark a last line without a newline instead of running into the next file.
        result.diff = "".join(
            line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines
        )
        result.fixed = outcome.applied
        return violations
    try:
        verify_lossless(source.raw, new_source.raw)
        if write and defer_write:
            result.unwritten = (data, expected)
        elif write:
            write_atomically(path, data, expected)
    except NotLossless as exc:
        result.warnings.append(f"{result.display}: fixes reverted, the fixed file would not parse ({exc})")
        return violations
    except ChangedOnDisk:
        result.warnings.append(f"{result.display}: not fixed: the file changed while it was being checked")
        return violations
    except OSError as exc:
        result.error = f"cannot write fix: {exc.strerror or exc}"
        return violations
    result.fixed = outcome.applied
    result.source = notebook_source(path, rewritten.notebook) if notebook is not None else new_source
    return latest
