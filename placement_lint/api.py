"""The Python API, for tools that embed placement-lint: the findings the command line prints, as objects.

    import placement_lint

    for finding in placement_lint.check(["train.py", "scripts/"]):
        print(finding.display, finding.row, finding.column, finding.code, finding.message)

Configuration is found and applied as by `placement-lint check`: the nearest pyproject.toml with a
`[tool.placement-lint]` table, then the keyword arguments over it. Nothing is cached and, except
`check(..., fix=True)`, nothing is written.
"""

from __future__ import annotations

import io
import os
import tokenize
import warnings
from collections.abc import Iterable
from pathlib import Path

from placement_lint.engine import run, run_source
from placement_lint.report.common import problems
from placement_lint.results import Finding, RunOptions, RunResult
from placement_lint.rules import rule_codes
from placement_lint.settings import ConfigError, Settings, check_context, settings_for

__all__ = ["CheckError", "Finding", "SuppressionWarning", "check", "check_source", "fix_source"]

Paths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
Selectors = str | Iterable[str] | None


class CheckError(Exception):
    """A path could not be checked (missing, unreadable, undecodable, unparseable) or the
    configuration is invalid: the command line's exit code 2. Every other file was still checked;
    their findings are in `findings`."""

    def __init__(self, errors: list[str], findings: list[Finding] | None = None) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
        self.findings = findings or []


class SuppressionWarning(RuntimeWarning):
    """A suppression comment that cannot do what it says (a `# noqa` naming a DPL code no rule has, a
    `# placement-lint: noqa` after code): warned about, as the command line warns, while every
    finding of the file is still returned. Where: `display` (the file as the findings name it), and
    1-based `row`, `column`, `end_row`, `end_column` as a Finding has them."""

    def __init__(self, message: str, display: str, row: int, column: int, end_row: int, end_column: int) -> None:
        super().__init__(message)
        self.display = display
        self.row, self.column, self.end_row, self.end_column = row, column, end_row, end_column


def check(
    paths: Paths,
    *,
    select: Selectors = None,
    ignore: Selectors = None,
    extend_select: Selectors = None,
    context: str | None = None,
    fix: bool = False,
    unsafe_fixes: bool = False,
    config: str | os.PathLike[str] | None = None,
    ignore_noqa: bool = False,
    force_exclude: bool = False,
    jobs: int | None = 1,
) -> list[Finding]:
    """Check files and folders, as `placement-lint check PATHS` does, and return the findings left.

    `select`, `ignore`, `extend_select`: rule codes or prefixes (`"DPL001"`, `["DPL0"]`, `"ALL"`);
    `context`: the setup to assume for every file (`"zero3"`, `"ddp"`, ...), as `--context`;
    `fix` (with `unsafe_fixes`): write the fixes, as `--fix`; `config`: a pyproject.toml to use;
    `jobs`: worker processes (default 1: no process pool inside the caller's process; None: one per core).
    Raises `CheckError` when a path cannot be checked or the configuration is invalid; a mistaken
    suppression comment is a `SuppressionWarning`, and its file's findings are still returned."""
    targets = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
    cwd = Path.cwd()
    settings = _settings(targets[0] if targets else cwd, config, select, ignore, extend_select)
    options = RunOptions(
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        context=_context(context),
        jobs=jobs,
        ignore_noqa=ignore_noqa,
        force_exclude=force_exclude,
    )
    result = run(targets or [cwd], settings, options, cwd)
    if result.interrupted:
        raise KeyboardInterrupt
    return _findings(result)


def check_source(
    text: str | bytes,
    filename: str | os.PathLike[str] = "<stdin>",
    *,
    select: Selectors = None,
    ignore: Selectors = None,
    extend_select: Selectors = None,
    context: str | None = None,
    config: str | os.PathLike[str] | None = None,
    ignore_noqa: bool = False,
) -> list[Finding]:
    """Check source text as the file `filename` (which need not exist), as an editor does: that
    path's configuration, per-file settings and repository launch context apply. Writes nothing."""
    return _check_text(text, filename, False, False, select, ignore, extend_select, context, config, ignore_noqa)[1]


def fix_source(
    text: str | bytes,
    filename: str | os.PathLike[str] = "<stdin>",
    *,
    unsafe_fixes: bool = False,
    select: Selectors = None,
    ignore: Selectors = None,
    extend_select: Selectors = None,
    context: str | None = None,
    config: str | os.PathLike[str] | None = None,
) -> tuple[str, list[Finding]]:
    """Apply the safe fixes (and the unsafe ones with `unsafe_fixes`) to source text checked as the
    file `filename`; return the fixed text and the findings left in it. Writes nothing."""
    return _check_text(text, filename, True, unsafe_fixes, select, ignore, extend_select, context, config, False)


def _check_text(
    text: str | bytes,
    filename: str | os.PathLike[str],
    fix: bool,
    unsafe_fixes: bool,
    select: Selectors,
    ignore: Selectors,
    extend_select: Selectors,
    context: str | None,
    config: str | os.PathLike[str] | None,
    ignore_noqa: bool,
) -> tuple[str, list[Finding]]:
    raw = text if isinstance(text, bytes) else _encode(text)
    path = Path(filename)
    settings = _settings(path, config, select, ignore, extend_select)
    options = RunOptions(fix=fix, unsafe_fixes=unsafe_fixes, context=_context(context), ignore_noqa=ignore_noqa)
    result = run_source(raw, path, settings, options)
    findings = _findings(result, depth=2)  # check_source/fix_source -> _check_text
    file = result.files[0]
    if file.source is not None:
        return file.source.file_text, findings
    return (text if isinstance(text, str) else raw.decode("utf-8", "replace")), findings


def _encode(text: str) -> bytes:
    """Source text as the bytes a file would hold: in the encoding its cookie declares, else UTF-8."""
    head = "".join(text.splitlines(keepends=True)[:2]).encode("utf-8", "replace")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(head).readline)
        return text.encode("utf-8" if encoding == "utf-8-sig" else encoding)
    except (SyntaxError, LookupError, UnicodeEncodeError):
        return text.encode("utf-8", "surrogatepass")


def _settings(
    start: Path,
    config: str | os.PathLike[str] | None,
    select: Selectors,
    ignore: Selectors,
    extend_select: Selectors,
) -> Settings:
    try:
        return settings_for(
            start,
            Path(config) if config is not None else None,
            Path.cwd(),
            rule_codes(),
            _selectors(select),
            _selectors(ignore),
            _selectors(extend_select),
            prefix="",
        )
    except ConfigError as exc:
        raise CheckError([str(exc)]) from None


def _context(value: str | None) -> str | None:
    try:
        return None if value is None else check_context(value, "context")
    except ConfigError as exc:
        raise CheckError([str(exc)]) from None


def _selectors(value: Selectors) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _findings(result: RunResult, depth: int = 1) -> list[Finding]:
    """`depth`: how many of this module's functions stand between the caller and this one, so a
    warning names the caller's line."""
    found = problems(result)
    for problem in found:
        if problem.level == "warning" and problem.place is not None:
            place = problem.place
            warning = SuppressionWarning(
                problem.message, problem.display or "", place.row, place.column, place.end_row, place.end_column
            )
            warnings.warn(warning, stacklevel=2 + depth)
        elif problem.level == "warning":
            warnings.warn(problem.message, RuntimeWarning, stacklevel=2 + depth)
    errors = [problem.message for problem in found if problem.level == "error"]
    if errors:
        raise CheckError(errors, result.findings)
    return result.findings
