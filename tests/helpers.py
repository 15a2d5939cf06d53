"""Shared test helpers: lint a file or a source string the way the CLI does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from placement_lint.checker import FileChecker
from placement_lint.engine import run
from placement_lint.results import FileResult, RunOptions, RunResult
from placement_lint.rules import all_rules
from placement_lint.settings import Settings

CODES = tuple(rule.code for rule in all_rules())
SCRIPT = Path(sys.executable).parent / "placement-lint"


def run_script(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it; without FORCE_COLOR, so its output is plain."""
    assert SCRIPT.exists(), "the console script is installed with the package"
    environment = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, env={**environment, **(env or {})}, timeout=timeout
    )


def lint_repo(root: Path, **options: object) -> RunResult:
    """A folder checked as `placement-lint check --no-cache` checks it: its launches count."""
    return run([root], Settings(root=root, codes=CODES), RunOptions(**options), root)  # type: ignore[arg-type]


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


def imported_by_a_check(repo: Path, files: list[str], prefixes: tuple[str, ...], exit_code: int) -> list[str]:
    """The modules a `placement-lint check` of `files` imports whose names start with one of `prefixes`."""
    probe = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))), file=sys.stderr))\n"
        "from placement_lint.cli import main\n"
        f"main(['check', *{files!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == exit_code, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])
