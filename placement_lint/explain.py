"""What `placement-lint context` shows: the context every Python file gets, with its evidence
chain, without running the rules. Apart from the run (`engine`), which a check imports."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.context.launcher_names import launcher_name
from placement_lint.context.launches import Launches
from placement_lint.decode import read_source
from placement_lint.discover import discover, forget_listings
from placement_lint.engine import repo_contexts
from placement_lint.results import RunOptions, in_cells
from placement_lint.settings import Settings
from placement_lint.source import SourceError

if TYPE_CHECKING:
    from placement_lint.context.evidence import Context


@dataclass(frozen=True)
class FileContextReport:
    display: str
    contexts: list[Context]  # one per distinct setup among the file's parts, strongest evidence first
    error: str | None = None


def explain_contexts(
    paths: Iterable[Path], settings: Settings, cwd: Path, show_all: bool = False, notes: list[str] | None = None
) -> list[FileContextReport]:
    """The context every Python file gets, with its evidence chain, without running the rules. `notes`
    receives what the repositories' launch contexts left out or could not read (configs and version
    pins that do not parse, a YAML or a huge doc)."""
    from placement_lint.checker import FileChecker
    from placement_lint.context.in_file import PragmaError
    from placement_lint.notebook import NotebookSource, python_bytes
    from placement_lint.source import parse_python

    given = list(paths)
    forget_listings()
    found = discover(given, settings, also=launcher_name)
    repos = repo_contexts(found, settings, cwd)
    if notes is not None:
        notes += [warning for repo in repos for warning in repo.warnings]
    checker = FileChecker(settings, RunOptions(), cwd, Launches(repos))
    named = {Path(os.path.abspath(p)) for p in given if Path(p).is_file()}
    reports = []
    for path in found.files:
        display = checker.display(path)
        try:
            raw = path.read_bytes()
            if not (checker.has_context_tokens(python_bytes(path, raw), path) or path in named or show_all):
                continue
            source = read_source(path, raw)
            module = parse_python(source)
            contexts = checker.context_of(source, module, display)
        except OSError as exc:
            reports.append(FileContextReport(display, [], f"cannot read: {exc.strerror or exc}"))
            continue
        except (SourceError, PragmaError) as exc:
            reports.append(FileContextReport(display, [], str(exc)))
            continue
        distinct = contexts.distinct()
        if isinstance(source, NotebookSource):
            distinct = [in_cells(source, context, display) for context in distinct]
        if distinct or path in named or show_all:
            reports.append(FileContextReport(display, distinct))
    return reports
