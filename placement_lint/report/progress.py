"""A progress bar on stderr for long runs, and the decision when to show one: from the first second,
whether the run is finding files, reading the launch context or checking.

Only for a person watching: stderr is a terminal, no CI (whose logs would keep every redraw), a
human output format, not `-q`; and only once the run is long (many files, or a second gone), so a
quick run never flickers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from placement_lint.report.formats import is_human

MANY_FILES = 2000
LONG_RUN_SECONDS = 1.0
# Set by the CI services whose runners could give a job a terminal; most also set CI.
_CI_VARIABLES = (
    "CI",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "BUILDKITE",
    "CIRCLECI",
    "TRAVIS",
    "TF_BUILD",
    "JENKINS_URL",
    "TEAMCITY_VERSION",
)


def progress_wanted(stderr_is_tty: bool, environ: Mapping[str, str], output_format: str, quiet: bool) -> bool:
    """May this run show a progress bar at all?"""
    if not stderr_is_tty or quiet or not is_human(output_format):
        return False
    if environ.get("TERM") == "dumb":
        return False
    return not any(environ.get(name, "").strip().lower() not in ("", "0", "false") for name in _CI_VARIABLES)


def progress_due(total: int, elapsed: float) -> bool:
    """Is the run long enough for a bar: many files, or already more than a second?"""
    return total >= MANY_FILES or elapsed >= LONG_RUN_SECONDS


class ProgressBar:
    """`bar(done, total)` as the engine reports files, and `bar.stage(name, done, total)` as it finds
    the files and reads the launch context before them (total None: not known yet); the rich bar
    starts only once it is due, whichever stage the run is in."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self._progress = None  # type: ignore[var-annotated]
        self._task = None  # type: ignore[var-annotated]
        self._stage = ""

    def __call__(self, done: int, total: int) -> None:
        self.stage("Checking", done, total)

    def stage(self, name: str, done: int, total: int | None = None) -> None:
        if self._progress is None:
            if not progress_due(total or 0, self._clock() - self._started):
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,  # gone when the run ends: the findings follow
            )
            self._progress.start()
            self._task = self._progress.add_task(name, total=total)
            self._stage = name
        elif name != self._stage:  # a task of its own: a stage's total may be unknown, where the last one's was not
            self._progress.remove_task(self._task)
            self._task = self._progress.add_task(name, total=total)
            self._stage = name
        self._progress.update(self._task, completed=done, total=total)

    @property
    def shown(self) -> bool:
        return self._progress is not None

    @property
    def description(self) -> str | None:
        """What the bar says the run is doing (None before it is shown)."""
        if self._progress is None:
            return None
        return self._stage

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
