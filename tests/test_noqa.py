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
    in_string = lint_source(tmp_path, 'HELP = "# noqa: DPL999"\n', extend_select=("DPL100",))
    assert in_string.error is None and not in_string.placed_warnings


def test_an_unknown_dpl_code_is_a_warning_at_its_place_and_hides_nothing_else(tmp_path: Path) -> None:
    source = ZERO3.replace("# noqa: DPL001", "").replace("Trainer(model", "Trainer(model") + "x = 1  # noqa: E501, DPL999\n"
    result = lint_source(tmp_path, source)
    assert result.error is None and codes(result) == ["DPL001"]
    (warning,) = result.placed_warnings
    assert warning.message == "Invalid rule code provided to `# noqa` at train.py:6: DPL999"
    assert (warning.row, warning.column, warning.end_row, warning.end_column) == (6, 22, 6, 28)
    # A typo of a code on the finding's own line: the finding is shown, as nothing suppresses it.
    typo = lint_source(tmp_path, ZERO3.replace("DPL001", "DPL01"))
    assert codes(typo) == ["DPL001"] and [w.message for w in typo.placed_warnings] == [
        "Invalid rule code provided to `# noqa` at train.py:4: DPL01"
    ]
    # Other tools' codes are theirs; known codes of rules not selected are known; --ignore-noqa reads none.
    assert not lint_source(tmp_path, ZERO3.replace("DPL001", "XYZ999")).placed_warnings
    assert not lint_source(tmp_path, ZERO3.replace("DPL001", "DPL100")).placed_warnings
    assert not lint_source(tmp_path, source, ignore_noqa=True).placed_warnings


def test_cli_warns_about_an_unknown_code_on_every_run_and_exits_as_for_its_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ruff: a warning on stderr, never an error exit: 1 for the file's findings, 0 without any."""
    (tmp_path / "train.py").write_text(ZERO3.replace("DPL001", "DPL999"))
    (tmp_path / "plain.py").write_text("x = 1  # noqa: dpl42\n")  # no rule could fire here: read all the same
    warned = [
        "warning: Invalid rule code provided to `# noqa` at plain.py:1: dpl42",
        "warning: Invalid rule code provided to `# noqa` at train.py:4: DPL999",
    ]
    for _ in range(2):  # the second run is the cache's: the warning is not lost
        result = CliRunner().invoke(main, ["check", "--output-format", "concise", str(tmp_path)], catch_exceptions=False)
        assert result.exit_code == 1
        assert [line for line in result.stderr.splitlines() if line.startswith("warning")] == [
            w.replace(" at ", f" at {tmp_path}/") for w in warned
        ]
        assert "train.py:4:65: DPL001" in result.stdout
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "plain.py"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stderr.splitlines() == warned[:1]
    assert "All checks passed!" in result.stdout


def test_precheck_reads_a_file_whose_noqa_names_an_unknown_code(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    assert checker(tmp_path).worth_parsing(b"x = 1  # noqa: DPL999\n", path)
    assert checker(tmp_path).worth_parsing(b"# placement-lint: noqa: DPL999\n", path)
    assert not checker(tmp_path).worth_parsing(b"x = 1  # noqa: DPL001, E501\n", path)
    assert not checker(tmp_path).worth_parsing(b"x = 1  # DPL999\n", path)
    # The comment is read without case, so it is looked for in every casing, not only the usual three.
    for spelling in ("NoQA", "nOqA", "noQA"):
        assert checker(tmp_path).worth_parsing(f"x = 1  # {spelling}: DPL999\n".encode(), path), spelling
    assert not checker(tmp_path, ignore_noqa=True).worth_parsing(b"x = 1  # noqa: DPL999\n", path)


def test_dpl100_names_unknown_codes_and_its_fix_removes_them(tmp_path: Path) -> None:
    source = ZERO3.replace("# noqa: DPL001", "# noqa: DPL001, DPL999, E501")
    (finding,) = lint_source(tmp_path, source, extend_select=("DPL100",)).findings
    assert finding.message == "Unused `noqa` directive (unknown: `DPL999`)"
    result = checker(tmp_path, ("DPL100",), fix=True).check(tmp_path / "train.py")
    assert codes(result) == [] and not result.placed_warnings  # the warning is the fixed text's: none
    assert (tmp_path / "train.py").read_text() == ZERO3.replace("# noqa: DPL001", "# noqa: DPL001, E501")


# -- `# placement-lint: noqa`: the whole file -------------------------------------------------------

UNSUPPRESSED = ZERO3.replace("  # noqa: DPL001", "")


def test_file_directive_suppresses_every_finding_or_the_codes_it_names(tmp_path: Path) -> None:
    assert codes(lint_source(tmp_path, UNSUPPRESSED)) == ["DPL001"]
    assert codes(lint_source(tmp_path, "# placement-lint: noqa\n" + UNSUPPRESSED)) == []
    assert codes(lint_source(tmp_path, UNSUPPRESSED + "    # placement-lint: NOQA: DPL002, DPL001\n")) == []
    assert codes(lint_source(tmp_path, "# placement-lint: noqa: DPL002\n" + UNSUPPRESSED)) == ["DPL001"]
    # --ignore-noqa ignores it as it ignores every noqa comment.
    assert codes(lint_source(tmp_path, "# placement-lint: noqa\n" + UNSUPPRESSED, ignore_noqa=True)) == ["DPL001"]


@pytest.mark.parametrize(
    ("comment", "warning"),
    [
        # Inside a string it is not a comment, and an unspaced `noqanything` is not the word.
        ('HELP = """\n# placement-lint: noqa\n"""', None),
        ("# placement-lint: noqanything", None),
        # After code: ruff's warning, and it suppresses nothing (the line's own `# noqa` is that).
        (
            "x = 1  # placement-lint: noqa",
            "Unexpected `# placement-lint: noqa` directive at train.py:6. File-level suppression comments must "
            "appear on their own line. For line-level suppression, omit the `placement-lint:` prefix.",
        ),
        # A colon with no codes after it is not a whole-file exemption: it is a mistake.
        (
            "# placement-lint: noqa:",
            "Invalid `# placement-lint: noqa` directive at train.py:6: expected a comma-separated list of codes "
            "(e.g., `# placement-lint: noqa: DPL001, DPL002`).",
        ),
        ("# placement-lint: noqa: DPL999", "Invalid rule code provided to `# placement-lint: noqa` at train.py:6: DPL999"),
    ],
)
def test_what_is_not_a_file_directive_suppresses_nothing(tmp_path: Path, comment: str, warning: str | None) -> None:
    result = lint_source(tmp_path, UNSUPPRESSED + comment + "\n")
    assert codes(result) == ["DPL001"]
    assert [w.message for w in result.placed_warnings] == ([warning] if warning else [])


def test_dpl100_judges_file_directives_as_ruff_does(tmp_path: Path) -> None:
    """A file directive's code is used by any finding of its rule in the file; it applies before the
    lines' directives, so a line's code it already covers is unused; a bare one silences DPL100."""
    (finding,) = lint_source(tmp_path, "# placement-lint: noqa: DPL001\n" + ZERO3, extend_select=("DPL100",)).findings
    assert (finding.row, finding.message) == (5, "Unused `noqa` directive (unused: `DPL001`)")
    file_level = "# placement-lint: noqa: DPL001, DPL003\n"
    (finding,) = lint_source(tmp_path, file_level + UNSUPPRESSED, extend_select=("DPL100",)).findings
    assert (finding.row, finding.message) == (1, "Unused `noqa` directive (unused: `DPL003`)")
    assert codes(lint_source(tmp_path, "# placement-lint: noqa\n" + ZERO3, extend_select=("DPL100",))) == []
    assert codes(lint_source(tmp_path, "# placement-lint: noqa: DPL100\n" + ZERO3, extend_select=("DPL100",))) == []
    path = tmp_path / "train.py"
    path.write_text(file_level + UNSUPPRESSED)
    assert codes(checker(tmp_path, ("DPL100",), fix=True).check(path)) == []
    assert path.read_text() == "# placement-lint: noqa: DPL001\n" + UNSUPPRESSED
    path.write_text("# placement-lint: noqa: DPL003\n" + ZERO3)
    assert codes(checker(tmp_path, ("DPL100",), fix=True).check(path)) == []
    assert path.read_text() == ZERO3  # nothing of it was used: the whole line goes


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
