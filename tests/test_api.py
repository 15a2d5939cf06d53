"""The Python API: `placement_lint.check`, `check_source`, `fix_source`, returning the CLI's findings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import placement_lint
import placement_lint.api
from placement_lint.cli import main
from placement_lint.results import Finding

ZERO3 = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")
Trainer(model=model, args=args).train()
"""
SINGLE = (
    'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")\n'
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(ZERO3)
    (tmp_path / "infer.py").write_text(SINGLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_findings_are_values(project: Path) -> None:
    """Two checks of the same tree give equal findings, which can be compared, hashed and printed."""
    first, second = placement_lint.check(["."]), placement_lint.check(["."])
    assert first and first == second and first is not second
    assert len({*first, *second}) == len(first)
    assert "DPL001" in repr(first[0]) and "train.py" in repr(first[0])
    assert first[0] != placement_lint.check_source(ZERO3, "elsewhere/train.py")[0]


def test_check_returns_the_findings_the_cli_prints(project: Path) -> None:
    findings = placement_lint.check(["."])
    assert all(isinstance(f, Finding) for f in findings)
    printed = json.loads(CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", "."]).output)
    assert [(f.code, f.message, f.row, f.column, f.end_row, f.end_column) for f in findings] == [
        (
            p["code"],
            p["message"],
            p["location"]["row"],
            p["location"]["column"],
            p["end_location"]["row"],
            p["end_location"]["column"],
        )
        for p in printed
    ]
    assert [(f.display, f.code) for f in findings] == [("train.py", "DPL001")]
    assert not (project / ".placement_lint_cache").exists()


def test_check_options(project: Path) -> None:
    assert placement_lint.check("infer.py", context="zero3")[0].code == "DPL001"
    assert placement_lint.check(["."], ignore="DPL001") == []
    assert placement_lint.check(["."], select=["DPL002"]) == []
    with pytest.raises(placement_lint.CheckError, match="unknown rule selector"):
        placement_lint.check(["."], select="XYZ")
    with pytest.raises(placement_lint.CheckError, match="expected one of"):
        placement_lint.check(["."], context="tpu")


def test_check_fix_writes_and_returns_what_remains(project: Path) -> None:
    assert placement_lint.check(["train.py"], fix=True) == []
    assert "device_map=None" in (project / "train.py").read_text()


def test_an_unparseable_file_raises_with_the_other_findings(project: Path) -> None:
    (project / "broken.py").write_text("def f(:\n    device_map='auto'\n")
    with pytest.raises(placement_lint.CheckError) as raised:
        placement_lint.check(["."], context="zero3")
    assert raised.value.errors == ["broken.py: cannot parse: line 1: invalid syntax"]
    assert sorted(f.display for f in raised.value.findings) == ["infer.py", "train.py"]


def test_check_source_uses_the_settings_of_its_filename(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.placement-lint]\nper-file-context = { "jobs/*.py" = "ddp" }\n')
    assert placement_lint.check_source(SINGLE) == []
    (finding,) = placement_lint.check_source(SINGLE, "jobs/run.py")
    assert (finding.display, finding.code, finding.row) == ("jobs/run.py", "DPL001", 2)
    assert placement_lint.check_source(SINGLE.encode(), "jobs/run.py", ignore=["DPL001"]) == []
    assert not (project / "jobs").exists()


def test_fix_source_returns_the_fixed_text(project: Path) -> None:
    fixed, remaining = placement_lint.fix_source(ZERO3, "train2.py")
    assert fixed == ZERO3.replace('device_map="auto"', "device_map=None") and remaining == []
    unchanged, remaining = placement_lint.fix_source(SINGLE, context="ddp")  # the DDP fix is unsafe
    assert unchanged == SINGLE and [f.code for f in remaining] == ["DPL001"]
    latin1 = "# -*- coding: latin-1 -*-\n# café\n" + ZERO3
    fixed, _ = placement_lint.fix_source(latin1)
    assert fixed == latin1.replace('device_map="auto"', "device_map=None")
    with pytest.raises(placement_lint.CheckError, match="cannot parse"):
        placement_lint.fix_source("def f(:\n    device_map = 'auto'\n", context="zero3")


def test_importing_the_package_stays_light() -> None:
    """`import placement_lint` loads no dependency; checking source loads neither rich nor libcst."""
    code = (
        "import sys, placement_lint\n"
        "heavy = ('placement_lint.', 'click', 'rich', 'libcst', 'yaml', 'pathspec')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
        "placement_lint.check_source('x = 1\\n')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(('rich', 'libcst'))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "[]"]


@pytest.mark.parametrize("call", ["check", "check_source", "fix_source"])
def test_a_warning_names_the_callers_line(tmp_path: Path, call: str) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "broken.yaml").write_text("distributed_type: [\n")
    (tmp_path / "run.sh").write_text("accelerate launch --config_file configs/broken.yaml train.py\n")
    (tmp_path / "train.py").write_text("x = 1\n")
    with pytest.warns(RuntimeWarning, match="cannot parse config") as caught:
        if call == "check":
            placement_lint.api.check([tmp_path / "train.py"])
        else:
            getattr(placement_lint.api, call)("x = 1\n", tmp_path / "train.py")
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}


@pytest.mark.parametrize("call", ["check", "check_source"])
def test_an_unknown_noqa_code_is_a_placed_warning_and_the_findings_are_returned(tmp_path: Path, call: str) -> None:
    source = ZERO3 + "x = 1  # noqa: DPL999\n"
    (tmp_path / "train.py").write_text(source)
    with pytest.warns(placement_lint.SuppressionWarning) as caught:
        if call == "check":
            findings = placement_lint.check([tmp_path / "train.py"])
        else:
            findings = placement_lint.check_source(source, tmp_path / "train.py")
    assert [f.code for f in findings] == ["DPL001"]
    (warning,) = [w.message for w in caught if isinstance(w.message, placement_lint.SuppressionWarning)]
    assert isinstance(warning, RuntimeWarning)  # what every other warning of the API is
    assert str(warning).startswith("Invalid rule code provided to `# noqa` at ") and str(warning).endswith("train.py:6: DPL999")
    assert (warning.row, warning.column, warning.end_row, warning.end_column) == (6, 16, 6, 22)
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}


def test_dir_shows_the_api_the_package_imports_on_first_use() -> None:
    listed = dir(placement_lint)
    assert set(placement_lint.__all__) <= set(listed)
    assert {"Any", "TYPE_CHECKING", "annotations"}.isdisjoint(listed)  # its own typing helpers are not the API
    code = (
        "import sys, placement_lint\nnames = dir(placement_lint)\nprint('check' in names, 'placement_lint.api' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]  # listing the API does not import it


def test_a_program_running_many_pooled_checks_keeps_its_collector_and_no_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector of a process the tool does not own (an API caller, the editor server) is left as
    it was, and each run's garbage is collected: it piled up run after run (7 GB over the suite)."""
    import gc

    from placement_lint import engine
    from placement_lint.engine import run
    from placement_lint.results import RunOptions
    from placement_lint.settings import Settings

    from helpers import CODES

    monkeypatch.setattr(engine, "SCREEN_POOL_BYTES", 0)  # pooled, so this process checks a share
    root = (Path(__file__).parent / "fixtures" / "launch" / "bad_accelerate_config_zero3").resolve()
    threshold = gc.get_threshold()
    run([root], Settings(root=root, codes=CODES), RunOptions(jobs=2), root)
    first = len(gc.get_objects())
    for _ in range(6):
        run([root], Settings(root=root, codes=CODES), RunOptions(jobs=2), root)
    assert gc.get_threshold() == threshold and gc.get_freeze_count() == 0
    assert len(gc.get_objects()) < first * 1.5, "a run's garbage outlived it"
