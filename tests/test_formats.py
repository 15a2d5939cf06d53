"""The CI output formats and -o/--output-file, through the installed console script as CI runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlparse

import pytest
from test_cli import ZERO3

from placement_lint.catalogue import DOCUMENTATION_URL
from placement_lint.context.evidence import Context
from placement_lint.report.formats import FORMATS, Report
from placement_lint.report.github import escape_data, escape_property
from placement_lint.results import FileResult, Finding, RunOptions, RunResult
from placement_lint.rules import all_rules
from placement_lint.rules.violation import Violation

from helpers import SCRIPT, run_script

EXAMPLES = Path(__file__).parent.parent / "examples"
MACHINE = sorted(name for name, f in FORMATS.items() if not f.human)
OASIS_SCHEMA_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository (a `.git` marker) with an in-file ZeRO-3 finding, a launched module, a DDP loop
    whose fix adds an import, and a file that cannot be parsed."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "train_z3.py").write_text(ZERO3)
    shutil.copytree(EXAMPLES / "launch", tmp_path / "launch")
    shutil.copy(EXAMPLES / "ddp_loop.py", tmp_path / "ddp_loop.py")
    (tmp_path / "broken.py").write_text('import deepspeed\ndeepspeed.initialize(m)\nx = f(device_map="auto"\n')
    return tmp_path


def sarif_of(repo: Path, *args: str) -> dict:
    result = run_script("check", "--no-cache", "--output-format", "sarif", *args, cwd=repo)
    return json.loads(result.stdout)


# -- SARIF ------------------------------------------------------------------------------------


SCHEMA = Path(__file__).parent / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"


def _official_schema() -> dict:
    """The SARIF 2.1.0 schema as OASIS publishes it (errata 01), kept as a fixture so the check needs
    neither the network nor a package that ships it."""
    schema = json.loads(SCHEMA.read_text("utf-8"))
    assert schema["id"] == OASIS_SCHEMA_ID, "the schema as OASIS publishes it (2.1.0 errata 01)"
    return schema


def test_sarif_validates_against_the_published_schema(repo: Path) -> None:
    from jsonschema import Draft4Validator

    validator = Draft4Validator(_official_schema(), format_checker=Draft4Validator.FORMAT_CHECKER)
    log = sarif_of(repo, "--unsafe-fixes")
    run = log["runs"][0]
    assert run["results"] and any("fixes" in r for r in run["results"]) and any("relatedLocations" in r for r in run["results"])
    assert run["invocations"][0]["toolExecutionNotifications"], "the unparseable file is in the log"
    assert [error.message for error in validator.iter_errors(log)] == []

    # The validation is not vacuous: the same log with a result missing its message is refused.
    del run["results"][0]["message"]
    assert list(validator.iter_errors(log))


def test_sarif_rules_results_and_locations(repo: Path) -> None:
    run = sarif_of(repo)["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "placement-lint" and driver["version"] and driver["informationUri"]
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert set(rules) == {rule.code for rule in all_rules()}
    for code, rule in rules.items():
        # The rule's page on the documentation site (built from rules/CODE.md), never a file of this installation.
        assert rule["helpUri"] == f"{DOCUMENTATION_URL}rules/{code}/" and rule["helpUri"].startswith("https://")
        page = Path(__file__).parent.parent / "rules" / f"{Path(urlparse(rule['helpUri']).path).name}.md"
        assert page.read_text(encoding="utf-8").startswith(f"# {code}")
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["markdown"].startswith(f"# {code}")
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"

    [result] = [r for r in run["results"] if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train_z3.py"]
    assert result["ruleId"] == "DPL001" and result["level"] == "error"
    assert driver["rules"][result["ruleIndex"]]["id"] == "DPL001"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
    assert {k: v for k, v in location["region"].items() if k != "snippet"} == {
        "startLine": 4,
        "startColumn": 65,
        "endLine": 4,
        "endColumn": 71,
    }
    assert location["region"]["snippet"]["text"] == '"auto"'
    # The path: the in-file evidence that makes the file ZeRO-3 (TrainingArguments(deepspeed=...) on
    # line 3), the load itself, the Trainer that gets the model on line 5.
    related = result["relatedLocations"]
    assert [r["message"]["text"].split(":")[0] for r in related] == ["config", "load", "consumer"]
    assert [r["physicalLocation"]["region"]["startLine"] for r in related] == [3, 4, 5]
    assert all(r["physicalLocation"]["artifactLocation"]["uri"] == "train_z3.py" for r in related)
    assert "TrainingArguments" in related[0]["message"]["text"]


def test_sarif_related_locations_and_code_flow_start_at_the_launch_script(repo: Path) -> None:
    run = sarif_of(repo)["runs"][0]
    [result] = [
        r for r in run["results"] if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "launch/model_utils.py"
    ]
    related = result["relatedLocations"]
    launch = related[0]["physicalLocation"]
    assert launch["artifactLocation"] == {"uri": "launch/scripts/run_z3.sh", "uriBaseId": "%SRCROOT%"}
    script = (repo / "launch/scripts/run_z3.sh").read_text().splitlines()
    assert "accelerate launch" in script[launch["region"]["startLine"] - 1]
    [flow] = result["codeFlows"]
    [thread] = flow["threadFlows"]
    steps = [(step["kinds"][0], step["location"]["physicalLocation"]["artifactLocation"]["uri"]) for step in thread["locations"]]
    assert steps == [
        ("launch", "launch/scripts/run_z3.sh"),
        ("config", "launch/configs/zero3.yaml"),
        ("config", "launch/configs/zero3.yaml"),
        ("import", "launch/train.py"),
        ("helper", "launch/train.py"),
        ("load", "launch/model_utils.py"),
        ("consumer", "launch/train.py"),
    ]
    assert [step["executionOrder"] for step in thread["locations"]] == list(range(1, 8))
    assert [step["location"] for step in thread["locations"]] == [{k: v for k, v in r.items() if k != "id"} for r in related]


def _apply(text: str, replacements: list[dict]) -> str:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    spans = [
        (offset(r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]),
         offset(r["deletedRegion"]["endLine"], r["deletedRegion"]["endColumn"]),
         r["insertedContent"]["text"])
        for r in replacements
    ]  # fmt: skip
    for start, end, content in sorted(spans, reverse=True):
        text = text[:start] + content + text[end:]
    return text


def test_sarif_fixes_are_the_edits_fix_applies(repo: Path) -> None:
    run = sarif_of(repo, "--unsafe-fixes")["runs"][0]
    by_file: dict[str, list[dict]] = {}
    for result in run["results"]:
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                by_file.setdefault(change["artifactLocation"]["uri"], []).extend(change["replacements"])
    assert {"train_z3.py", "ddp_loop.py"} <= set(by_file)
    assert any(r["deletedRegion"]["startColumn"] == r["deletedRegion"]["endColumn"] for r in by_file["ddp_loop.py"]), (
        "the import is an insertion"
    )
    expected = {uri: _apply((repo / uri).read_text(), replacements) for uri, replacements in by_file.items()}
    run_script("check", "--no-cache", "--fix", "--unsafe-fixes", ".", cwd=repo)
    for uri, text in expected.items():
        assert (repo / uri).read_text() == text


def _fingerprints(repo: Path) -> dict[tuple[str, int], str]:
    run = sarif_of(repo)["runs"][0]
    return {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        ): r["partialFingerprints"]["placementLint/v1"]
        for r in run["results"]
    }


def test_fingerprints_survive_lines_added_above(repo: Path) -> None:
    before = _fingerprints(repo)
    source = repo / "train_z3.py"
    source.write_text("# a comment\n\n" + source.read_text())
    after = _fingerprints(repo)
    assert after[("train_z3.py", 6)] == before[("train_z3.py", 4)]
    assert sorted(after.values()) == sorted(before.values())
    gitlab = json.loads(run_script("check", "--no-cache", "--output-format", "gitlab", ".", cwd=repo).stdout)
    assert {issue["fingerprint"] for issue in gitlab if issue["check_name"].startswith("DPL")} == set(after.values())


def test_identical_findings_get_distinct_fingerprints(tmp_path: Path) -> None:
    line = 'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # spread\n'
    (tmp_path / ".git").mkdir()
    (tmp_path / "train_z3.py").write_text(ZERO3.replace(line, line * 2))
    prints = _fingerprints(tmp_path)
    assert len(prints) == 2 and len(set(prints.values())) == 2
    # Editing the code changes its fingerprint: it is the finding's identity, not the file's.
    (tmp_path / "train_z3.py").write_text(ZERO3.replace('"gpt2"', '"gpt2-xl"'))
    assert set(_fingerprints(tmp_path).values()).isdisjoint(prints.values())


# -- GitHub -----------------------------------------------------------------------------------


def test_github_escaping() -> None:
    assert escape_data("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext: a, b"
    assert escape_property("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext%3A a%2C b"


def test_github_annotations(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "we,ird:name.py").write_text(ZERO3)
    result = run_script("check", "--output-format", "github", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == (
        "::error file=we%2Cird%3Aname.py,line=4,col=65,endLine=4,endColumn=71,"
        "title=DPL001 spread-device-map-in-distributed::we,ird:name.py:4:65: DPL001 "
        + json.loads(run_script("check", "--output-format", "json", ".", cwd=tmp_path).stdout)[0]["message"]
        + "\n"
    )


def test_a_mistaken_noqa_is_a_warning_on_its_line_in_github_and_sarif(tmp_path: Path) -> None:
    from jsonschema import Draft4Validator

    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(ZERO3 + "x = 1  # noqa: DPL999\n")
    github = run_script("check", "--output-format", "github", ".", cwd=tmp_path).stdout.splitlines()
    assert github[-1] == (
        "::warning file=train.py,line=6,col=16,endLine=6,endColumn=22,title=placement-lint::"
        "Invalid rule code provided to `# noqa` at train.py:6: DPL999"
    )
    log = sarif_of(tmp_path)
    (notification,) = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "warning"
    assert notification["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 6,
        "startColumn": 16,
        "endLine": 6,
        "endColumn": 22,
    }
    validator = Draft4Validator(_official_schema(), format_checker=Draft4Validator.FORMAT_CHECKER)
    assert [error.message for error in validator.iter_errors(log)] == []


# -- GitLab -----------------------------------------------------------------------------------


def test_gitlab_code_quality_fields(repo: Path) -> None:
    result = run_script("check", "--no-cache", "--output-format", "gitlab", ".", cwd=repo)
    issues = json.loads(result.stdout)
    [issue] = [i for i in issues if i["location"]["path"] == "train_z3.py"]
    assert issue["check_name"] == "DPL001"
    assert issue["description"].startswith('DPL001: device_map="auto"')
    assert issue["severity"] == "major"
    assert issue["location"]["lines"] == {"begin": 4, "end": 4}
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    [broken] = [i for i in issues if i["location"]["path"] == "broken.py"]
    assert broken["check_name"] == "placement-lint/error" and "cannot parse" in broken["description"]
    assert result.returncode == 2


def test_gitlab_paths_follow_ci_project_dir(repo: Path) -> None:
    env_dir = repo.parent
    result = subprocess.run(
        [str(SCRIPT), "check", "--no-cache", "--output-format", "gitlab", "train_z3.py"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**_env(), "CI_PROJECT_DIR": str(env_dir)},
    )
    [issue] = json.loads(result.stdout)
    assert issue["location"]["path"] == f"{repo.name}/train_z3.py"


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CI_PROJECT_DIR")}


# -- JUnit, json-lines, grouped ---------------------------------------------------------------


def test_junit_parses_with_a_suite_per_file(repo: Path) -> None:
    result = run_script("check", "--no-cache", "--output-format", "junit", ".", cwd=repo)
    root = ET.fromstring(result.stdout)
    assert root.tag == "testsuites"
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    [case] = suites["train_z3.py"].iter("testcase")
    assert case.get("name") == "placement-lint.DPL001" and case.get("line") == "4"
    assert case.find("failure").get("message").startswith('device_map="auto"')
    assert suites["broken.py"].find("testcase/error") is not None
    assert int(root.get("errors")) == 1
    assert int(root.get("failures")) == sum(len(list(s.iter("failure"))) for s in suites.values()) >= 3


def test_junit_clean_run_is_one_passing_case(tmp_path: Path) -> None:
    root = ET.fromstring(run_script("check", "--output-format", "junit", ".", cwd=tmp_path).stdout)
    assert [(c.get("name"), list(c)) for c in root.iter("testcase")] == [("No errors found", [])]


def test_junit_escapes_what_xml_cannot_hold(tmp_path: Path) -> None:
    message = 'odd <value> & "quotes" \x01\x1b and \udcff'  # \udcff: a byte of a file name that is not UTF-8
    finding = Finding("a.py", Violation("DPL001", message, 0, 1), Context(), 1, 1, 1, 2)
    result = RunResult([FileResult("a.py", findings=[finding])], 1)
    root = ET.fromstring(FORMATS["junit"].render(Report(result, RunOptions(), tmp_path)))
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("message") == 'odd <value> & "quotes" \\u0001\\u001b and \\udcff'


def test_json_lines_are_the_json_objects(repo: Path) -> None:
    lines = run_script("check", "--no-cache", "--output-format", "json-lines", ".", cwd=repo).stdout.splitlines()
    assert len(lines) >= 3
    assert [json.loads(line) for line in lines] == json.loads(
        run_script("check", "--output-format", "json", ".", cwd=repo).stdout
    )


def test_grouped_shape(tmp_path: Path) -> None:
    line = 'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # spread\n'
    later = "\n" * 6 + 'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="balanced")\n'
    (tmp_path / "train_z3.py").write_text(ZERO3.replace(line, line + later))
    (tmp_path / "ddp.py").write_text((EXAMPLES / "ddp_loop.py").read_text())
    concise = run_script("check", "--output-format", "concise", "-q", ".", cwd=tmp_path).stdout.splitlines()
    rest = {tuple(c.split(":")[:3]): c.split(": ", 1)[1] for c in concise}  # (file, row, column) -> "CODE [*] message"
    assert sorted(rest) == [("ddp.py", "16", "75"), ("train_z3.py", "11", "65"), ("train_z3.py", "4", "65")]
    result = run_script("check", "--output-format", "grouped", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "ddp.py:",
        "  16:75 " + rest[("ddp.py", "16", "75")],
        "",
        "train_z3.py:",
        "   4:65 " + rest[("train_z3.py", "4", "65")],
        "  11:65 " + rest[("train_z3.py", "11", "65")],
        "",
        run_script("check", "--output-format", "concise", ".", cwd=tmp_path).stdout.splitlines()[-1],
    ]
    assert result.stdout.splitlines()[-1].startswith("Found 3 problems in 2 files")


# -- machine formats and -o -------------------------------------------------------------------


@pytest.mark.parametrize("name", MACHINE)
def test_machine_formats_print_only_data(repo: Path, name: str) -> None:
    result = run_script("check", "--no-cache", "--color", "--output-format", name, ".", cwd=repo)
    assert result.returncode == 2, "the unparseable file is still an error"
    assert "broken.py" in result.stderr
    assert "\x1b[" not in result.stdout and "Found " not in result.stdout and "[bold" not in result.stdout
    if name in ("json", "sarif", "gitlab"):
        json.loads(result.stdout)
    elif name == "json-lines":
        [json.loads(line) for line in result.stdout.splitlines()]
    elif name == "junit":
        ET.fromstring(result.stdout)
    else:
        assert all(line.startswith("::") for line in result.stdout.splitlines())


@pytest.mark.parametrize("name", ["sarif", "full"])
def test_output_file_gets_the_report_and_stdout_stays_empty(repo: Path, name: str) -> None:
    expected = run_script("check", "--no-cache", "--output-format", name, ".", cwd=repo)
    result = run_script("check", "--no-cache", "--color", "--output-format", name, "-o", "reports/out.txt", ".", cwd=repo)
    assert result.stdout == ""
    assert result.returncode == expected.returncode == 2
    assert "broken.py" in result.stderr
    assert (repo / "reports/out.txt").read_text() == expected.stdout, "the same report, and never coloured"
    assert [p.name for p in (repo / "reports").iterdir()] == ["out.txt"], "no temporary file is left"


def test_output_file_that_cannot_be_written_is_an_error(repo: Path) -> None:
    (repo / "taken").write_text("a file, not a folder")
    result = run_script("check", "--output-format", "sarif", "-o", "taken/out.sarif", "train_z3.py", cwd=repo)
    assert result.returncode == 2 and "cannot write" in result.stderr and result.stdout == ""


def test_machine_formats_stay_light(repo: Path) -> None:
    """rich and LibCST are for people and fixes; a CI report imports neither."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('HEAVY', [m for m in ('rich', 'libcst') if m in sys.modules], file=sys.stderr))\n"
        "from placement_lint.cli import main\n"
        "main()\n"
    )
    for name in MACHINE:
        result = subprocess.run(
            [sys.executable, "-c", probe, "check", "--no-cache", "--output-format", name, "train_z3.py"],
            cwd=repo,
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert "HEAVY []" in result.stderr, (name, result.stderr)
