"""`# noqa` comments: what they suppress, DPL100 (unused-noqa) and --ignore-noqa."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement_lint.cli import main
from placement_lint.rules import noqa

from helpers import checker, codes, lint_source

ZERO3 = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # noqa: DPL001
Trainer(model=model, args=args).train()
"""
# No distributed evidence: DPL001 has nothing to say, so its noqa is unused. The text pre-check
# would skip this file for every placement rule.
SINGLE = 'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # noqa: DPL001\n'


def run_cli(monkeypatch: pytest.MonkeyPatch, cwd: Path, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_dpl100_is_off_by_default(tmp_path: Path) -> None:
    assert codes(lint_source(tmp_path, SINGLE)) == []
    assert codes(lint_source(tmp_path, SINGLE, extend_select=("DPL100",))) == ["DPL100"]


def test_precheck_parses_a_file_only_dpl100_can_speak_about(tmp_path: Path) -> None:
    path = tmp_path / "infer.py"
    path.write_text(SINGLE)
    assert not checker(tmp_path).worth_parsing(path.read_bytes(), path)
    assert checker(tmp_path, ("DPL100",)).worth_parsing(path.read_bytes(), path)
    # A noqa naming only other tools' codes gives DPL100 nothing to say: still skipped.
    other = SINGLE.replace("DPL001", "E501").encode()
    assert not checker(tmp_path, ("DPL100",)).worth_parsing(other, path)
    # --ignore-noqa: DPL100 is silent, so it is no reason to parse.
    assert not checker(tmp_path, ("DPL100",), ignore_noqa=True).worth_parsing(path.read_bytes(), path)


def test_used_directive_is_not_reported_and_suppresses(tmp_path: Path) -> None:
    assert codes(lint_source(tmp_path, ZERO3, extend_select=("DPL100",))) == []


def test_ignore_noqa_shows_suppressed_findings_and_silences_dpl100(tmp_path: Path) -> None:
    assert codes(lint_source(tmp_path, ZERO3, ignore_noqa=True)) == ["DPL001"]
    assert codes(lint_source(tmp_path, SINGLE, extend_select=("DPL100",), ignore_noqa=True)) == []


def test_noqa_inside_a_string_is_not_a_comment(tmp_path: Path) -> None:
    source = ZERO3.replace('device_map="auto")  # noqa: DPL001', 'device_map="auto", revision="# noqa: DPL001")')
    assert codes(lint_source(tmp_path, source)) == ["DPL001"]
    # Nor can it name an unknown code.
    assert lint_source(tmp_path, 'HELP = "# noqa: DPL999"\n', extend_select=("DPL100",)).error is None


def test_unknown_dpl_code_is_still_an_error(tmp_path: Path) -> None:
    result = lint_source(tmp_path, ZERO3.replace("DPL001", "DPL999"))
    assert result.error is not None and "unknown rule code DPL999" in result.error


def test_codes_of_rules_that_did_not_run_are_not_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = ZERO3.replace("# noqa: DPL001", "# noqa: DPL001, DPL002, DPL003")
    (finding,) = lint_source(tmp_path, source, extend_select=("DPL100",)).findings
    assert finding.message == "Unused `noqa` directive (unused: `DPL002`, `DPL003`)"
    # Turned off for this file, or not selected: we cannot tell whether the code would be used.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.placement-lint]\nextend-select = ["DPL100"]\nper-file-ignores = { "train.py" = ["DPL002"] }\n'
    )
    status, output = run_cli(monkeypatch, tmp_path, "check", "--no-cache", "--output-format", "concise", "train.py")
    assert status == 1 and "(unused: `DPL003`)" in output, output
    status, output = run_cli(monkeypatch, tmp_path, "check", "--no-cache", "--select", "DPL001,DPL100", "train.py")
    assert status == 0, output


def test_fix_removes_only_the_unused_codes_and_keeps_crlf(tmp_path: Path) -> None:
    source = ZERO3.replace("# noqa: DPL001", "# noqa: DPL001,DPL003, E501").replace("\n", "\r\n")
    path = tmp_path / "train.py"
    path.write_bytes(source.encode())
    result = checker(tmp_path, ("DPL100",), fix=True).check(path)
    assert result.error is None and codes(result) == []
    assert path.read_bytes() == source.replace("DPL001,DPL003, E501", "DPL001, E501").encode()


@pytest.mark.parametrize(
    ("line", "fixed"),
    [
        ("x = 1  # noqa: DPL001\n", "x = 1\n"),
        ("x = 1  # noqa: DPL001  # type: ignore\n", "x = 1  # type: ignore\n"),
        ("x = 1  # type: ignore  # noqa: DPL001\n", "x = 1  # type: ignore\n"),
        ("x = 1  # noqa:DPL001 kept on purpose\n", "x = 1  # kept on purpose\n"),
        ("x = 1\n# noqa: DPL001\ny = 2\n", "x = 1\ny = 2\n"),
        ("x = 1  # NOQA: E501, dpl003\n", "x = 1  # NOQA: E501\n"),
        ("x = 1  # noqa: DPL001", "x = 1"),
    ],
)
def test_fix_shapes(tmp_path: Path, line: str, fixed: str) -> None:
    path = tmp_path / "train.py"
    path.write_text(line)
    result = checker(tmp_path, ("DPL100",), fix=True).check(path)
    assert result.error is None and not result.warnings
    assert path.read_text() == fixed


def test_cli_reports_dpl100_with_its_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "infer.py").write_text(SINGLE)
    status, output = run_cli(
        monkeypatch, tmp_path, "check", "--no-cache", "--extend-select", "DPL100", "--output-format", "json", "."
    )
    assert status == 1
    (finding,) = json.loads(output)
    assert finding["code"] == "DPL100" and finding["message"] == "Unused `noqa` directive (unused: `DPL001`)"
    assert finding["fix"]["applicability"] == "safe"
    status, output = run_cli(monkeypatch, tmp_path, "check", "--no-cache", "--extend-select", "DPL100", "--fix", ".")
    assert status == 0, output
    assert (tmp_path / "infer.py").read_text() == SINGLE.replace("  # noqa: DPL001", "")


def test_only_ascii_letters_fold_to_noqa() -> None:
    """`_mentions_noqa` asks the UTF-8 bytes, lowered as ASCII: right only if no other character
    matches these letters case-insensitively (as `K` does `k`, or `ſ` does `s`)."""
    every_character = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    assert set(re.findall("[noqa]", every_character, re.IGNORECASE)) == set("noqaNOQA")


@pytest.mark.parametrize("text", ["x = 1  # NoQa: DPL001\n", "s = '🙂'\nx = 1  # nOQA\n", "x = 1\n", "x = '🙂'  # no qa\n"])
def test_the_noqa_mention_check_agrees_with_a_case_insensitive_search(text: str) -> None:
    assert noqa._mentions_noqa(text) is (re.search("noqa", text, re.IGNORECASE) is not None)
