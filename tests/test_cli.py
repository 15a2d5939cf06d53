"""The command line, through the installed console script (as users and CI run it) and in-process."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement_lint.cli import main
from placement_lint.rules import all_rules

from helpers import SCRIPT, run_script

ZERO3 = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # spread
Trainer(model=model, args=args).train()
"""
SINGLE = (
    'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")\n'
)
DDP_FIXED = 'import torch.distributed as dist\ndist.init_process_group("nccl")\nmodel = AutoModelForCausalLM.from_pretrained("gpt2", device_map=0)\n'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "train_z3.py").write_text(ZERO3)
    (tmp_path / "single.py").write_text(SINGLE)
    return tmp_path


def test_version() -> None:
    from placement_lint import __version__

    result = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and __version__ in result.stdout


@pytest.mark.parametrize("command", [[str(SCRIPT)], [sys.executable, "-m", "placement_lint"]])
def test_the_command_leaves_its_whole_output_and_exit_code(tmp_path: Path, command: list[str]) -> None:
    """The command leaves without tearing the interpreter down: what it wrote must still arrive
    whole through a pipe (here far more than a pipe's buffer), with the run's exit code."""
    for number in range(150):
        (tmp_path / f"train_{number}.py").write_text(ZERO3)
    done = subprocess.run([*command, "check", "--no-cache", "--output-format", "json", "."], cwd=tmp_path, capture_output=True)
    assert len(done.stdout) > 100_000
    assert [item["code"] for item in json.loads(done.stdout)] == ["DPL001"] * 150
    assert done.returncode == 1
    clean = subprocess.run([*command, "check", "--no-cache", "--exit-zero", "."], cwd=tmp_path, capture_output=True, text=True)
    assert clean.returncode == 0 and "Found 150 problems in 150 files" in clean.stdout
    missing = subprocess.run([*command, "check", "nowhere.py"], cwd=tmp_path, capture_output=True, text=True)
    assert missing.returncode == 2 and "nowhere.py" in missing.stderr


def test_the_command_runs_with_stdout_closed(repo: Path) -> None:
    """A job runner may close stdout: the report goes to -o, and the run still exits with its own code."""
    done = subprocess.run(f"'{SCRIPT}' check --no-cache --exit-zero -o report.txt . >&-", shell=True, cwd=repo, check=False)
    assert done.returncode == 0
    assert "train_z3.py:4:65: DPL001" in (repo / "report.txt").read_text()


def test_findings_exit_1_with_frame_and_summary(repo: Path) -> None:
    result = run_script("check", ".", cwd=repo)
    assert result.returncode == 1
    assert "train_z3.py:4:65: DPL001 [*]" in result.stdout
    assert "DeepSpeed Zero-3 is not compatible with passing a `device_map`" in result.stdout
    assert "^^^^^^ DPL001" in result.stdout
    assert "Found 1 problem in 1 file (1 fixable with --fix)." in result.stdout
    assert "single.py" not in result.stdout


def test_clean_tree_exits_0(tmp_path: Path) -> None:
    (tmp_path / "single.py").write_text(SINGLE)
    result = run_script("check", cwd=tmp_path)
    assert result.returncode == 0 and "All checks passed!" in result.stdout


def test_concise_and_exit_zero(repo: Path) -> None:
    result = run_script("check", "--output-format", "concise", "--exit-zero", ".", cwd=repo)
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].startswith('train_z3.py:4:65: DPL001 [*] device_map="auto"')


def test_json_is_ruff_shaped(repo: Path) -> None:
    result = run_script("check", "--output-format", "json", ".", cwd=repo)
    assert result.returncode == 1
    [item] = json.loads(result.stdout)
    assert item["code"] == "DPL001"
    assert item["location"] == {"row": 4, "column": 65} and item["end_location"] == {"row": 4, "column": 71}
    assert item["filename"] == str(repo.resolve() / "train_z3.py")
    assert item["fix"]["applicability"] == "safe"
    assert item["fix"]["edits"] == [
        {"content": "None", "location": {"row": 4, "column": 65}, "end_location": {"row": 4, "column": 71}}
    ]
    assert item["noqa_row"] == 4 and item["url"] == "https://placement-lint.github.io/placement-lint/rules/DPL001/"
    assert item["context"][0]["kind"] == "ZERO3" and item["context"][0]["where"] == "train_z3.py:3"


def test_fix_rewrites_only_the_value_and_keeps_mode(repo: Path) -> None:
    target = repo / "train_z3.py"
    target.chmod(0o754)
    result = run_script("check", "--fix", ".", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert target.read_text() == ZERO3.replace('device_map="auto"', "device_map=None")
    assert stat.S_IMODE(target.stat().st_mode) == 0o754
    assert "Fixed 1 problem in 1 file, 0 remaining." in result.stdout
    left = sorted(p.name for p in repo.iterdir() if p.name != ".placement_lint_cache")
    assert left == ["single.py", "train_z3.py"], "no temp file left behind"
    assert run_script("check", "--fix", ".", cwd=repo).stdout.strip() == "All checks passed!"


def test_unsafe_fix_needs_the_flag(tmp_path: Path) -> None:
    target = tmp_path / "ddp.py"
    target.write_text(DDP_FIXED)
    first = run_script("check", "--fix", ".", cwd=tmp_path)
    assert first.returncode == 1 and target.read_text() == DDP_FIXED
    assert "Found 1 problem in 1 file (1 hidden fix can be enabled with --unsafe-fixes)." in first.stdout
    # ruff's wording for the fixes a run leaves out, also where --diff has nothing else to show
    shown = run_script("check", "--diff", ".", cwd=tmp_path)
    assert "Would fix 0 problems (1 hidden fix can be enabled with --unsafe-fixes)." in shown.stderr
    second = run_script("check", "--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert second.returncode == 0
    assert 'device_map={"": PartialState().local_process_index}' in target.read_text()
    assert "from accelerate import PartialState\n" in target.read_text()


def test_diff_writes_nothing_and_exits_1(repo: Path) -> None:
    before = (repo / "train_z3.py").read_bytes()
    result = run_script("check", "--diff", ".", cwd=repo)
    assert result.returncode == 1
    assert '-model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # spread' in result.stdout
    assert '+model = AutoModelForCausalLM.from_pretrained("gpt2", device_map=None)  # spread' in result.stdout
    assert (repo / "train_z3.py").read_bytes() == before


def test_diff_of_a_file_with_a_form_feed_applies_as_a_patch(repo: Path) -> None:
    """Python breaks lines only at \\r\\n, \\r and \\n; a diff split at a form feed is malformed."""
    (repo / "single.py").unlink()
    (repo / "train_z3.py").write_text(ZERO3.replace("\nargs", "\n# setup\x0c\nargs"))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    patch = run_script("check", "--diff", ".", cwd=repo).stdout
    assert "No newline at end of file" not in patch
    fixed = run_script("check", "--fix", ".", cwd=repo)
    expected = (repo / "train_z3.py").read_bytes()
    (repo / "train_z3.py").write_text(ZERO3.replace("\nargs", "\n# setup\x0c\nargs"))
    applied = subprocess.run(["git", "apply", "-"], input=patch + "\n", cwd=repo, capture_output=True, text=True)
    assert fixed.returncode == 0 and applied.returncode == 0, applied.stderr
    assert (repo / "train_z3.py").read_bytes() == expected


def test_select_ignore_and_prefixes(repo: Path) -> None:
    assert run_script("check", "--select", "DPL002", ".", cwd=repo).returncode == 0
    assert run_script("check", "--ignore", "DPL00", ".", cwd=repo).returncode == 0
    assert run_script("check", "--select", "DPL0", ".", cwd=repo).returncode == 1
    bad = run_script("check", "--select", "XYZ1", ".", cwd=repo)
    assert bad.returncode == 2 and "unknown rule selector 'XYZ1'" in bad.stderr


def test_noqa_suppresses_only_named_code(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(ZERO3.replace("# spread", "# noqa: DPL001"))
    (tmp_path / "b.py").write_text(ZERO3.replace("# spread", "# noqa: DPL003"))
    (tmp_path / "c.py").write_text(ZERO3.replace("# spread", "# noqa"))
    result = run_script("check", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in result.stdout.splitlines()[:-1]] == ["b.py"]


def test_pyproject_config_and_per_file_ignores(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.placement-lint]\nper-file-ignores = { "train_*.py" = ["DPL001"] }\n')
    assert run_script("check", ".", cwd=repo).returncode == 0
    (repo / "pyproject.toml").write_text('[tool.placement-lint]\nextend-exclude = ["train_z3.py"]\n')
    assert run_script("check", ".", cwd=repo).returncode == 0
    # A file named explicitly is checked even when excluded.
    assert run_script("check", "train_z3.py", cwd=repo).returncode == 1


def test_context_override_from_config_and_cli(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SINGLE + "Trainer(model=model)\n")
    assert run_script("check", ".", cwd=tmp_path).returncode == 0
    assert run_script("check", "--context", "ddp", ".", cwd=tmp_path).returncode == 1
    (tmp_path / "pyproject.toml").write_text('[tool.placement-lint]\nper-file-context = { "train.py" = "fsdp" }\n')
    result = run_script("check", ".", cwd=tmp_path)
    assert result.returncode == 1 and "under FSDP" in result.stdout and "= set by: per-file-context in" in result.stdout


def test_a_pyproject_is_read_only_when_it_may_hold_our_table(repo: Path) -> None:
    """A pyproject.toml that does not mention placement-lint is not parsed, even if invalid; one whose
    table name is spelled with escapes is still ours."""
    (repo / "pyproject.toml").write_text("[tool.ruff\n")
    assert run_script("check", ".", cwd=repo).returncode == 1  # train_z3.py's finding, no config error
    (repo / "pyproject.toml").write_text('[tool."placement\\u002dlint"]\nignore = ["DPL001"]\n')
    assert run_script("check", ".", cwd=repo).returncode == 0
    (repo / "pyproject.toml").write_text('[tool.ruff\nx = "\\u00e9"\n')  # another tool's, invalid: still not ours
    assert run_script("check", ".", cwd=repo).returncode == 1


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[tool.placement-lint]\nselekt = ['DPL']\n", "unknown key 'selekt'"),
        ("[tool.placement-lint]\nselect = 'DPL'\n", "select: expected a list of strings"),
        ("[tool.placement-lint]\ncontext = 'zero4'\n", "context: expected one of"),
        ("[tool.placement-lint]\nignore = ['DPL999']\n", "unknown rule selector 'DPL999'"),
        ("[tool.placement-lint\n", "invalid TOML"),
        ("[tool.placement-lint]\nrule-url-base = 'docs/rules'\n", "rule-url-base: expected a URL"),
        ("[tool.placement-lint]\nper-file-ignores = { '!' = ['DPL001'] }\n", "per-file-ignores: invalid pattern '!'"),
        ("[tool.placement-lint]\nper-file-context = { '!' = 'ddp' }\n", "per-file-context: invalid pattern '!'"),
        ('[tool.placement-lint]\nextend-exclude = ["\\\\"]\n', "extend-exclude: invalid pattern"),
    ],
)
def test_invalid_config_is_one_line_exit_2(repo: Path, config: str, message: str) -> None:
    (repo / "pyproject.toml").write_text(config)
    extra = ["--config", "pyproject.toml"] if "invalid TOML" in message else []
    result = run_script("check", ".", *extra, cwd=repo)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_an_invalid_pattern_is_an_error_whatever_the_files_hold(tmp_path: Path) -> None:
    """The patterns are checked as the settings are read, not when some file first needs them: a
    tree whose files hold nothing to check reports it too."""
    (tmp_path / "pyproject.toml").write_text("[tool.placement-lint]\nper-file-ignores = { '!' = ['DPL001'] }\n")
    (tmp_path / "a.py").write_text("print('hello')\n")
    for args in (["--no-cache"], []):
        result = run_script("check", *args, ".", cwd=tmp_path)
        assert result.returncode == 2 and "invalid pattern '!'" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://docs.example.org/rules/", "https://docs.example.org/rules/DPL001.md"),
        ("https://docs.example.org/rules", "https://docs.example.org/rules/DPL001.md"),
        ("https://docs.example.org/rule/{code}.html", "https://docs.example.org/rule/DPL001.html"),
    ],
)
def test_rule_url_base_setting_points_json_and_sarif_at_it(repo: Path, base: str, url: str) -> None:
    (repo / "pyproject.toml").write_text(f"[tool.placement-lint]\nrule-url-base = '{base}'\n")
    [item] = json.loads(run_script("check", "--output-format", "json", "train_z3.py", cwd=repo).stdout)
    assert item["url"] == url
    sarif = json.loads(run_script("check", "--output-format", "sarif", "train_z3.py", cwd=repo).stdout)
    [rule] = [r for r in sarif["runs"][0]["tool"]["driver"]["rules"] if r["id"] == "DPL001"]
    assert rule["helpUri"] == url
    assert json.loads(run_script("rule", "DPL001", "--output-format", "json", cwd=repo).stdout)["url"] == url


@pytest.mark.parametrize("output_format", ["full", "json", "sarif"])
def test_check_never_imports_the_editor_server(repo: Path, output_format: str) -> None:
    """The Language Server (and pygls under it) costs `check` nothing, with findings or without."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith(('placement_lint.server', 'pygls', 'lsprotocol'))), file=sys.stderr))\n"
        "from placement_lint.cli import main\n"
        f"main(['check', '--no-cache', '--output-format', {output_format!r}, '.'])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr  # train_z3.py's finding was reported
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_unparseable_and_undecodable_files_are_named_and_the_rest_is_checked(repo: Path) -> None:
    (repo / "broken.py").write_text("device_map = 'auto'\ndeepspeed = (\n")
    (repo / "latin.py").write_bytes(b"x = '\xe9'\ndevice_map = 'auto'\ndist.init_process_group()\n")
    result = run_script("check", "--output-format", "concise", ".", cwd=repo)
    assert result.returncode == 2
    assert "error: broken.py: cannot parse: line 2" in result.stderr
    assert "error: latin.py: cannot decode: not valid UTF-8 and no encoding declaration" in result.stderr
    assert "train_z3.py:4:65: DPL001" in result.stdout
    assert "Traceback" not in result.stderr


def test_missing_path_is_an_error(repo: Path) -> None:
    result = run_script("check", "nope.py", cwd=repo)
    assert result.returncode == 2 and "nope.py: no such file or directory" in result.stderr


def test_gitignore_is_respected(repo: Path) -> None:
    (repo / ".git").mkdir()
    (repo / ".gitignore").write_text("train_*.py\n")
    assert run_script("check", ".", cwd=repo).returncode == 0


def test_statistics(repo: Path) -> None:
    result = run_script("check", "--statistics", ".", cwd=repo)
    assert result.stdout.splitlines()[0] == "1\tDPL001\t[*] spread-device-map-in-distributed"


def test_statistics_mark_a_rule_fixable_only_by_the_fixes_this_run_would_apply(tmp_path: Path) -> None:
    """DPL003's fix for a DDP script is unsafe: `[ ]` without --unsafe-fixes (and `[-]` for a rule only
    some of whose findings have a fix), as ruff marks them; with no such fix at all, no marks."""
    (tmp_path / "train_z3.py").write_text(ZERO3)
    (tmp_path / "ddp.py").write_text(DDP_FIXED)
    (tmp_path / "ddp2.py").write_text(DDP_FIXED)

    def stats(*args: str) -> list[str]:
        return run_script("check", "--statistics", "-q", *args, ".", cwd=tmp_path).stdout.splitlines()

    assert stats() == ["2\tDPL003\t[ ] fixed-device-in-distributed", "1\tDPL001\t[*] spread-device-map-in-distributed"]
    assert stats("--unsafe-fixes") == [
        "2\tDPL003\t[*] fixed-device-in-distributed",
        "1\tDPL001\t[*] spread-device-map-in-distributed",
    ]
    assert stats("--select", "DPL003") == ["2\tDPL003\tfixed-device-in-distributed"]
    as_json = json.loads(run_script("check", "--statistics", "--output-format", "json", ".", cwd=tmp_path).stdout)
    assert [(e["code"], e["fixable"], e["fixable_count"]) for e in as_json] == [("DPL003", False, 0), ("DPL001", True, 1)]


def test_statistics_mark_a_rule_partly_fixable() -> None:
    from placement_lint.edits import Applicability, Fix
    from placement_lint.report.text import statistics
    from placement_lint.results import FileResult, RunResult, finding_at
    from placement_lint.rules.violation import Violation
    from placement_lint.source import SourceFile

    text = "x = 1\n"
    source = SourceFile(Path("t.py"), text.encode(), text, "utf-8", False, (0,))
    safe = Fix(Applicability.SAFE, "do it", ())
    violations = [
        Violation("DPL001", "m", 0, 1, safe),
        Violation("DPL001", "m", 0, 1, None),
        Violation("DPL002", "m", 0, 1, None),
    ]
    result = RunResult([FileResult("t.py", [finding_at(source, "t.py", v) for v in violations])], 1)
    assert statistics(result, {"DPL001": "one", "DPL002": "two"}) == ["2\tDPL001\t[-] one", "1\tDPL002\t[ ] two"]


def test_statistics_with_a_machine_format_keeps_the_fix_list_and_summary_off_stdout(repo: Path) -> None:
    result = run_script("check", "--statistics", "--output-format", "github", "--fix", "--show-fixes", "-q", ".", cwd=repo)
    assert "Fixed 1 problem" in result.stderr
    assert "Fixed" not in result.stdout and "| rule" not in result.stdout, result.stdout


def test_rule_command_prints_the_page_and_lists_all() -> None:
    runner = CliRunner()
    page = runner.invoke(main, ["rule", "DPL001"])
    assert page.exit_code == 0 and page.output.startswith("# DPL001: spread-device-map-in-distributed")
    listing = runner.invoke(main, ["rule", "--all"])
    header, *lines = listing.output.splitlines()
    assert header.split() == ["code", "name", "fix", "summary"]
    assert [line.split()[0] for line in lines] == [rule.code for rule in all_rules()]
    unknown = runner.invoke(main, ["rule", "DPL999"])
    assert unknown.exit_code == 2


def test_rule_all_lines_up_its_columns_and_wraps_only_on_a_terminal() -> None:
    from placement_lint.cli import rule_table

    rules = all_rules()
    piped = rule_table(rules)
    assert len(piped) == len(rules) + 1  # one line a rule: grep finds a rule with its summary
    # Every column starts where its header does, and no two run together.
    starts = [piped[0].index(name) for name in ("name", "fix", "summary")]
    for line, rule in zip(piped[1:], rules, strict=True):
        assert [line.index(part, 8) for part in (rule.name, rule.fix_availability.value, rule.summary)] == starts
        assert all(line[start - 2 : start] == "  " for start in starts)
    wrapped = rule_table(rules, width=100)
    assert max(map(len, wrapped)) <= 100 and len(wrapped) > len(piped)
    continued = [line for line in wrapped if line.startswith(" ")]
    assert continued and all(len(line) - len(line.lstrip()) == starts[2] for line in continued)
    assert " ".join(" ".join(wrapped).split()) == " ".join(" ".join(piped).split())  # nothing lost
    # Too narrow for a summary column: the summary goes under the name, still within the width.
    narrow = rule_table(rules, width=80)
    assert max(map(len, narrow)) <= 80 and narrow[1].split() == ["summary"] and narrow[1].index("summary") == starts[0]
    assert " ".join(" ".join(narrow).split()) == " ".join(" ".join(piped).split())


def test_installed_script_ships_the_catalogue(tmp_path: Path) -> None:
    """Run from outside the checkout: the installed package must carry the pages itself."""
    result = run_script("rule", "DPL002", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("# DPL002: device-map-under-zero3")


def test_in_process_matches_console_script(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["check", "--output-format", "concise", "."])
    assert result.exit_code == 1
    assert result.output == run_script("check", "--output-format", "concise", ".", cwd=repo).stdout


def test_color_only_when_asked(repo: Path) -> None:
    assert "\x1b[" not in run_script("check", ".", cwd=repo).stdout
    assert "\x1b[" in run_script("check", "--color", ".", cwd=repo).stdout


def test_force_color_and_no_color_as_ruff_reads_them(repo: Path) -> None:
    def coloured(*args: str, **env: str) -> bool:
        return "\x1b[" in run_script("check", *args, ".", cwd=repo, env=env).stdout

    assert coloured(FORCE_COLOR="1")  # into a pipe, as in a CI log
    assert not coloured(FORCE_COLOR="")  # empty is unset
    assert not coloured("--no-color", FORCE_COLOR="1")  # the flag decides first
    assert coloured("--color", NO_COLOR="1")
    assert coloured(FORCE_COLOR="1", NO_COLOR="1")  # ruff's order
    assert not coloured("-o", "report.txt", FORCE_COLOR="1") and "\x1b[" not in (repo / "report.txt").read_text()


@pytest.mark.parametrize(
    ("flag", "terminal", "environ", "wanted"),
    [
        (None, True, {}, True),
        (None, False, {}, False),
        (None, True, {"NO_COLOR": "1"}, False),
        (None, True, {"NO_COLOR": ""}, True),  # no-color.org: set and not empty
        (None, False, {"FORCE_COLOR": "0"}, True),  # any value but empty forces, as in ruff and rich
        (False, True, {"FORCE_COLOR": "1"}, False),
        (True, False, {"NO_COLOR": "1"}, True),
    ],
)
def test_color_wanted(flag: bool | None, terminal: bool, environ: dict[str, str], wanted: bool) -> None:
    from placement_lint.cli import color_wanted

    assert color_wanted(flag, terminal, environ) is wanted


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_examples_folder_matches_readme() -> None:
    """The README's first command runs on examples/: its findings are the ones the README shows."""
    root = Path(__file__).parent.parent
    result = run_script("check", "--output-format", "concise", "examples", cwd=root)
    readme = (root / "README.md").read_text()
    for line in result.stdout.splitlines():
        if ": DPL" in line:
            location = line.split(" DPL")[0]
            assert location in readme, f"README does not show {location}"


def test_context_command_shows_the_launch_chain(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SINGLE)
    (tmp_path / "z3.yaml").write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n")
    (tmp_path / "run.sh").write_text("accelerate launch --config_file z3.yaml train.py\n")
    (tmp_path / "other.py").write_text("print('hello')\n")
    result = run_script("context", ".", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "train.py: DeepSpeed ZeRO-3",
        "  - train.py is launched by run.sh:1 (accelerate launch --config_file z3.yaml train.py), distributed_type DEEPSPEED, zero_stage 3",
    ]
    listing = run_script("context", "--all", ".", cwd=tmp_path)
    assert "other.py: a single process (no distributed setup found)" in listing.stdout
    as_json = json.loads(run_script("context", "--output-format", "json", "train.py", cwd=tmp_path).stdout)
    assert as_json[0]["contexts"][0]["evidence"][0]["origin"] == "launch"


def test_context_command_shows_the_pins_and_notes_a_specifier_it_cannot_parse(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SINGLE)
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "requirements.txt").write_text("transformers>=4.x\naccelerate==0.27.2\n")
    result = run_script("context", ".", cwd=tmp_path)
    assert result.returncode == 0
    assert "  - the repository pins accelerate==0.27.2 (requirements.txt:2)" in result.stdout.splitlines()
    assert "note: requirements.txt:1: transformers '>=4.x': cannot parse the version specifier, ignored" in result.stderr


def test_context_names_the_launch_sources_it_could_not_read(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SINGLE)
    (tmp_path / "ci.yml").write_text("steps:\n  - run: torchrun --nproc_per_node 2 train.py\n  tags: [gpu\n")
    (tmp_path / "notes.md").write_bytes(b"```bash\ntorchrun other.py\n```\n\x00")
    result = run_script("context", "train.py", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines()[1].startswith("  - train.py is launched by ci.yml:2 (torchrun --nproc_per_node 2 train.py)")
    assert "ci.yml: YAML does not parse" in result.stderr and "notes.md: skipped, binary" in result.stderr


def test_cache_flags_and_clean(repo: Path) -> None:
    assert run_script("check", "--no-cache", ".", cwd=repo).returncode == 1
    assert not (repo / ".placement_lint_cache").exists()
    assert run_script("check", ".", cwd=repo).returncode == 1
    assert (repo / ".placement_lint_cache").is_dir()
    assert run_script("check", ".", cwd=repo).stdout.count("DPL001") == 2, "a warm run reports the same finding"
    custom = repo / "elsewhere"
    assert run_script("check", "--cache-dir", str(custom), ".", cwd=repo).returncode == 1 and custom.is_dir()
    assert run_script("clean", cwd=repo).returncode == 0
    assert not (repo / ".placement_lint_cache").exists()


def test_a_broken_pyproject_is_an_error_not_ignored(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.placement-lint]\nselect = ["DPL002"]\nignore = [\n')
    result = run_script("check", ".", cwd=repo)
    assert result.returncode == 2 and "invalid TOML" in result.stderr


def test_missing_path_summary_does_not_claim_success(repo: Path) -> None:
    result = run_script("check", "nope.py", cwd=repo)
    assert "All checks passed!" not in result.stdout
    assert "could not be checked" in result.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_named_file_is_an_error_and_the_rest_is_checked(repo: Path) -> None:
    secret = repo / "secret.py"
    secret.write_text(ZERO3)
    secret.chmod(0)
    result = run_script("check", "secret.py", "train_z3.py", cwd=repo)
    assert result.returncode == 2 and "secret.py: cannot read" in result.stderr
    assert "train_z3.py:4:65: DPL001" in result.stdout


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "train.py").write_text(ZERO3)
    walked = run_script("check", ".", cwd=tmp_path)  # a walk skips it
    assert walked.returncode == 1 and "pipe.py" not in walked.stdout + walked.stderr
    named = run_script("check", "pipe.py", "train.py", cwd=tmp_path)  # named: an error, and no hang
    assert named.returncode == 2 and "pipe.py: not a regular file" in named.stderr


def test_unknown_dpl_code_in_noqa_is_a_warning_and_the_finding_is_shown(repo: Path) -> None:
    (repo / "train_z3.py").write_text(ZERO3.replace("# spread", "# noqa: DPL999, E501"))
    result = run_script("check", ".", cwd=repo)
    assert result.returncode == 1
    assert "warning: Invalid rule code provided to `# noqa` at train_z3.py:4: DPL999" in result.stderr
    assert "train_z3.py:4:65: DPL001" in result.stdout


def test_contradicting_cache_flags(repo: Path) -> None:
    result = run_script("check", "--no-cache", "--cache-dir", "x", ".", cwd=repo)
    assert result.returncode == 2 and "contradict" in result.stderr


def test_statistics_as_json_and_rule_argument_errors(repo: Path) -> None:
    stats = json.loads(run_script("check", "--statistics", "--output-format", "json", ".", cwd=repo).stdout)
    assert stats == [
        {"code": "DPL001", "name": "spread-device-map-in-distributed", "count": 1, "fixable": True, "fixable_count": 1}
    ]
    both = CliRunner().invoke(main, ["rule", "DPL001", "--all"])
    assert both.exit_code == 2


def test_colour_leaves_the_source_and_message_text_as_it_is(tmp_path: Path) -> None:
    """Brackets in a code frame (`x[i]`) are source text, not markup to interpret."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(
        "import torch.distributed as dist\ndist.init_process_group('nccl')\nmaps = {'a': 'auto'}\n"
        "m = X.from_pretrained('g', device_map=maps['a'])  # see [i] and [/]\nTrainer(model=m)\n"
    )
    coloured = run_script("check", "--no-cache", "--color", ".", cwd=tmp_path).stdout
    plain = re.sub(r"\x1b\[[0-9;]*m|\x1b\]8;[^\x1b]*\x1b\\", "", coloured)  # colours and OSC 8 hyperlinks
    assert plain == run_script("check", "--no-cache", ".", cwd=tmp_path).stdout
    assert "maps['a'])  # see [i] and [/]" in plain


@pytest.mark.parametrize(
    ("path", "cwd"),
    [
        ("/work/repo/train.py", "/work/repo"),
        ("/work/repo/a/b/train.py", "/work/repo/"),
        ("/work/repo", "/work/repo"),
        ("/work/repository/train.py", "/work/repo"),
        ("/elsewhere/train.py", "/work/repo"),
        ("/x.py", "/"),
        ("relative/train.py", "/work/repo"),
    ],
)
def test_display_path_reads_the_text_as_relative_to_would(path: str, cwd: str) -> None:
    from placement_lint.results import display_path

    try:
        expected = Path(path).relative_to(Path(cwd)).as_posix()
    except ValueError:
        expected = str(Path(path))
    assert display_path(Path(path), Path(cwd)) == expected


def test_a_launch_file_warning_names_the_file_from_the_working_folder(tmp_path: Path) -> None:
    """A launch file of a nested project (its own pyproject.toml) checked from a parent folder: the
    warning names it as findings name files, not from the project's root."""
    project = tmp_path / "top" / "vendor" / "lib"
    (project / ".github" / "workflows").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'lib'\n")
    (project / ".github" / "workflows" / "ci.yml").write_text(
        "{% set n = 1 %}\njobs:\n  t:\n    steps:\n      - run: torchrun train.py\n"
    )
    (project / "train.py").write_text('from transformers import AutoModel\nAutoModel.from_pretrained("m", device_map="auto")\n')
    result = run_script("check", "--no-cache", "top", cwd=tmp_path)
    assert "warning: top/vendor/lib/.github/workflows/ci.yml: YAML does not parse" in result.stderr, result.stderr
