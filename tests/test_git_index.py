"""The git index reader gives the paths `git ls-files` gives, and nothing (never an error) for an
index it cannot read; a launch script committed under a folder .gitignore leaves out is followed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from placement_lint.git_index import tracked_paths

from helpers import lint_repo

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

TRAIN = (
    "from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments\n"
    "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
    'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
    "Trainer(model=model, args=args).train()\n"
)


def git(repo: Path, *args: str) -> str:
    environment = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, env=environment)
    return done.stdout


@needs_git
@pytest.mark.parametrize("version", [2, 3, 4])
def test_the_paths_are_those_git_lists(tmp_path: Path, version: int) -> None:
    git(tmp_path, "init", "-q", ".")
    for name in ("a/x.py", "a/b/y.sh", "scripts/run.sh", "sp ace/é.md", "README.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    (tmp_path / ".gitignore").write_text("scripts/\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "add", "-f", "scripts/run.sh")
    blob = git(tmp_path, "hash-object", "-w", "README.md").strip()
    long_path = "/".join(["d" * 200] * 21) + "/f.txt"  # past the 12 bits of an entry's name length
    git(tmp_path, "update-index", "--add", "--cacheinfo", f"100644,{blob},{long_path}")
    if version >= 3:
        (tmp_path / "new.py").write_text("x\n")
        git(tmp_path, "add", "-N", "new.py")  # intent to add: an entry with extended flags
    git(tmp_path, "update-index", "--index-version", str(version))
    listed = sorted(git(tmp_path, "ls-files", "-z").split("\0")[:-1])
    assert sorted(tracked_paths(tmp_path) or []) == listed
    assert int.from_bytes((tmp_path / ".git" / "index").read_bytes()[4:8], "big") == version


@pytest.mark.parametrize(
    "index",
    [
        b"",
        b"DIRC",
        b"DIRC\x00\x00\x00\x02\x00\x00\x00\x05",  # five entries announced, none there
        b"DIRC\x00\x00\x00\x07\x00\x00\x00\x00",  # an unknown version
        b"XXXX\x00\x00\x00\x02\x00\x00\x00\x00",
        b"DIRC\x00\x00\x00\x02\x00\x00\x00\x01" + bytes(62) + b"no-nul-after-this",
    ],
)
def test_an_index_it_cannot_read_gives_nothing(tmp_path: Path, index: bytes) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "index").write_bytes(index)
    assert tracked_paths(tmp_path) is None


def test_no_git_folder_or_no_index_gives_nothing(tmp_path: Path) -> None:
    assert tracked_paths(tmp_path) is None
    (tmp_path / ".git").mkdir()
    assert tracked_paths(tmp_path) is None
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text("gitdir: ../.git/worktrees/wt\n")  # a worktree: its index is elsewhere
    assert tracked_paths(tmp_path / "wt") is None


@needs_git
@pytest.mark.parametrize("committed", [True, False])
def test_a_launch_script_committed_under_an_ignored_folder_is_followed(tmp_path: Path, committed: bool) -> None:
    # MiniCPM: `.gitignore` holds `scripts/`, and its DeepSpeed scripts are committed there all the same.
    (tmp_path / "scripts").mkdir()
    (tmp_path / ".gitignore").write_text("scripts/\n")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --output_dir out\n")
    git(tmp_path, "init", "-q", ".")
    git(tmp_path, "add", "-A")
    if committed:
        git(tmp_path, "add", "-f", "scripts/run.sh")
    found = [(f.code, f.violation.message) for f in lint_repo(tmp_path).findings]
    if committed:
        assert [code for code, _ in found] == ["DPL001"]
    else:  # a script only on this disk, which the repository ignores: not the repository's launch
        assert found == []


@needs_git
def test_a_cached_context_with_a_tracked_launcher_is_reused_until_the_script_changes(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import placement_lint.context.repo as repo_module
    from placement_lint.engine import run
    from placement_lint.results import RunOptions
    from placement_lint.settings import Settings

    from helpers import CODES

    (tmp_path / "scripts").mkdir()
    (tmp_path / ".gitignore").write_text("scripts/\n")
    (tmp_path / "train.py").write_text(TRAIN)
    script = tmp_path / "scripts" / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 train.py --output_dir out\n")
    git(tmp_path, "init", "-q", ".")
    git(tmp_path, "add", "-A")
    git(tmp_path, "add", "-f", "scripts/run.sh")
    builds = []
    build = repo_module.build_repo_context
    monkeypatch.setattr(repo_module, "build_repo_context", lambda *a, **k: builds.append(1) or build(*a, **k))

    def check() -> list[str]:
        result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(), tmp_path, tmp_path / ".cache")
        return [f.code for f in result.findings]

    assert check() == ["DPL001"] and len(builds) == 1
    assert check() == ["DPL001"] and len(builds) == 1  # the walk does not meet the script: the cache still holds
    script.write_text("python train.py --output_dir out\n")
    assert check() == [] and len(builds) == 2
