"""Editors and pre-commit: `check -` / `--stdin-filename`, and --force-exclude."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement_lint.cli import main
from placement_lint.discover import discover
from placement_lint.settings import Settings

from helpers import CODES, SCRIPT

# Nothing in the file says DeepSpeed: only the launch script does.
LOADER = """from transformers import AutoModelForCausalLM


def load(name):
    return AutoModelForCausalLM.from_pretrained(name, device_map="auto")


model = load("gpt2")
"""
ZERO3_LAUNCH = "#!/bin/bash\naccelerate launch --use_deepspeed --zero_stage 3 --num_processes 8 src/train.py\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text(ZERO3_LAUNCH)
    (tmp_path / "src" / "train.py").write_text("print('the version on disk is not what is checked')\n")
    return tmp_path


def stdin(args: list[str], source: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    # DPL001 only: what is checked here is how stdin is read and answered, not which rules fire.
    command = [str(SCRIPT), "check", "--select", "DPL001", *args]
    return subprocess.run(command, cwd=cwd, input=source.encode(), capture_output=True, timeout=120)


def test_stdin_is_checked_as_the_named_file_with_its_launch_context(repo: Path) -> None:
    done = stdin(["--no-color", "--stdin-filename", "src/train.py", "-"], LOADER, repo)
    assert done.returncode == 1, done.stderr
    out = done.stdout.decode()
    assert "src/train.py:5:66: DPL001" in out
    assert "scripts/run.sh:2" in out, "the launch script's evidence is named"
    assert not (repo / ".placement_lint_cache").exists(), "stdin runs write no cache"


def test_stdin_outside_any_repository_sees_the_launches_check_sees(repo: Path) -> None:
    """No marker: the working folder stands for the repository, for an editor's buffer as for `check`."""
    (repo / ".git").rmdir()
    done = stdin(["--no-color", "--stdin-filename", "src/train.py", "-"], LOADER, repo)
    assert done.returncode == 1 and "scripts/run.sh:2" in done.stdout.decode(), done.stderr


def test_stdin_filename_alone_reads_stdin_and_dash_alone_too(repo: Path) -> None:
    assert stdin(["--stdin-filename", "src/train.py"], LOADER, repo).returncode == 1
    plain = stdin(["-", "--context", "zero3", "--output-format", "concise"], LOADER, repo)
    assert plain.returncode == 1
    assert plain.stdout.decode().startswith("-:5:66: DPL001")


def test_stdin_fix_writes_only_the_fixed_source_to_stdout(repo: Path) -> None:
    done = stdin(["--fix", "--unsafe-fixes", "--stdin-filename", "src/train.py"], LOADER, repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == LOADER.replace('device_map="auto"', "device_map=None")
    assert "Fixed 1 problem" in done.stderr.decode()
    assert "on disk" in (repo / "src" / "train.py").read_text(), "the file on disk is not touched"


def test_stdin_fix_leaves_what_remains_on_stderr(repo: Path) -> None:
    done = stdin(["--fix", "--no-color", "--stdin-filename", "src/train.py"], LOADER, repo)  # an unsafe fix only
    assert done.returncode == 1
    assert done.stdout.decode() == LOADER
    assert "src/train.py:5:66: DPL001" in done.stderr.decode()


def test_stdin_that_does_not_parse_is_echoed_with_fix_and_is_an_error(repo: Path) -> None:
    broken = "def f(:\n    device_map='auto'\n"
    done = stdin(["--fix", "--context", "zero3", "--stdin-filename", "src/train.py"], broken, repo)
    assert done.returncode == 2
    assert done.stdout.decode() == broken
    assert "src/train.py: cannot parse" in done.stderr.decode()


def test_stdin_gets_the_per_file_settings_of_its_name(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.placement-lint]\nper-file-ignores = { "src/train.py" = ["DPL001"] }\n')
    assert stdin(["--stdin-filename", "src/train.py"], LOADER, repo).returncode == 0
    assert stdin(["--stdin-filename", "src/other.py", "--context", "zero3"], LOADER, repo).returncode == 1


def test_stdin_with_force_exclude_on_an_excluded_name_checks_nothing(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.placement-lint]\nextend-exclude = ["src"]\n')
    args = ["--context", "zero3", "--stdin-filename", "src/train.py"]
    assert stdin(args, LOADER, repo).returncode == 1
    assert stdin(["--force-exclude", *args], LOADER, repo).returncode == 0
    fixed = stdin(["--force-exclude", "--fix", *args], LOADER, repo)
    assert fixed.returncode == 0 and fixed.stdout.decode() == LOADER


def test_stdin_and_other_paths_is_an_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["check", "--stdin-filename", "x.py", "src"], input=LOADER)
    assert result.exit_code == 2 and "stdin is checked alone" in result.output


# -- --force-exclude -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exclude", "named"),
    [
        (("legacy",), "legacy/old/train.py"),  # a plain name matches a folder above the file
        (("legacy/old",), "legacy/old/train.py"),  # a path pattern, from the project root
        (("*_old.py",), "src/train_old.py"),  # a glob on the file itself
        (("legacy",), "legacy"),  # a folder named on the command line
    ],
)
def test_force_exclude_applies_the_excludes_to_named_paths(tmp_path: Path, exclude: tuple[str, ...], named: str) -> None:
    for name in ("legacy/old/train.py", "src/train_old.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    settings = Settings(root=tmp_path, codes=CODES, extend_exclude=exclude)
    assert discover([tmp_path / named], settings).files, "without the flag a named path is always checked"
    assert discover([tmp_path / named], settings, force_exclude=True).files == []
    assert discover(
        [tmp_path / "src" / "train_old.py", tmp_path / "legacy"], Settings(root=tmp_path, codes=CODES), force_exclude=True
    ).files


def test_force_exclude_ignores_gitignore_like_ruff(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("generated.py\n")
    (tmp_path / "generated.py").write_text("x = 1\n")
    settings = Settings(root=tmp_path, codes=CODES)
    assert discover([tmp_path / "generated.py"], settings, force_exclude=True).files == [tmp_path / "generated.py"]
    assert discover([tmp_path], settings).files == []


def test_force_exclude_matches_only_inside_the_project(tmp_path: Path) -> None:
    """A folder above the project that happens to be called `build` excludes nothing."""
    project = tmp_path / "build" / "project"
    project.mkdir(parents=True)
    (project / "train.py").write_text("x = 1\n")
    settings = Settings(root=project, codes=CODES)
    assert discover([project / "train.py"], settings, force_exclude=True).files == [project / "train.py"]
