"""action.yml, the composite GitHub Action: its shape, then its own `run:` scripts, run as a runner
runs them (bash -eo pipefail, `${{ ... }}` substituted) on a repository whose bug shows only
through a launch script. The install step builds a virtualenv and pip-installs this project into
it, so this module is slow; the environment is built once for every test here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parent.parent
LAUNCHED = ROOT / "tests" / "fixtures" / "launch" / "bad_accelerate_config_zero3"  # train.py, run by scripts/run_z3.sh
_EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


def action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def test_action_is_a_composite_action_with_its_inputs() -> None:
    loaded = action()
    assert loaded["name"] == "placement-lint" and loaded["description"]
    assert set(loaded["inputs"]) == {"args", "paths", "version", "sarif-file"}
    assert all("description" in spec and "default" in spec for spec in loaded["inputs"].values())
    assert loaded["inputs"]["paths"]["default"] == "."
    assert loaded["runs"]["using"] == "composite"
    steps = loaded["runs"]["steps"]
    assert [step["name"] for step in steps] == ["Install placement-lint", "Run placement-lint"]
    assert all(step["shell"] == "bash" for step in steps)
    # The action installs itself (the ref the workflow names), and checks with GitHub annotations.
    assert "${{ github.action_path }}" in steps[0]["env"].values() and '"$ACTION_PATH"' in steps[0]["run"]
    assert "--output-format github" in steps[1]["run"] and "--output-format sarif" in steps[1]["run"]


def test_inputs_reach_the_scripts_only_through_the_environment() -> None:
    """A `${{ inputs.x }}` pasted into a script would run whatever the value holds."""
    for step in action()["runs"]["steps"]:
        assert not _EXPRESSION.search(step["run"]), step["name"]


def _substitute(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        assert match.group(1) in values, f"the test does not know {match.group(0)}"
        return values[match.group(1)]

    return _EXPRESSION.sub(value, text)


def run_action(cwd: Path, runner_temp: Path, steps: list[dict], **inputs: str) -> list[subprocess.CompletedProcess[str]]:
    """Run the steps' scripts in order, as a runner does; stop after a step that fails."""
    loaded = action()
    values = {f"inputs.{name}": spec["default"] for name, spec in loaded["inputs"].items()}
    values.update({f"inputs.{name.replace('_', '-')}": value for name, value in inputs.items()})
    values.update({"github.action_path": str(ROOT), "runner.temp": str(runner_temp)})
    done = []
    for step in steps:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PLACEMENT_LINT", "VIRTUAL_ENV"))}
        env.update({name: _substitute(str(value), values) for name, value in step.get("env", {}).items()})
        script = runner_temp / "step.sh"
        script.write_text(_substitute(step["run"], values), encoding="utf-8")
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        done.append(result)
        if result.returncode != 0:
            break
    return done


@pytest.fixture(scope="module")
def runner_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RUNNER_TEMP after the install step: a virtualenv with this project installed from its source."""
    temp = tmp_path_factory.mktemp("runner_temp")
    [install] = run_action(ROOT, temp, action()["runs"]["steps"][:1])
    assert install.returncode == 0, install.stderr
    assert install.stdout.strip().startswith("placement-lint, version ")
    return temp


def _repository(tmp_path: Path, source: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(source, repo)
    (repo / ".git").mkdir()  # the repository root, as actions/checkout leaves it
    return repo


@pytest.mark.slow
def test_action_annotates_a_finding_seen_through_a_launch_script_and_writes_sarif(runner_temp: Path, tmp_path: Path) -> None:
    repo = _repository(tmp_path, LAUNCHED)
    [run] = run_action(repo, runner_temp, action()["runs"]["steps"][1:], sarif_file="results.sarif")
    assert run.returncode == 1, run.stderr  # findings fail the step, as `check` does
    [annotation] = [line for line in run.stdout.splitlines() if line.startswith("::")]
    assert annotation.startswith("::error file=train.py,line=14,col=92,") and "scripts/run_z3.sh:4" in annotation
    sarif = json.loads((repo / "results.sarif").read_text(encoding="utf-8"))
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "DPL001"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"


@pytest.mark.slow
def test_action_args_and_paths_reach_the_check(runner_temp: Path, tmp_path: Path) -> None:
    repo = _repository(tmp_path, LAUNCHED)
    [run] = run_action(repo, runner_temp, action()["runs"]["steps"][1:], args="--ignore DPL001", paths="train.py scripts")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (repo / "results.sarif").exists() and "::error" not in run.stdout
    [run] = run_action(repo, runner_temp, action()["runs"]["steps"][1:], args="--exit-zero", paths="train.py")
    assert run.returncode == 0 and "::error file=train.py," in run.stdout
