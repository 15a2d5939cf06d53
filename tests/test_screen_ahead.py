"""The pre-check a child works out while the launch context is built (screen_ahead.py) changes no
finding and no cache entry, however far the child got."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_lint import engine, screen_ahead
from placement_lint.engine import run
from placement_lint.report.json_format import render
from placement_lint.results import RunOptions, RunResult
from placement_lint.settings import Settings

from helpers import CODES

FIXTURES = Path(__file__).parent / "fixtures"
REPOS = sorted(p for p in (FIXTURES / "launch").iterdir() if p.is_dir())
EXAMPLES = Path(__file__).parent.parent / "examples"

pytestmark = pytest.mark.skipif(not engine._CAN_FORK, reason="screening ahead needs a forking platform")


def _findings(root: Path, cache: Path | None = None) -> str:
    """The findings as the JSON report gives them, with every note and related place."""
    return render(_lint(root, cache), root)


def _lint(root: Path, cache: Path | None = None) -> RunResult:
    return run([root], Settings(root=root, codes=CODES), RunOptions(jobs=2), root, cache)


@pytest.fixture
def answers_used(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Screening ahead for any run that builds a context, with the child let through every file;
    gives how many answers each run took."""
    taken: list[int] = []
    stop = screen_ahead.ScreeningAhead.stop

    def stop_when_done(self: screen_ahead.ScreeningAhead, wait: bool = False) -> dict[str, tuple[int, str | None]]:
        answers = stop(self, wait=True)
        taken.append(len(answers))
        return answers

    monkeypatch.setattr(engine, "SCREEN_AHEAD_BYTES", 0)
    monkeypatch.setattr(engine, "SCREEN_AHEAD_LAUNCH_FILES", 0)
    monkeypatch.setattr(screen_ahead.ScreeningAhead, "stop", stop_when_done)
    return taken


@pytest.mark.parametrize("root", [*REPOS, EXAMPLES], ids=lambda p: p.name)
def test_screening_ahead_changes_no_finding(root: Path, monkeypatch: pytest.MonkeyPatch, answers_used: list[int]) -> None:
    ahead = _findings(root)
    monkeypatch.setattr(engine, "SCREEN_AHEAD_BYTES", 1 << 62)
    assert ahead == _findings(root)
    assert answers_used or _lint(root).checked < 2, "every repository with files to share screened ahead"


def test_the_answers_are_taken(answers_used: list[int]) -> None:
    result = _lint(EXAMPLES)
    assert answers_used and answers_used[0] == result.checked > 0
    assert result.findings


def test_a_child_stopped_half_way_changes_no_finding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Files it did not reach are pre-checked by the run, as without it."""
    root = EXAMPLES
    expected = _findings(root)
    real = screen_ahead._screen
    monkeypatch.setattr(screen_ahead, "_screen", lambda names, *rest: real(names[: len(names) // 2], *rest))
    monkeypatch.setattr(engine, "SCREEN_AHEAD_BYTES", 0)
    monkeypatch.setattr(engine, "SCREEN_AHEAD_LAUNCH_FILES", 0)
    stop = screen_ahead.ScreeningAhead.stop
    monkeypatch.setattr(screen_ahead.ScreeningAhead, "stop", lambda self, wait=False: stop(self, wait=True))
    assert _findings(root) == expected


def test_the_cache_gets_the_same_entries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answers_used: list[int]) -> None:
    root = EXAMPLES
    _lint(root, tmp_path / "ahead")
    monkeypatch.setattr(engine, "SCREEN_AHEAD_BYTES", 1 << 62)
    _lint(root, tmp_path / "not")
    assert answers_used, "the first run screened ahead"

    def entries(folder: Path) -> dict[str, list[object]]:
        (written,) = [path for path in folder.rglob("*.json") if not path.name.startswith("repo-")]
        files = json.loads(written.read_text())["files"]
        return {
            path: [field for number, field in enumerate(entry) if number != 4] for path, entry in files.items()
        }  # 4: last seen

    assert entries(tmp_path / "ahead") == entries(tmp_path / "not")


def test_no_process_to_spare_changes_no_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _findings(EXAMPLES)

    def no_fork() -> int:
        raise BlockingIOError("Resource temporarily unavailable")

    monkeypatch.setattr(engine, "SCREEN_AHEAD_BYTES", 0)
    monkeypatch.setattr(engine, "SCREEN_AHEAD_LAUNCH_FILES", 0)
    monkeypatch.setattr(screen_ahead.os, "fork", no_fork)
    assert _findings(EXAMPLES) == expected
