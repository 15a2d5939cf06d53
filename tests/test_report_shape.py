"""How a finding is shown: a short headline, labelled notes, and its path (launch, config, import,
load, consumer) as frames, as JSON and as SARIF, in every output format.

The golden case is examples/launch, where nothing in the Python files says DeepSpeed: the bug shows
only through `scripts/run_z3.sh` (ZeRO-3 accelerate config) and `train.py`'s import of
`model_utils.py`. Goldens live in tests/fixtures/report/launch/, one per format (regenerate with
PLACEMENT_LINT_UPDATE_GOLDENS=1, then read the diff): paths are written relative to `<root>`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement_lint import __version__
from placement_lint.catalogue import catalogue_dir
from placement_lint.cli import main
from placement_lint.engine import run
from placement_lint.report.formats import FORMATS, Report
from placement_lint.results import RunOptions
from placement_lint.rules.base import HEADLINE_LIMIT
from placement_lint.settings import Settings

from helpers import CODES, imported_by_a_check, run_script

HERE = Path(__file__).parent
GOLDENS = HERE / "fixtures" / "report" / "launch"
UPDATE = os.environ.get("PLACEMENT_LINT_UPDATE_GOLDENS") == "1"
EXTENSIONS = {"json": "json", "json-lines": "jsonl", "sarif": "sarif", "gitlab": "json", "junit": "xml"}
RUFF_JSON_FIELDS = {"cell", "code", "message", "filename", "location", "end_location", "fix", "url", "noqa_row"}


@pytest.fixture
def launched(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(HERE.parent / "examples" / "launch", root)
    (root / ".git").mkdir()
    return root


def _render(root: Path, output_format: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", output_format, "."])
    assert result.exit_code == 1, result.output
    return result.output


def _normalized(text: str, root: Path, output_format: str) -> str:
    if output_format == "sarif":  # the rule pages and the machine's folders are not the report's shape
        log = json.loads(text)
        log["runs"][0]["tool"]["driver"]["rules"] = "<rules>"
        log["runs"][0]["invocations"][0]["workingDirectory"] = "<root>"
        text = json.dumps(log, indent=2, ensure_ascii=False) + "\n"
    text = text.replace(catalogue_dir().as_uri(), "<rules>").replace(str(catalogue_dir()), "<rules>")
    text = text.replace(root.resolve().as_uri(), "<root>").replace(str(root.resolve()), "<root>")
    return text.replace(f'"{__version__}"', '"<version>"')


@pytest.mark.parametrize("output_format", sorted(FORMATS))
def test_every_format_matches_its_golden(output_format: str, launched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    actual = _normalized(_render(launched, output_format, monkeypatch), launched, output_format)
    golden = GOLDENS / f"{output_format}.{EXTENSIONS.get(output_format, 'txt')}"
    if UPDATE:
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8"), f"{golden.name} differs from the run"


def test_the_sarif_message_links_each_span_to_its_related_location(launched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [result] = json.loads(_render(launched, "sarif", monkeypatch))["runs"][0]["results"]
    headline, *notes, path = result["message"]["text"].split("\n")
    assert headline.startswith('device_map="auto" spreads') and "launched by: scripts/run_z3.sh:6 " in notes[0]
    links = re.findall(r"\[([^\]]+)\]\((\d+)\)", path)
    assert [where for where, _ in links][:2] == ["scripts/run_z3.sh:6", "configs/zero3.yaml:2"]
    assert [int(number) for _, number in links] == [r["id"] for r in result["relatedLocations"]]


def test_the_github_and_gitlab_lines_name_the_launch(launched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    github = _render(launched, "github", monkeypatch)
    assert "(launched by scripts/run_z3.sh:6)" in github.splitlines()[0]
    [issue] = json.loads(_render(launched, "gitlab", monkeypatch))
    assert issue["description"].startswith("DPL001: device_map=") and "(launched by scripts/run_z3.sh:6)" in issue["description"]


def test_json_keeps_ruffs_fields_and_adds_the_path(launched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [item] = json.loads(_render(launched, "json", monkeypatch))
    assert RUFF_JSON_FIELDS <= set(item)
    assert item["location"] == {"row": 6, "column": 94} and item["end_location"] == {"row": 6, "column": 100}
    assert item["message"] == 'device_map="auto" spreads each rank\'s model over every GPU under DeepSpeed ZeRO-3'
    assert [(r["role"], Path(r["filename"]).name, r["location"]["row"]) for r in item["related"]] == [
        ("launch", "run_z3.sh", 6),
        ("config", "zero3.yaml", 2),
        ("config", "zero3.yaml", 5),
        ("import", "train.py", 7),
        ("helper", "train.py", 18),
        ("load", "model_utils.py", 6),
        ("consumer", "train.py", 19),
    ]
    for span in item["related"]:
        assert set(span) == {"role", "message", "filename", "cell", "location", "end_location"}
        assert Path(span["filename"]).is_absolute() and span["end_location"]["column"] > span["location"]["column"]
    assert item["related"][1]["message"] == "distributed_type: DEEPSPEED"
    assert item["related"][3]["message"] == "from model_utils import load_model"
    labels = [note["label"] for note in item["notes"]]
    assert labels == ["launched by", "config", "imported by", "trained by", "error", "help"]


def test_full_format_frames_every_span_in_data_flow_order(launched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = _render(launched, "full", monkeypatch)
    order = [full.index(f"--> {where}") for where in (
        "scripts/run_z3.sh:6:1", "configs/zero3.yaml:2:1", "train.py:7:1", "train.py:18:13", "model_utils.py:6:94",
        "train.py:19:5",
    )]  # fmt: skip
    assert order == sorted(order)
    # The launch command's frame covers its continuation lines: the script it runs is in it.
    assert " 6 | accelerate launch --config_file configs/zero3.yaml \\\n   | ^^^^" in full
    assert " 7 |     train.py \\\n   |     ^^^^^^^^\n" in full and "^^^^^^^^^^^^^ launched here" in full
    assert "^^^^^^ DPL001" in full and "^^^^^^^ trained by Trainer" in full and "^^^^^^^^^^ calls load_model" in full
    assert '  = error: transformers raises "DeepSpeed Zero-3 is not compatible with passing a `device_map`"' in full


def test_a_span_whose_file_is_gone_or_binary_becomes_a_note(launched: Path) -> None:
    result = run([launched], Settings(root=launched, codes=CODES), RunOptions(), launched)
    (launched / "scripts" / "run_z3.sh").unlink()  # deleted after the check: the report must not crash
    (launched / "configs" / "zero3.yaml").write_bytes(b"\0\x01binary")
    full = FORMATS["full"].render(Report(result, RunOptions(), launched))
    assert "  = launch: scripts/run_z3.sh:6\n" in full
    assert "  = config: configs/zero3.yaml:2\n" in full
    assert "--> model_utils.py:6:94" in full and "--> train.py:7:1" in full


def test_headlines_are_short_and_concise_lines_fit(tmp_path: Path) -> None:
    """About 100 characters, never cut (headline() cuts at 160 only as a last resort), and a concise
    line with the launch in it within 200."""
    from placement_lint.report.text import CONCISE_LIMIT, concise

    headlines = []
    for case in sorted((HERE / "fixtures" / "launch").glob("bad_*")):
        root = tmp_path / case.name
        shutil.copytree(case, root, ignore=shutil.ignore_patterns("expected.txt", "warnings.txt"))
        (root / ".git").mkdir()
        result = run([root], Settings(root=root, codes=CODES), RunOptions(), root)
        headlines += [finding.message for finding in result.findings]
        for line in concise(result, RunOptions()):
            assert len(line) <= CONCISE_LIMIT, (case.name, line)
    for folder in sorted((HERE / "fixtures").glob("DPL*")):
        root = tmp_path / folder.name
        shutil.copytree(folder, root)
        (root / ".git").mkdir()
        result = run([root], Settings(root=root, codes=CODES, extend_select=("DPL100",)), RunOptions(), root)
        headlines += [finding.message for finding in result.findings]
    assert len(headlines) > 60
    assert all(len(headline) < HEADLINE_LIMIT - 10 and "\n" not in headline for headline in headlines), max(headlines, key=len)
    assert sum(map(len, headlines)) / len(headlines) < 110


def test_colour_on_a_terminal_links_each_location_to_its_file(launched: Path) -> None:
    coloured = run_script("check", "--no-cache", "--color", ".", cwd=launched).stdout
    target = (launched / "model_utils.py").resolve().as_uri()
    assert "\x1b]8;id=" in coloured and f";{target}#L6\x1b\\" in coloured
    assert f";{(launched / 'scripts' / 'run_z3.sh').resolve().as_uri()}#L6\x1b\\" in coloured
    plain = re.sub(r"\x1b\[[0-9;]*m|\x1b\]8;[^\x1b]*\x1b\\", "", coloured)
    assert plain == run_script("check", "--no-cache", ".", cwd=launched).stdout  # a pipe gets the same text, uncoloured


def test_a_piped_report_is_byte_stable_and_never_imports_rich(launched: Path) -> None:
    first = run_script("check", "--no-cache", ".", cwd=launched).stdout
    assert first == run_script("check", "--no-cache", ".", cwd=launched).stdout and "\x1b" not in first
    assert imported_by_a_check(launched, ["--no-cache", "."], ("rich",), exit_code=1) == []
    (launched / "model_utils.py").write_text("def load_model(name):\n    return name\n")
    assert imported_by_a_check(launched, ["--no-cache", "--color", "."], ("rich",), exit_code=0) == []


def test_a_message_written_as_one_long_string_keeps_every_word_in_a_note() -> None:
    """A rule (or a new code path) that still says everything in one string gets a short headline and
    loses nothing: the whole text becomes a note."""
    from placement_lint.rules.base import Message, headline

    text = "device_map='auto' spreads one process's model over every GPU, but this script runs under " + "x" * 120
    said = Message.of(text)
    assert len(headline(said.headline)) == HEADLINE_LIMIT and headline(said.headline).endswith("...")
    assert [(note.label, note.text) for note in said.notes(None)] == [("message", text)]
    assert Message.of("short").notes(None) == ()


def test_a_launch_in_a_notebook_cell_is_framed_from_that_cell(tmp_path: Path) -> None:
    from test_notebooks import TRAIN_PY, notebook, write

    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(TRAIN_PY)
    write(tmp_path / "run.ipynb", notebook("%pip install accelerate", "x = 1\n!torchrun --nproc_per_node 2 train.py"))
    full = run_script("check", "--no-cache", ".", cwd=tmp_path).stdout
    assert "--> run.ipynb:cell 2:2:1\n" in full
    command = "!torchrun --nproc_per_node 2 train.py"
    assert f"\n2 | {command}\n  | {'^' * len(command)} launched here\n" in full
    [item] = json.loads(run_script("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path).stdout)
    launch = item["related"][0]
    assert (launch["role"], Path(launch["filename"]).name, launch["cell"], launch["location"]["row"]) == (
        "launch",
        "run.ipynb",
        2,
        2,
    )
