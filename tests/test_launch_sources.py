"""Where launch evidence comes from: `exclude` decides what is reported, not what launches
(`launch-exclude` is the setting for that); a launch script, config or doc named on the command line
checks the Python files it launches or configures."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement_lint.cli import main

TRAIN = """\
from transformers import AutoModelForCausalLM, Trainer

model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")
Trainer(model=model).train()
"""
# A finding of its own (ZeRO-3 in the file), whatever launches it.
IN_FILE_ZERO3 = """\
from transformers import AutoModelForCausalLM
import deepspeed

engine = deepspeed.initialize(model=AutoModelForCausalLM.from_pretrained("m", device_map="auto"), config={"zero_optimization": {"stage": 3}})
"""


def check(folder: Path, *args: str) -> tuple[int, str]:
    here = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", *args], catch_exceptions=False)
    finally:
        os.chdir(here)
    return result.exit_code, result.output


def context(folder: Path, *args: str) -> str:
    here = os.getcwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(main, ["context", *args], catch_exceptions=False).output
    finally:
        os.chdir(here)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "unrelated.py").write_text(IN_FILE_ZERO3)
    (tmp_path / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n")
    (tmp_path / "configs" / "ds.json").write_text('{"zero_optimization": {"stage": 3}}\n')
    return tmp_path


def settings(repo: Path, *lines: str) -> None:
    (repo / "pyproject.toml").write_text("\n".join(["[tool.placement-lint]", *lines]) + "\n")


def findings(output: str) -> list[str]:
    return sorted({line.split(":")[0] for line in output.splitlines() if ": DPL" in line})


# -- exclusion governs what is reported, not what launches ------------------------------------------


def test_a_launch_script_in_an_excluded_folder_still_launches(repo: Path) -> None:
    settings(repo, 'extend-exclude = ["scripts"]')
    assert findings(check(repo, ".")[1]) == ["train.py", "unrelated.py"]
    assert findings(check(repo, "train.py")[1]) == ["train.py"]


def test_python_files_in_an_excluded_folder_are_still_not_reported(repo: Path) -> None:
    (repo / "scripts" / "train_old.py").write_text(TRAIN)
    (repo / "scripts" / "old.sh").write_text("torchrun --nproc_per_node 8 scripts/train_old.py --deepspeed configs/ds.json\n")
    settings(repo, 'extend-exclude = ["scripts"]')
    assert findings(check(repo, ".")[1]) == ["train.py", "unrelated.py"]


def test_launch_exclude_ignores_the_launch_sources_it_names(repo: Path) -> None:
    settings(repo, 'launch-exclude = ["scripts"]')
    assert findings(check(repo, ".")[1]) == ["unrelated.py"]
    settings(repo, 'launch-exclude = ["*.sh"]')
    assert findings(check(repo, "train.py")[1]) == []
    # Naming the folder does not bring its launches back: a repository's launches are its own.
    assert findings(check(repo, ".", "scripts")[1]) == ["unrelated.py"]


def test_launch_exclude_is_checked_like_the_other_patterns(repo: Path) -> None:
    settings(repo, 'launch-exclude = ["\\\\"]')
    code, output = check(repo, ".")
    assert code == 2 and "launch-exclude: invalid pattern" in output


def test_an_untracked_launch_script_in_an_ignored_folder_does_not_count(repo: Path) -> None:
    """.gitignore says what is not the repository's (outputs, local scratch): an untracked script there
    launches nothing, even when the folder is named; a tracked one counts (tests/test_git_index.py)."""
    (repo / ".gitignore").write_text("scripts/\n")
    assert findings(check(repo, ".")[1]) == ["unrelated.py"]
    assert findings(check(repo, ".", "scripts")[1]) == ["unrelated.py"]
    assert findings(check(repo, "train.py")[1]) == []


def test_context_says_when_evidence_comes_from_an_excluded_folder(repo: Path) -> None:
    settings(repo, 'extend-exclude = ["scripts"]')
    shown = context(repo, "train.py")
    assert "is launched by scripts/run.sh:1" in shown
    assert "scripts/run.sh is in a folder `exclude` leaves out" in shown
    listed = json.loads(context(repo, "--output-format", "json", "train.py"))
    assert [e["excluded_folder"] for e in listed[0]["contexts"][0]["evidence"]] == [True]
    # Named on the command line, the folder is checked (as ruff checks a path it is given): no note.
    assert "leaves out" not in context(repo, "train.py", "scripts")
    settings(repo)
    assert "leaves out" not in context(repo, "train.py")


# -- a launch script, config or doc given as a path ---------------------------------------------------


def test_a_launch_script_given_as_a_path_checks_what_it_launches(repo: Path) -> None:
    code, output = check(repo, "scripts/run.sh")
    assert code == 1 and findings(output) == ["train.py"]


def test_a_config_given_as_a_path_checks_what_it_configures(repo: Path) -> None:
    assert findings(check(repo, "configs/ds.json")[1]) == ["train.py"]


def test_a_doc_given_as_a_path_checks_what_its_commands_launch(repo: Path) -> None:
    (repo / "scripts" / "run.sh").unlink()
    (repo / "README.md").write_text("```bash\ntorchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n```\n")
    assert findings(check(repo, "README.md")[1]) == ["train.py"]


def test_a_launch_file_that_launches_nothing_checks_nothing(repo: Path) -> None:
    (repo / "notes.md").write_text("# Notes\n")
    assert check(repo, "notes.md") == (0, "All checks passed!\n")


def test_a_launch_script_in_an_excluded_folder_given_with_force_exclude_still_checks_what_it_launches(repo: Path) -> None:
    """pre-commit passes --force-exclude: the launch script is not reported on, so `exclude` does not
    drop it; the Python files it launches are subject to their own exclusion."""
    settings(repo, 'extend-exclude = ["scripts"]')
    assert findings(check(repo, "--force-exclude", "scripts/run.sh")[1]) == ["train.py"]
    settings(repo, 'extend-exclude = ["scripts", "train.py"]')
    assert findings(check(repo, "--force-exclude", "scripts/run.sh")[1]) == []
    settings(repo, 'launch-exclude = ["scripts"]')
    assert findings(check(repo, "--force-exclude", "scripts/run.sh")[1]) == []


def test_a_launch_script_given_with_the_file_it_launches_checks_it_once(repo: Path) -> None:
    assert findings(check(repo, "scripts/run.sh", "train.py")[1]) == ["train.py"]


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="needs git")
def test_changed_since_and_a_named_launch_script_agree(repo: Path) -> None:
    """What `check scripts/run.sh` checks is what `--changed-since` checks when only the script changed."""
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "scripts" / "run.sh").write_text("torchrun --nproc_per_node 4 train.py --deepspeed configs/ds.json\n")
    assert findings(check(repo, "--changed-since", "HEAD", ".")[1]) == findings(check(repo, "scripts/run.sh")[1]) == ["train.py"]


@pytest.mark.parametrize(
    ("condition", "variables", "holds"),
    [
        ("[ $lora = true ]", {"lora": "false"}, False),
        ('[[ "$lora" == "false" ]]', {"lora": "false"}, True),
        ("test $mode != full", {"mode": "full"}, False),
        ('[ -z "$N" ]', {"N": "8"}, False),
        ('[ -n "$N" ]', {"N": "8"}, True),
        ("[ $lora = true ]", {}, None),  # set at run time (or not at all): both ways stay
        ("[ $lora = $other ]", {"lora": "a"}, None),
        ("[ -f ds.json ]", {}, None),  # the file system decides
        ("[ $a = x -a $b = y ]", {"a": "x", "b": "y"}, None),
        ("grep -q x log.txt", {}, None),
    ],
)
def test_a_shell_test_of_the_scripts_own_values_is_decided(condition: str, variables: dict[str, str], holds: bool | None) -> None:
    from placement_lint.context.launch_files import shell_test_holds

    assert shell_test_holds(condition, variables) is holds
