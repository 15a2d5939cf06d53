"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit against a temporary repository.

pre-commit builds a virtualenv and pip-installs this project into it (from the package index, as
a user's machine does), so this module is slow: the hooks repository and PRE_COMMIT_HOME are
module-scoped and the environment is built once for every test here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PRE_COMMIT = shutil.which("pre-commit", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PRE_COMMIT is None, reason="the pre-commit executable is missing: pip install '.[test]'"),
]

ZERO3_TRAIN = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # spread it
Trainer(model=model, args=args).train()
"""
NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": ["print('hello')\n"]}],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}
_SKIP = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".placement_lint_cache", ".hypothesis"}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=cwd, env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _env(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GIT_DIR", "GIT_INDEX", "GIT_WORK_TREE"))}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    if home is not None:
        env["PRE_COMMIT_HOME"] = str(home)
    return env


def _project_files() -> list[Path]:
    """This project's files as a clone would have them, plus what is new in the working tree."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
        return [ROOT / name for name in listed.split("\0") if name and os.path.lexists(ROOT / name)]
    return [p for p in ROOT.rglob("*") if p.is_file() and not _SKIP.intersection(p.relative_to(ROOT).parts)]


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This project as a committed git repository. try-repo takes committed files (and changes to
    tracked ones, not new files) from a working tree, so the tree as it is now is committed first;
    a clean repository is also what lets pre-commit reuse one environment for every run here."""
    repo = tmp_path_factory.mktemp("hooks") / "placement-lint"
    for path in _project_files():
        target = repo / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target, follow_symlinks=False)
    assert (repo / ".pre-commit-hooks.yaml").is_file()
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "snapshot", cwd=repo)
    return repo, git("rev-parse", "HEAD", cwd=repo)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's repository: a ZeRO-3 script with a fixable finding, the same script in an excluded
    folder, and a notebook (the hooks take `jupyter` files too)."""
    repo = tmp_path / "user-repo"
    (repo / "legacy").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[tool.placement-lint]\nextend-exclude = ["legacy"]\n')
    (repo / "train.py").write_text(ZERO3_TRAIN)
    (repo / "legacy" / "old_train.py").write_text(ZERO3_TRAIN)
    (repo / "explore.ipynb").write_text(json.dumps(NOTEBOOK, indent=1) + "\n")
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    return repo


def pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    assert PRE_COMMIT is not None
    return subprocess.run(
        [PRE_COMMIT, *args, "--color", "never"], cwd=cwd, env=_env(home), capture_output=True, text=True, timeout=900
    )


def test_try_repo_check_hook_reports_and_force_excludes(
    hooks_repo: tuple[Path, str], pre_commit_home: Path, project: Path
) -> None:
    repo, _ = hooks_repo
    done = pre_commit("try-repo", str(repo), "placement-lint", "--all-files", cwd=project, home=pre_commit_home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "placement-lint" in done.stdout and "Failed" in done.stdout
    assert "train.py:4:65: DPL001 [*]" in done.stdout
    # pre-commit names legacy/old_train.py too; --force-exclude applies the configured exclude to it.
    assert "legacy/old_train.py" not in done.stdout
    # A run error starts its line ("error: cannot parse ..."); a finding's "= error:" note quotes the library.
    assert not re.search(r"^error:", done.stdout, re.M), "the notebook pre-commit passed must not be an error"
    assert (project / "train.py").read_text() == ZERO3_TRAIN


def test_try_repo_fix_hook_fixes_then_check_passes(hooks_repo: tuple[Path, str], pre_commit_home: Path, project: Path) -> None:
    repo, _ = hooks_repo
    fixed = pre_commit("try-repo", str(repo), "placement-lint-fix", "--all-files", cwd=project, home=pre_commit_home)
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr  # pre-commit fails a hook that modified files
    assert "files were modified by this hook" in fixed.stdout
    assert (project / "train.py").read_text() == ZERO3_TRAIN.replace('device_map="auto"', "device_map=None")
    assert (project / "legacy" / "old_train.py").read_text() == ZERO3_TRAIN
    checked = pre_commit("try-repo", str(repo), "placement-lint", "--all-files", cwd=project, home=pre_commit_home)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Passed" in checked.stdout


def test_pre_commit_config_runs_both_hooks(hooks_repo: tuple[Path, str], pre_commit_home: Path, project: Path) -> None:
    """The README's .pre-commit-config.yaml, pointing at the hooks repository by path and rev."""
    repo, rev = hooks_repo
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n      - id: placement-lint-fix\n      - id: placement-lint\n"
    )
    git("add", "-A", cwd=project)
    first = pre_commit("run", "--all-files", cwd=project, home=pre_commit_home)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout
    assert "device_map=None)  # spread it" in (project / "train.py").read_text()
    git("add", "-A", cwd=project)
    second = pre_commit("run", "--all-files", cwd=project, home=pre_commit_home)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("Passed") == 2


LAUNCHED_TRAIN = """from transformers import AutoModelForCausalLM, Trainer

model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")
Trainer(model=model).train()
"""


@pytest.mark.parametrize(
    ("changed", "content"),
    [
        ("scripts/run.sh", "torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n"),
        ("configs/ds.json", '{"zero_optimization": {"stage": 3}}\n'),
        ("README.md", "```bash\ntorchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n```\n"),
    ],
)
def test_a_commit_that_changes_only_a_launch_script_config_or_doc_is_checked(
    hooks_repo: tuple[Path, str], pre_commit_home: Path, tmp_path: Path, changed: str, content: str
) -> None:
    """`python train.py` becomes `torchrun ... --deepspeed`: train.py is not staged, but it is checked."""
    repo, _ = hooks_repo
    project = tmp_path / "launches"
    (project / "scripts").mkdir(parents=True)
    (project / "configs").mkdir()
    (project / "train.py").write_text(LAUNCHED_TRAIN)
    (project / "scripts" / "run.sh").write_text("python train.py\n")
    (project / "configs" / "ds.json").write_text('{"zero_optimization": {"stage": 2}}\n')
    (project / "README.md").write_text("# Train\n")
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "single process", cwd=project)
    if changed == "configs/ds.json":  # the launch is there, with ZeRO-2: the change makes it ZeRO-3
        (project / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n")
        git("commit", "-q", "-am", "ZeRO-2", cwd=project)
    (project / changed).write_text(content)
    git("add", changed, cwd=project)
    done = pre_commit("try-repo", str(repo), "placement-lint", "--files", changed, cwd=project, home=pre_commit_home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^train\.py:3:\d+: DPL001", done.stdout, re.M), done.stdout
