"""A cached answer is the fresh answer: the cache keys everything a run's answer depends on (the root
and how it was found, the resolved settings, the launch context, the release). The runs go through
the command line in this process, as a user's do, each cached run beside a `--no-cache` one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement_lint.cli import main

TRAIN = """\
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

parser = HfArgumentParser(TrainingArguments)
(args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")
Trainer(model=model, args=args).train()
"""
MODEL_UTILS = """\
from transformers import AutoModelForCausalLM


def load():
    return AutoModelForCausalLM.from_pretrained("m", device_map="auto")
"""
LAUNCHED_TRAIN = "from transformers import Trainer\nfrom model_utils import load\n\nTrainer(model=load()).train()\n"
ZERO3_JSON = '{"zero_optimization": {"stage": 3}}\n'


def git_init(folder: Path) -> None:
    if shutil.which("git") is not None:
        subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    else:  # a `.git` folder is what marks a repository's root
        (folder / ".git").mkdir()


def check(folder: Path, *args: str, cache: bool = True) -> tuple[int, str]:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, ["check", *([] if cache else ["--no-cache"]), *args], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    return result.exit_code, result.output


def both(folder: Path, *args: str) -> tuple[tuple[int, str], tuple[int, str]]:
    """The cached run first (so it may answer from what earlier runs left), then a fresh one."""
    return check(folder, *args), check(folder, *args, cache=False)


@pytest.fixture
def no_root(tmp_path: Path) -> Path:
    """The issue's first repository: a ZeRO-3 launch of train.py from scripts/, and no `.git`."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n")
    (tmp_path / "configs" / "ds.json").write_text(ZERO3_JSON)
    return tmp_path


def test_git_init_gives_a_file_checked_alone_its_repository_s_launches(no_root: Path) -> None:
    # No root is known, and train.py is outside the working folder: only launchers beside it count,
    # and there are none (documented).
    assert check(no_root / "configs", "../train.py")[0] == 0
    git_init(no_root)
    cached, fresh = both(no_root / "configs", "../train.py")
    assert fresh[0] == 1 and "DPL001" in fresh[1]
    assert cached == fresh


def test_without_a_root_the_working_folder_stands_for_the_repository(no_root: Path) -> None:
    """From the top of a tree with no marker, a file or folder checked alone sees the launches `check .`
    sees, cached or not, in any order."""
    answers = {paths: both(no_root, *paths) for paths in [("train.py",), (".",), ("train.py",), ("scripts", "train.py")]}
    for cached, fresh in answers.values():
        assert cached == fresh and fresh[0] == 1 and "DPL001" in fresh[1] and "scripts/run.sh:1" in fresh[1]
    assert len({fresh for _, fresh in answers.values()}) == 1


@pytest.fixture
def launch_folder(tmp_path: Path) -> Path:
    """The issue's second repository: a launcher, its script and the helper it imports in `launch/`."""
    git_init(tmp_path)
    (tmp_path / "launch").mkdir()
    (tmp_path / "other.py").write_text("print('hello')\n")
    (tmp_path / "launch" / "model_utils.py").write_text(MODEL_UTILS)
    (tmp_path / "launch" / "train.py").write_text(LAUNCHED_TRAIN)
    (tmp_path / "launch" / "ds.json").write_text(ZERO3_JSON)
    (tmp_path / "launch" / "run.sh").write_text("deepspeed launch/train.py --deepspeed launch/ds.json\n")
    return tmp_path


def test_a_file_named_in_an_excluded_folder_gets_the_same_answer_cached_and_fresh(launch_folder: Path) -> None:
    (launch_folder / "pyproject.toml").write_text('[tool.placement-lint]\nextend-exclude = ["launch"]\n')
    assert check(launch_folder, ".") == (0, "All checks passed!\n")
    cached, fresh = both(launch_folder, "launch/model_utils.py")
    assert fresh[0] == 1 and "DPL001" in fresh[1]
    assert cached == fresh


def test_removing_the_settings_that_excluded_the_launch_folder_is_seen(launch_folder: Path) -> None:
    (launch_folder / "pyproject.toml").write_text('[tool.placement-lint]\nextend-exclude = ["launch"]\n')
    check(launch_folder, ".")
    (launch_folder / "pyproject.toml").unlink()
    cached, fresh = both(launch_folder, "launch/model_utils.py")
    assert fresh[0] == 1 and "DPL001" in fresh[1]
    assert cached == fresh


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "other.py").write_text("print('hello')\n")
    (tmp_path / "configs" / "ds.json").write_text(ZERO3_JSON)
    return tmp_path


@pytest.mark.parametrize("paths", [["."], ["train.py"]])
def test_a_script_a_launch_names_that_appears_later_gets_its_launch(repo: Path, paths: list[str]) -> None:
    (repo / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n")
    check(repo, ".")  # the launch names train.py, which is not there yet
    (repo / "train.py").write_text(TRAIN)
    cached, fresh = both(repo, *paths)
    assert fresh[0] == 1 and "DPL001" in fresh[1]
    assert cached == fresh


def test_a_module_an_import_names_that_comes_back_gets_its_launch(repo: Path) -> None:
    (repo / "launch").mkdir()
    (repo / "launch" / "train.py").write_text(LAUNCHED_TRAIN)
    (repo / "scripts" / "run.sh").write_text("deepspeed launch/train.py --deepspeed configs/ds.json\n")
    check(repo, ".")  # launch/train.py imports model_utils, which is not there yet
    (repo / "launch" / "model_utils.py").write_text(MODEL_UTILS)
    cached, fresh = both(repo, "launch/model_utils.py")
    assert fresh[0] == 1 and "DPL001" in fresh[1]
    assert cached == fresh


def test_a_launch_script_added_since_the_last_walk_is_seen_by_a_run_over_one_file(repo: Path) -> None:
    (repo / "train.py").write_text(TRAIN)
    assert check(repo, ".")[0] == 0
    (repo / "scripts" / "zero3.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n")
    cached, fresh = both(repo, "train.py")  # as pre-commit runs: no walk of the repository
    assert fresh[0] == 1
    assert cached == fresh


def test_an_editor_s_save_that_replaces_a_file_keeps_the_launch_context(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "train.py").write_text(TRAIN)
    (repo / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n")
    first = check(repo, "train.py")
    # A new file renamed over the old one, in a folder the context was built from: its mtime changes.
    (repo / "saved.tmp").write_bytes((repo / "other.py").read_bytes())
    os.replace(repo / "saved.tmp", repo / "other.py")

    def fail(*_: object) -> None:
        raise AssertionError("the launch context was built again")

    monkeypatch.setattr("placement_lint.context.repo.build_repo_context", fail)
    assert check(repo, "train.py") == first
    assert check(repo, "train.py") == first  # and the folders' new stamps were kept


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_launch_script_git_starts_tracking_in_an_ignored_folder_is_seen(tmp_path: Path) -> None:
    git_init(tmp_path)
    (tmp_path / "scripts").mkdir()
    (tmp_path / ".gitignore").write_text("scripts/\n")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "ds.json").write_text(ZERO3_JSON)
    (tmp_path / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed ds.json\n")
    assert check(tmp_path, ".")[0] == 0  # ignored, and not tracked: not the repository's
    subprocess.run(["git", "add", "-f", "scripts/run.sh"], cwd=tmp_path, check=True)
    cached, fresh = both(tmp_path, ".")
    assert fresh[0] == 1
    assert cached == fresh


def test_a_new_file_that_launches_nothing_keeps_the_launch_context(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An output (a log, a checkpoint) launches nothing and no launch or import names it as a script; a
    config a launch names is an input whether it was there or not."""
    (repo / "train.py").write_text(TRAIN)
    (repo / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n")
    first = check(repo, ".")
    (repo / "train.log").write_text("step 1\n")
    (repo / "configs" / "unused.json").write_text("{}\n")

    def fail(*_: object) -> None:
        raise AssertionError("the launch context was built again")

    monkeypatch.setattr("placement_lint.context.repo.build_repo_context", fail)
    assert check(repo, ".") == first


# -- Python files edited in place into launchers ---------------------------------------------------------

NOT_A_LAUNCHER = 'import subprocess\n\nprint("hello")\n'
TORCHRUN_ZERO3 = 'import subprocess\n\nsubprocess.run(["torchrun", "--nproc_per_node", "8", "train.py", "--deepspeed", "configs/ds_z3.json"])\n'


@pytest.fixture
def python_launch(tmp_path: Path) -> Path:
    """train.py and a ZeRO-3 config, no launch script: tools/run.py is a Python file that launches nothing."""
    git_init(tmp_path)
    (tmp_path / "tools").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "configs" / "ds_z3.json").write_text(ZERO3_JSON)
    (tmp_path / "tools" / "run.py").write_text(NOT_A_LAUNCHER)
    return tmp_path


@pytest.mark.parametrize("paths", [["."], ["train.py"], ["tools/run.py", "train.py"]])
def test_a_python_file_edited_in_place_into_a_launcher_is_seen(python_launch: Path, paths: list[str]) -> None:
    assert check(python_launch, ".")[0] == 0  # warm
    (python_launch / "tools" / "run.py").write_text(TORCHRUN_ZERO3)
    cached, fresh = both(python_launch, *paths)
    assert fresh[0] == 1 and "DPL001" in fresh[1] and "tools/run.py:3" in fresh[1]
    assert cached == fresh


@pytest.mark.parametrize("paths", [["."], ["train.py"]])
def test_a_launcher_edited_back_and_a_new_one_beside_it_are_seen(python_launch: Path, paths: list[str]) -> None:
    (python_launch / "tools" / "run.py").write_text(TORCHRUN_ZERO3)
    assert check(python_launch, ".")[0] == 1  # warm, launched
    (python_launch / "tools" / "run.py").write_text(NOT_A_LAUNCHER)
    cached, fresh = both(python_launch, *paths)
    assert cached == fresh == (0, "All checks passed!\n")
    (python_launch / "tools" / "go.py").write_text(TORCHRUN_ZERO3)
    cached, fresh = both(python_launch, *paths)
    assert fresh[0] == 1 and "tools/go.py:3" in fresh[1]
    assert cached == fresh


def test_a_call_added_under_imports_that_stay_the_same_is_seen(python_launch: Path) -> None:
    """A launcher the context reads for its launches counts whole, not by its import lines."""
    (python_launch / "tools" / "run.py").write_text('import os\n\nos.system("python train.py")\n')
    assert check(python_launch, ".")[0] == 0  # one process: nothing to report
    (python_launch / "tools" / "run.py").write_text(
        'import os\n\nos.system("deepspeed train.py --deepspeed configs/ds_z3.json")\n'
    )
    cached, fresh = both(python_launch, "train.py")
    assert fresh[0] == 1 and cached == fresh


def test_a_warm_run_tests_only_the_python_files_that_changed(python_launch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The result cache knows which files changed: a warm run reads no unchanged Python file to tell
    whether it became a launcher."""
    from placement_lint import cache

    (python_launch / "other.py").write_text("print('hello')\n")
    (python_launch / "scripts").mkdir()
    (python_launch / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 2 other.py\n")  # a context to keep
    check(python_launch, ".")
    tested: list[list[str]] = []
    real = cache.python_launch_files

    def recorded(root: Path, settings: object, names: list[str] | None = None) -> list[Path]:
        tested.append(sorted(Path(name).name for name in names or []))
        return real(root, settings, names)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "python_launch_files", recorded)
    check(python_launch, ".")
    assert tested == []
    (python_launch / "tools" / "run.py").write_text(NOT_A_LAUNCHER + "# edited\n")
    check(python_launch, ".")
    assert tested == [["run.py"]]


def test_damaged_python_stamps_are_not_trusted(python_launch: Path) -> None:
    check(python_launch, ".")
    (stamps,) = (python_launch / ".placement_lint_cache").rglob("repo-*.stamps")
    stamps.write_bytes(stamps.read_bytes()[:-3])
    (python_launch / "tools" / "run.py").write_text(TORCHRUN_ZERO3)
    cached, fresh = both(python_launch, "train.py")  # no walk: every Python file's stamp is read
    assert fresh[0] == 1 and cached == fresh
