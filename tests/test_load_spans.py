"""A device_map written apart from its load (`device_map = "auto"`, then `from_pretrained(...,
device_map=device_map)`): the finding stays on the value, where its fix edits and its `# noqa` goes,
as the path's `origin`; each load the value reaches is a `load` span of its own, in every output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_lint.engine import run
from placement_lint.results import RunOptions
from placement_lint.settings import Settings

from helpers import CODES, lint_repo, run_script

# The value on line 6, its load on line 7, the trainer on line 8.
SPLIT = (
    "import torch\n"
    "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
    "\n"
    'args = TrainingArguments(output_dir="out", deepspeed="ds_z2.json")\n'
    "\n"
    'device_map = "auto"\n'
    'model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.bfloat16, device_map=device_map)\n'
    "Trainer(model=model, args=args).train()\n"
)
# One kwargs dict (line 4) splatted into a policy's load (line 6) and a reference model's (line 7).
TWO_LOADS = (
    "from transformers import AutoModelForCausalLM\n"
    "from trl import DPOConfig, DPOTrainer\n"
    "\n"
    'model_kwargs = dict(device_map="auto")\n'
    'args = DPOConfig(output_dir="out", deepspeed="ds_z2.json")\n'
    'model = AutoModelForCausalLM.from_pretrained("gpt2", **model_kwargs)\n'
    'ref_model = AutoModelForCausalLM.from_pretrained("gpt2", **model_kwargs)\n'
    "DPOTrainer(model=model, ref_model=ref_model, args=args).train()\n"
)
INLINE = SPLIT.replace('device_map = "auto"\n', "\n").replace("device_map=device_map", 'device_map="auto"')


def _repo(tmp_path: Path, source: str) -> Path:
    (tmp_path / ".git").mkdir(parents=True)
    (tmp_path / "ds_z2.json").write_text('{"zero_optimization": {"stage": 2}}\n')
    (tmp_path / "train.py").write_text(source)
    return tmp_path


def _check(root: Path, *args: str) -> str:
    done = run_script("check", "--no-cache", *args, "train.py", cwd=root)
    assert done.returncode == 1, done.stderr
    return done.stdout


def _spans(related: list[dict]) -> list[tuple[str, int, int]]:
    return [(span["role"], span["location"]["row"], span["location"]["column"]) for span in related]


def test_json_names_the_load_apart_from_the_value_and_keeps_the_finding_on_it(tmp_path: Path) -> None:
    root = _repo(tmp_path, SPLIT)
    [finding] = json.loads(_check(root, "--output-format", "json", "--unsafe-fixes"))
    assert (finding["location"], finding["noqa_row"]) == ({"row": 6, "column": 14}, 6)
    assert _spans(finding["related"]) == [("config", 4, 1), ("origin", 6, 14), ("load", 7, 9), ("consumer", 8, 1)]
    load = finding["related"][2]
    assert (load["end_location"], load["message"]) == ({"row": 7, "column": 45}, "loaded here")
    assert {"label": "loaded by", "text": "AutoModelForCausalLM.from_pretrained at line 7"} in finding["notes"]
    [edit] = finding["fix"]["edits"]  # the fix edits the value, not the load
    assert (edit["location"], edit["content"]) == ({"row": 6, "column": 14}, "None")


def test_a_value_written_in_its_load_is_the_load(tmp_path: Path) -> None:
    root = _repo(tmp_path, INLINE)
    [finding] = json.loads(_check(root, "--output-format", "json"))
    assert _spans(finding["related"]) == [("config", 4, 1), ("load", 7, 93), ("consumer", 8, 1)]
    assert not any(note["label"] == "loaded by" for note in finding["notes"])


def test_each_load_a_value_reaches_is_a_span(tmp_path: Path) -> None:
    root = _repo(tmp_path, TWO_LOADS)
    [finding] = json.loads(_check(root, "--output-format", "json"))
    assert finding["location"] == {"row": 4, "column": 32}
    assert [span[:2] for span in _spans(finding["related"])] == [
        ("config", 5),
        ("origin", 4),
        ("load", 6),
        ("load", 7),
        ("consumer", 8),
    ]
    assert {"label": "loaded by", "text": "AutoModelForCausalLM.from_pretrained at line 6 and line 7"} in finding["notes"]


def test_full_text_frames_the_value_then_the_load(tmp_path: Path) -> None:
    root = _repo(tmp_path, SPLIT)
    out = _check(root)
    value = out.index("--> train.py:6:14")
    load = out.index("--> train.py:7:9")
    assert value < load < out.index("--> train.py:8:1")
    frame = out[load : out.index("-->", load + 3)]
    assert "^" * len("AutoModelForCausalLM.from_pretrained") + " loaded here" in frame
    assert "^^^^^^ DPL001" in out[value:load]
    assert "= loaded by: AutoModelForCausalLM.from_pretrained at line 7" in out


def test_sarif_relates_the_load_and_draws_it_in_the_code_flow(tmp_path: Path) -> None:
    root = _repo(tmp_path, SPLIT)
    [result] = json.loads(_check(root, "--output-format", "sarif"))["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 6
    related = result["relatedLocations"]
    assert [(r["message"]["text"], r["physicalLocation"]["region"]["startLine"]) for r in related][1:3] == [
        ("origin: the device_map value", 6),
        ("load: loaded here", 7),
    ]
    [thread] = result["codeFlows"][0]["threadFlows"]
    assert [step["kinds"] for step in thread["locations"]] == [["config"], ["origin"], ["load"], ["consumer"]]
    assert "origin [train.py:6](2) -> load [train.py:7](3)" in result["message"]["text"]


def test_the_editor_relates_the_load_to_the_diagnostic_on_the_value(tmp_path: Path) -> None:
    from placement_lint.api import check_source
    from placement_lint.server import related_locations

    root = _repo(tmp_path, SPLIT)
    [finding] = check_source(SPLIT, root / "train.py")
    assert (finding.row, finding.column) == (6, 14)
    found = [(location.role, location.row, location.column, location.end_column) for location in related_locations(finding, root)]
    assert ("load", 7, 9, 45) in found
    assert not any(role == "origin" for role, *_ in found)  # the diagnostic's own range


def test_noqa_on_the_value_line_still_suppresses(tmp_path: Path) -> None:
    root = _repo(tmp_path, SPLIT.replace('device_map = "auto"\n', 'device_map = "auto"  # noqa: DPL001\n'))
    done = run_script("check", "--no-cache", "train.py", cwd=root)
    assert done.returncode == 0, done.stdout


def test_a_map_for_inference_names_its_load(tmp_path: Path) -> None:
    source = (
        "from transformers import pipeline\n"
        "from accelerate import Accelerator\n"
        "\n"
        "accelerator = Accelerator()\n"
        'placement = "auto"\n'
        'generator = pipeline("text-generation", model="gpt2", device_map=placement)\n'
        'print(generator("hello"))\n'
    )
    (tmp_path / ".git").mkdir()
    (tmp_path / "generate.py").write_text(source)
    (tmp_path / "run.sh").write_text("accelerate launch --multi_gpu --num_processes 4 generate.py\n")
    [finding] = lint_repo(tmp_path).findings
    assert (finding.code, finding.row) == ("DPL007", 5)
    assert [(span.role, span.row) for span in finding.violation.related if span.role in ("origin", "load")] == [
        ("origin", 5),
        ("load", 6),
    ]


@pytest.mark.parametrize(("source", "rows"), [(SPLIT, [7]), (TWO_LOADS, [6, 7])], ids=["one load", "two loads"])
def test_a_cached_run_names_the_same_loads(tmp_path: Path, source: str, rows: list[int]) -> None:
    root = _repo(tmp_path / "repo", source)
    cache = tmp_path / "cache"

    def related() -> list[tuple[tuple[object, ...], ...]]:
        result = run([root], Settings(root=root, codes=CODES), RunOptions(), root, cache)
        return [tuple(tuple(span) for span in finding.violation.related) for finding in result.findings]

    cold = related()
    assert [span[2] for span in cold[0] if span[0] == "load"] == rows
    assert related() == cold == [tuple(tuple(span) for span in f.violation.related) for f in lint_repo(root).findings]


def test_a_load_in_another_notebook_cell_is_located_by_cell(tmp_path: Path) -> None:
    cells = [
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments",
        'args = TrainingArguments(output_dir="out", deepspeed="ds_z2.json")',
        'device_map = "auto"',
        'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map=device_map)\nTrainer(model=model, args=args).train()',
    ]
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None} for c in cells],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    root = _repo(tmp_path, "")
    (root / "train.ipynb").write_text(json.dumps(notebook))
    done = run_script("check", "--no-cache", "--output-format", "json", "train.ipynb", cwd=root)
    [finding] = json.loads(done.stdout)
    assert (finding["cell"], finding["location"]) == (3, {"row": 1, "column": 14})
    [load] = [span for span in finding["related"] if span["role"] == "load"]
    assert (load["cell"], load["location"]) == (4, {"row": 1, "column": 9})
    assert {"label": "loaded by", "text": "AutoModelForCausalLM.from_pretrained at cell 4, line 1"} in finding["notes"]


def test_a_value_a_local_helper_returns_to_two_loads_names_both(tmp_path: Path) -> None:
    source = (
        "from transformers import AutoModelForCausalLM\n"
        "from trl import DPOConfig, DPOTrainer\n"
        "def placement():\n"
        '    return "auto"\n'
        'args = DPOConfig(output_dir="out", deepspeed="ds_z2.json")\n'
        "model = AutoModelForCausalLM.from_pretrained(\n"
        '    "gpt2", device_map=placement()\n'
        ")\n"
        'ref_model = AutoModelForCausalLM.from_pretrained("gpt2", device_map=placement())\n'
        "DPOTrainer(model=model, ref_model=ref_model, args=args).train()\n"
    )
    root = _repo(tmp_path, source)
    [finding] = lint_repo(root).findings
    assert (finding.row, finding.column) == (4, 12)
    spans = [(span.role, span.row, span.column, span.end_row) for span in finding.violation.related]
    # The helper's call, the value it returns, then each load by its callee (one line, not the whole call).
    assert spans[1:5] == [("helper", 7, 24, 7), ("origin", 4, 12, 4), ("load", 6, 9, 6), ("load", 9, 13, 9)]
