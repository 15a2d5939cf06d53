"""Shared test helpers: lint a file or a source string the way the CLI does."""

from __future__ import annotations

from pathlib import Path

from placement_lint.checker import FileChecker
from placement_lint.results import FileResult, RunOptions
from placement_lint.rules import all_rules
from placement_lint.settings import Settings

CODES = tuple(rule.code for rule in all_rules())


def checker(root: Path, extend_select: tuple[str, ...] = (), **options: object) -> FileChecker:
    """`extend_select`: rules to enable on top of the default set (DPL100 is off by default)."""
    settings = Settings(root=root, codes=CODES, extend_select=extend_select)
    return FileChecker(settings, RunOptions(**options), root)  # type: ignore[arg-type]


def lint_file(path: Path, extend_select: tuple[str, ...] = (), **options: object) -> FileResult:
    return checker(path.parent, extend_select, **options).check(path)


def lint_source(
    tmp_path: Path, source: str, name: str = "train.py", extend_select: tuple[str, ...] = (), **options: object
) -> FileResult:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return lint_file(path, extend_select, **options)


def codes(result: FileResult) -> list[str]:
    return [finding.code for finding in result.findings]


def notes_of(finding) -> str:  # type: ignore[no-untyped-def]
    """A finding's notes as a golden shows them, one indented line each under its headline."""
    return "".join(f"    = {note.label}: {note.text}\n" for note in finding.violation.notes)
