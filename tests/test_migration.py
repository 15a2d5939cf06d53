"""Migration mode: --show-fixes, the end-of-run summary, the progress bar decision, --add-noqa and
--changed-since."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from placement_lint.context.evidence import Context
from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.engine import run
from placement_lint.fixes.apply import AppliedFix, fix_to_fixed_point, original_offset
from placement_lint.fixes.noqa import add_noqa, noqa_row
from placement_lint.report.migration import fix_list, render_summary, summarize
from placement_lint.report.progress import MANY_FILES, ProgressBar, progress_due, progress_wanted
from placement_lint.results import FileResult, Finding, RunOptions, RunResult, Screened
from placement_lint.rules import all_rules
from placement_lint.rules.violation import Violation
from placement_lint.settings import Settings
from placement_lint.source import decode_source

from helpers import CODES, lint_file, run_script

ZERO3 = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")  # spread
Trainer(model=model, args=args).train()
"""
DDP_FIXED = (
    "import torch.distributed as dist\n"
    "from transformers import AutoModelForCausalLM\n"
    'dist.init_process_group("nccl")\n'
    'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="cuda:0")\n'
)
NAMES = {rule.code: rule.name for rule in all_rules()}


def table_row(output: str, first: str) -> list[str]:
    """The cells of the summary table's row starting with `first` (a Markdown table when not a terminal)."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{output}")


# -- which line a fix is reported on ---------------------------------------------------------------


def test_fixes_of_later_passes_are_reported_on_their_original_lines() -> None:
    text = "a\nb\nc\n"
    header = Fix(Applicability.SAFE, "add a header", (Edit(0, 0, "h1\nh2\n"),))
    upper = Fix(Applicability.SAFE, "upper c", (Edit(4, 5, "C"),))
    passes = iter([[("X3", Fix(Applicability.UNSAFE, "c to D", (Edit(10, 11, "D"),)), 10)], []])
    # Pass 2 sees "h1\nh2\na\nb\nC\n": its finding at offset 10 is the original "c" on line 3.
    outcome = fix_to_fixed_point(
        text, lambda new: next(passes), {Applicability.SAFE, Applicability.UNSAFE}, [("X1", header, 0), ("X2", upper, 4)]
    )
    assert outcome.text == "h1\nh2\na\nb\nD\n"
    assert [(a.code, a.row) for a in outcome.applied] == [("X1", 1), ("X2", 3), ("X3", 3)]
    assert outcome.applied[-1].applicability is Applicability.UNSAFE


def test_original_offset_inside_inserted_text_is_the_insertion_point() -> None:
    edits = [Edit(2, 3, "XYZ")]  # "abcd" -> "abXYZd"
    assert [original_offset(offset, [edits]) for offset in range(6)] == [0, 1, 2, 2, 2, 3]


# -- --show-fixes and the summary -----------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "train_z3.py").write_text(ZERO3)
    (tmp_path / "ddp.py").write_text(DDP_FIXED)
    (tmp_path / "clean.py").write_text("print('hello')\n")
    return tmp_path


def test_show_fixes_lists_each_fix_then_the_summary(repo: Path) -> None:
    result = run_script("check", "--fix", "--show-fixes", "--no-cache", ".", cwd=repo)
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "Fixed 1 problem:\n- train_z3.py:\n    4  DPL001  Use device_map=None\n" in out
    assert "files scanned        3" in out and "files with findings  2" in out and "files fixed          1" in out
    assert table_row(out, "rule") == ["rule", "name", "found", "fixed", "remaining"]
    assert table_row(out, "DPL001") == ["DPL001", "spread-device-map-in-distributed", "1", "1", "0"]
    assert "Still needs a human (1):" in out and "ddp.py:4:" in out
    assert "--fix --unsafe-fixes" in out.split("Still needs a human")[1]
    assert (
        out.index("Fixed 1 problem:")
        < out.index("files scanned")
        < out.index("Fixed 1 problem in 1 file, 1 remaining (1 hidden fix can be enabled with --unsafe-fixes).")
    )
    assert out.rstrip().endswith("Fixed 1 problem in 1 file, 1 remaining (1 hidden fix can be enabled with --unsafe-fixes).")


def test_unsafe_fixes_are_marked_in_the_list(repo: Path) -> None:
    result = run_script("check", "--fix", "--unsafe-fixes", "--show-fixes", "--no-cache", ".", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "- ddp.py:\n    4  DPL003  " in result.stdout and "(unsafe fix)\n" in result.stdout
    assert "Still needs a human" not in result.stdout


def test_diff_keeps_stdout_a_patch_and_lists_fixes_on_stderr(repo: Path) -> None:
    before = (repo / "train_z3.py").read_bytes()
    result = run_script("check", "--diff", "--show-fixes", "--no-cache", ".", cwd=repo)
    assert result.returncode == 1
    assert result.stdout.startswith("--- a/train_z3.py\n+++ b/train_z3.py\n")
    assert "Would fix 1 problem:\n- train_z3.py:\n    4  DPL001  Use device_map=None" in result.stderr
    assert "files scanned" not in result.stdout + result.stderr
    assert (repo / "train_z3.py").read_bytes() == before


def test_machine_formats_get_neither_list_nor_summary_on_stdout(repo: Path) -> None:
    result = run_script("check", "--fix", "--show-fixes", "--output-format", "json", "--no-cache", ".", cwd=repo)
    assert result.returncode == 1
    assert [item["code"] for item in json.loads(result.stdout)] == ["DPL003"]
    assert "Fixed 1 problem:" in result.stderr  # asked for: it goes where it cannot spoil the JSON
    assert "files scanned" not in result.stdout + result.stderr


def test_quiet_fix_prints_no_summary(repo: Path) -> None:
    result = run_script("check", "--fix", "-q", "--no-cache", ".", cwd=repo)
    assert result.returncode == 1
    assert "files scanned" not in result.stdout and "Fixed 1 problem" not in result.stdout
    assert "ddp.py:4:" in result.stdout


def test_a_clean_fix_run_prints_one_line(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text("print('hello')\n")
    result = run_script("check", "--fix", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "All checks passed!"


def _finding(code: str, fix: Fix | None, display: str = "a.py", row: int = 1) -> Finding:
    return Finding(display, Violation(code, "message", 0, 1, fix), Context(), row, 1, row, 2)


def test_what_needs_a_human_is_grouped_by_rule_and_by_what_to_do() -> None:
    unsafe = Fix(Applicability.UNSAFE, "Use None", ())
    safe = Fix(Applicability.SAFE, "Use None", ())
    files = [
        FileResult("a.py", findings=[_finding("DPL003", unsafe, row=3), _finding("DPL003", None, row=9)]),
        FileResult("b.py", findings=[_finding("DPL001", safe, "b.py", 2)], fixed=[AppliedFix("DPL001", "Use None", 7)]),
        FileResult("c.py"),
    ]
    summary = summarize(RunResult(files, checked=40), RunOptions(fix=True), NAMES)
    assert (summary.scanned, summary.with_findings, summary.fixed_files) == (40, 2, 1)
    assert [(r.code, r.found, r.fixed, r.remaining) for r in summary.rules] == [("DPL001", 2, 1, 1), ("DPL003", 2, 0, 2)]
    hints = {(w.code, w.hint.split(":")[0]): w.places for w in summary.needs_human}
    assert hints == {
        ("DPL001", "fix not applied"): ["b.py:2:1"],
        ("DPL003", "no automatic fix"): ["a.py:9:1"],
        ("DPL003", "unsafe fix available"): ["a.py:3:1"],
    }
    with_unsafe = summarize(RunResult(files, checked=40), RunOptions(fix=True, unsafe_fixes=True), NAMES)
    assert not any("unsafe fix available" in w.hint for w in with_unsafe.needs_human)
    text = "\n".join(render_summary(summary))
    assert "  DPL003 (1)  no automatic fix" in text and "      a.py:9:1" in text
    assert table_row(text, "DPL003") == ["DPL003", "fixed-device-in-distributed", "2", "0", "2"]
    drawn = "\n".join(render_summary(summary, terminal=True))
    # On a terminal: a table drawn by rich, the codes in bold red, the columns lined up under the colour codes.
    assert "\x1b[1;31mDPL001" in drawn and "|" not in drawn
    assert re.search(r"^DPL001 +spread-device-map-in-distributed +2 +1 +1$", re.sub(r"\x1b\[[0-9;]*m", "", drawn), re.M)


def test_long_groups_are_cut_short() -> None:
    files = [FileResult(f"f{i:02}.py", findings=[_finding("DPL003", None, f"f{i:02}.py")]) for i in range(25)]
    text = "\n".join(render_summary(summarize(RunResult(files, checked=25), RunOptions(fix=True), NAMES)))
    assert "f09.py:1:1" in text and "f10.py" not in text and "... and 15 more" in text


def test_fix_list_is_empty_without_fixes() -> None:
    assert fix_list(RunResult([FileResult("a.py")], checked=1), would=False) == []


# -- the progress bar ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tty", "environ", "output_format", "quiet", "expected"),
    [
        (True, {}, "full", False, True),
        (True, {}, "concise", False, True),
        (False, {}, "full", False, False),  # piped into a log
        (True, {"CI": "true"}, "full", False, False),
        (True, {"GITHUB_ACTIONS": "true"}, "full", False, False),
        (True, {"CI": "false"}, "full", False, True),
        (True, {"TERM": "dumb"}, "full", False, False),
        (True, {}, "json", False, False),
        (True, {}, "sarif", False, False),  # any format not made for people
        (True, {}, "full", True, False),
    ],
)
def test_progress_only_for_a_person_watching(
    tty: bool, environ: dict[str, str], output_format: str, quiet: bool, expected: bool
) -> None:
    assert progress_wanted(tty, environ, output_format, quiet) is expected


def test_progress_only_once_the_run_is_long() -> None:
    assert not progress_due(10, 0.2)
    assert progress_due(MANY_FILES, 0.0)
    assert progress_due(10, 1.5)


def test_progress_bar_starts_only_when_due() -> None:
    now = [0.0]
    bar = ProgressBar(clock=lambda: now[0])
    bar(1, 10)
    assert not bar.shown
    now[0] = 2.0
    bar(2, 10)
    assert bar.shown
    bar.close()
    assert not bar.shown


def test_progress_bar_says_which_stage_the_run_is_in() -> None:
    now = [0.0]
    bar = ProgressBar(clock=lambda: now[0])
    bar.stage("Finding files", 512, None)
    assert not bar.shown
    now[0] = 1.5
    bar.stage("Reading launch files", 3, 10)
    assert bar.shown and bar.description == "Reading launch files"
    bar.stage("Following imports", 0, None)
    bar(5, 10)
    assert bar.description == "Checking"
    bar.close()


def test_the_run_tells_the_progress_bar_of_the_stages_before_the_checks(tmp_path: Path) -> None:
    """A run that spends seconds finding files or reading the launch context shows it from the first
    second, not a blank terminal until the checks begin."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "train.py").write_text(
        "from helpers import load\nfrom transformers import Trainer\nTrainer(model=load()).train()\n"
    )
    (tmp_path / "helpers.py").write_text(
        "from transformers import AutoModelForCausalLM\ndef load():\n    return AutoModelForCausalLM.from_pretrained('m')\n"
    )

    class Heard:
        def __init__(self) -> None:
            self.stages: list[str] = []

        def __call__(self, done: int, total: int) -> None:
            self.stage("Checking", done, total)

        def stage(self, name: str, done: int, total: int | None = None) -> None:
            if not self.stages or self.stages[-1] != name:
                self.stages.append(name)

    heard = Heard()
    run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(jobs=1), tmp_path, progress=heard)
    assert heard.stages == ["Finding files", "Reading launch files", "Following imports", "Following returned values", "Checking"]


@pytest.mark.parametrize("pooled", ["none", "parsing", "everything"])
def test_the_run_reports_every_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: str) -> None:
    for i in range(4):
        (tmp_path / f"train{i}.py").write_text(ZERO3)
        (tmp_path / f"other{i}.py").write_text("x = 1\n")
    # The process pool hands results back batch by batch: after the pre-check here, or doing it too.
    if pooled == "parsing":
        monkeypatch.setattr("placement_lint.engine.POOL_THRESHOLD_BYTES", 0)
    if pooled == "everything":
        monkeypatch.setattr("placement_lint.engine.SCREEN_POOL_BYTES", 0)
    seen: list[tuple[int, int]] = []
    result = run(
        [tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(jobs=2), tmp_path, progress=lambda d, t: seen.append((d, t))
    )
    assert len(result.findings) == 4
    assert {total for _, total in seen} == {8}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == 8


@pytest.mark.parametrize("threshold", ["POOL_THRESHOLD_BYTES", "SCREEN_POOL_BYTES"])
def test_a_pool_whose_workers_spawn_gives_the_same_findings(tmp_path: Path, threshold: str) -> None:
    """Workers that do not fork (macOS, Windows) get the checker and the pending files pickled."""
    import subprocess

    for i in range(3):
        (tmp_path / f"train{i}.py").write_text(ZERO3)
        (tmp_path / f"other{i}.py").write_text("x = 1\n")
    probe = (
        "import multiprocessing, sys\n"
        "if __name__ == '__main__':\n"
        "    multiprocessing.set_start_method('spawn')\n"
        "    import placement_lint.engine as engine\n"
        f"    engine.{threshold} = 0\n"
        "    engine._CAN_FORK = False\n"
        "    from placement_lint.cli import main\n"
        "    main(sys.argv[1:])\n"
    )
    command = [sys.executable, "-c", probe, "check", "--no-cache", "--output-format", "concise", "--jobs", "2"]
    done = subprocess.run([*command, "."], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert sorted(line.split(":")[0] for line in done.stdout.splitlines() if "DPL" in line) == [
        "train0.py",
        "train1.py",
        "train2.py",
    ]


def forked_workers_over(tmp_path: Path, files: int) -> None:
    """Skip where workers do not fork; else `files` training scripts, each with a finding."""
    from placement_lint import engine

    if not engine._CAN_FORK:
        pytest.skip("this platform's workers do not fork")
    for i in range(files):
        (tmp_path / f"train{i}.py").write_text(ZERO3)


def test_a_forked_worker_that_dies_has_its_share_checked_by_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placement_lint import engine

    forked_workers_over(tmp_path, 4)
    parent = os.getpid()
    real = engine._screen_batch

    def dies_in_the_child(batch: list[int]) -> list[tuple[int, Screened | str | None]]:
        if os.getpid() != parent:
            os._exit(3)
        return real(batch)

    monkeypatch.setattr(engine, "_screen_batch", dies_in_the_child)
    monkeypatch.setattr(engine, "SCREEN_POOL_BYTES", 0)
    result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(jobs=2), tmp_path)
    assert sorted(f.display for f in result.findings) == [f"train{i}.py" for i in range(4)]


@pytest.mark.parametrize("pooled", ["parsing", "everything"])
def test_a_pooled_fix_run_writes_every_fix_from_the_runs_own_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: str
) -> None:
    """The workers fix, the run's process writes: an interrupt kills workers, never a write."""
    from placement_lint import engine
    from placement_lint.fixes import write

    forked_workers_over(tmp_path, 8)
    writers = tmp_path.parent / f"{tmp_path.name}-writers"
    real = write.replace_file

    def recorded(target: Path, data: bytes, mode: int | None, durable: bool = True) -> None:
        with writers.open("a") as log:
            log.write(f"{os.getpid()}\n")
        real(target, data, mode, durable)

    monkeypatch.setattr(write, "replace_file", recorded)
    monkeypatch.setattr(engine, "POOL_THRESHOLD_BYTES" if pooled == "parsing" else "SCREEN_POOL_BYTES", 0)
    result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(jobs=2, fix=True), tmp_path)
    assert sorted(r.display for r in result.files if r.fixed) == [f"train{i}.py" for i in range(8)]
    assert all('device_map="auto"' not in (tmp_path / f"train{i}.py").read_text() for i in range(8))
    assert writers.read_text().split() == [str(os.getpid())] * 8


def test_a_file_changed_under_a_pooled_fix_is_checked_again_by_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placement_lint import engine

    forked_workers_over(tmp_path, 4)
    parent = os.getpid()
    real = engine._screen_batch
    edited = ZERO3.replace("# spread", "# someone else's edit")

    def edits_after_reading(batch: list[int]) -> list[tuple[int, Screened | str | None]]:
        done = real(batch)
        if os.getpid() != parent:  # the file changes after the worker read it, before the run writes it
            for index, _ in done:
                Path(engine._WORKER_PENDING[index].name).write_text(edited)
        return done

    monkeypatch.setattr(engine, "_screen_batch", edits_after_reading)
    monkeypatch.setattr(engine, "SCREEN_POOL_BYTES", 0)
    result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(jobs=2, fix=True), tmp_path)
    texts = [(tmp_path / f"train{i}.py").read_text() for i in range(4)]
    assert all('device_map="auto"' not in text for text in texts), "the edited files were fixed as they are now"
    assert sum("someone else's edit" in text for text in texts) >= 1, "a worker took a share"
    assert sorted(r.display for r in result.files if r.fixed) == [f"train{i}.py" for i in range(4)]


def test_the_pieces_hold_every_file_once_big_files_alone(tmp_path: Path) -> None:
    from placement_lint import engine

    sizes = [5_000_000, 10, 4_000_000, 20, 30, *([100] * 300)]
    pending = []
    for index, size in enumerate(sizes):
        path = tmp_path / f"f{index}.py"
        path.write_bytes(b"")
        os.truncate(path, size)
        pending.append(engine._Pending(str(path), path.stat(), ""))
    ordered = sorted(range(len(pending)), key=lambda index: -pending[index].status.st_size)
    chunks = engine._chunks(ordered, pending, 2)
    assert [index for chunk in chunks for index in chunk] == ordered
    assert chunks[0] == [0] and chunks[1] == [2], "a big file is a piece of its own"
    assert max(len(chunk) for chunk in chunks) < 10 and len(chunks) < len(pending)


def test_processes_taking_pieces_in_turn_take_each_once() -> None:
    from placement_lint import engine

    if not engine._CAN_FORK:
        pytest.skip("this platform's workers do not fork")
    claims = engine._Claims(500)
    readers = []
    for _ in range(2):
        reader, writer = os.pipe()
        if os.fork() == 0:
            taken = [number for number in claims]
            os.write(writer, ",".join(map(str, taken)).encode())
            os._exit(0)
        os.close(writer)
        readers.append(reader)
    mine = list(claims)
    theirs = []
    for reader in readers:
        with os.fdopen(reader, "rb") as incoming:
            text = incoming.read().decode()
        theirs += [int(number) for number in text.split(",") if number]
        os.wait()
    claims.close()
    assert sorted(mine + theirs) == list(range(500))


def _slow_batch(batch: list[int]) -> list[tuple[int, Screened | str | None]]:
    time.sleep(1)
    return [(batch[0], Screened(None))]


def test_a_pooled_run_stopped_early_does_not_wait_for_the_batches_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (or a caller that stops reading) must not sit through every queued batch."""
    from placement_lint import engine
    from placement_lint.checker import FileChecker

    monkeypatch.setattr(engine, "_screen_batch", _slow_batch)  # forked workers inherit it
    status = (tmp_path / "x.py").write_text("") or (tmp_path / "x.py").stat()
    pending = [engine._Pending(str(tmp_path / f"f{i}.py"), status, "") for i in range(16)]
    checker = FileChecker(Settings(root=tmp_path, codes=CODES), RunOptions(), tmp_path)
    stream = engine._pooled(checker, pending, 2, False)  # 16 one-second batches on two workers: 8 s
    next(stream)
    started = time.monotonic()
    stream.close()
    assert time.monotonic() - started < 3


# -- --add-noqa ------------------------------------------------------------------------------------


def _without(text: str, inserted: str) -> str:
    return text.replace(inserted, "", 1)


def test_add_noqa_appends_after_an_existing_comment_and_silences_the_file(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_text(ZERO3)
    result = run_script("check", "--add-noqa", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Added 1 noqa comment." in result.stderr
    after = target.read_text()
    assert 'device_map="auto")  # spread  # noqa: DPL001\n' in after
    assert _without(after, "  # noqa: DPL001") == ZERO3
    again = run_script("check", "--add-noqa", "--no-cache", ".", cwd=tmp_path)
    assert again.returncode == 0 and "Added 0 noqa comments." in again.stderr and target.read_text() == after


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("# noqa: E501", "# noqa: E501, DPL001"),
        ("# noqa:E501,W291  (long line)", "# noqa:E501,W291, DPL001  (long line)"),
        ("# NOQA: DPL003", "# NOQA: DPL003, DPL001"),
    ],
)
def test_add_noqa_merges_into_the_existing_directive(tmp_path: Path, comment: str, expected: str) -> None:
    target = tmp_path / "train.py"
    target.write_text(ZERO3.replace("# spread", comment))
    assert run_script("check", "--add-noqa", "--no-cache", ".", cwd=tmp_path).returncode == 0
    assert target.read_text() == ZERO3.replace("# spread", expected)


def test_add_noqa_keeps_crlf_and_drops_only_trailing_blanks(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    original = ZERO3.replace("  # spread", " \t").replace("\n", "\r\n").encode()
    target.write_bytes(original)
    assert run_script("check", "--add-noqa", "--no-cache", ".", cwd=tmp_path).returncode == 0
    assert target.read_bytes() == original.replace(b'"auto") \t\r\n', b'"auto")  # noqa: DPL001\r\n')


CONTINUED = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto", \\
    torch_dtype="auto")
Trainer(model=model, args=args).train()
"""
IN_STRING = '''from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto", revision="""main
""")  # long revision
Trainer(model=model, args=args).train()
'''


@pytest.mark.parametrize(("source", "noqa_line"), [(CONTINUED, 5), (IN_STRING, 5)])
def test_noqa_goes_where_a_comment_can_be_and_suppression_looks_there(tmp_path: Path, source: str, noqa_line: int) -> None:
    target = tmp_path / "train.py"
    target.write_text(source)
    [finding] = lint_file(target).findings
    assert finding.row == 4
    assert noqa_row(decode_source(target, source.encode()), finding.violation.start) == noqa_line
    [item] = json.loads(run_script("check", "--output-format", "json", "--no-cache", ".", cwd=tmp_path).stdout)
    assert (item["location"]["row"], item["noqa_row"]) == (4, noqa_line)
    assert run_script("check", "--add-noqa", "--no-cache", ".", cwd=tmp_path).returncode == 0
    after = target.read_text()
    ast.parse(after)
    assert "noqa" in after.splitlines()[noqa_line - 1] and "noqa" not in after.splitlines()[3]
    assert lint_file(target).findings == []
    # A comment written by hand on that line suppresses it too; one on a later line does not.
    lines = source.splitlines(keepends=True)
    lines[noqa_line - 1] = lines[noqa_line - 1].rstrip("\n") + "  # noqa: DPL001\n"
    target.write_text("".join(lines))
    assert lint_file(target).findings == []
    lines = source.splitlines(keepends=True)
    lines[noqa_line] = lines[noqa_line].rstrip("\n") + "  # noqa: DPL001\n"
    target.write_text("".join(lines))
    assert len(lint_file(target).findings) == 1


def test_several_codes_on_one_line_make_one_sorted_comment(tmp_path: Path) -> None:
    source = decode_source(tmp_path / "x.py", b"a = 1\nb = 2  # noqa: E501\n")
    text, added = add_noqa(source, [("DPL003", 0), ("DPL001", 2), ("DPL002", 6), ("E501", 6)])
    assert (text, added) == ("a = 1  # noqa: DPL001, DPL003\nb = 2  # noqa: E501, DPL002\n", 2)


def test_add_noqa_after_fix_baselines_only_what_is_left(repo: Path) -> None:
    result = run_script("check", "--fix", "--add-noqa", "--no-cache", ".", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "device_map=None)  # spread\n" in (repo / "train_z3.py").read_text()
    assert '"cuda:0")  # noqa: DPL003\n' in (repo / "ddp.py").read_text()
    assert table_row(result.stdout, "DPL003") == ["DPL003", "fixed-device-in-distributed", "1", "0", "1", "0"]
    assert "noqa" in table_row(result.stdout, "rule")
    assert "noqa comments added  1" in result.stdout and "Still needs a human" not in result.stdout


def test_add_noqa_and_diff_contradict(repo: Path) -> None:
    result = run_script("check", "--add-noqa", "--diff", ".", cwd=repo)
    assert result.returncode == 2 and "--add-noqa" in result.stderr


# -- --changed-since -------------------------------------------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
LAUNCHED = """from transformers import AutoModelForCausalLM, Trainer


def main():
    model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")
    Trainer(model=model).train()


main()
"""
IN_FILE_CONFIG = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments("out", deepspeed="ds_inline.json")
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")
Trainer(model=model, args=args).train()
"""

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    files = {
        "train_a.py": ZERO3,
        "train_b.py": ZERO3,
        "launched.py": LAUNCHED,
        "inline.py": IN_FILE_CONFIG,
        "ds_inline.json": '{"zero_optimization": {"stage": 3}}',
        "scripts/run.sh": "#!/bin/bash\naccelerate launch --config_file configs/acc.yaml launched.py\n",
        # Names the launcher without running it: editing the launcher says nothing new about this file.
        "scripts/other.sh": "#!/bin/bash\n# like scripts/run.sh, on one GPU\npython -m torch.distributed.run --nproc_per_node 2 other.py\n",
        "other.py": LAUNCHED,
        "configs/acc.yaml": "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: configs/ds.json\nnum_processes: 8\n",
        "configs/ds.json": '{"zero_optimization": {"stage": 3}}',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "initial")
    return tmp_path


def changed_files(repo: Path, *extra: str) -> tuple[int, set[str], str]:
    result = run_script(
        "check", "--changed-since", "HEAD", "--no-cache", "--output-format", "json", *extra, ".", cwd=repo, env=GIT_ENV
    )
    names = {Path(item["filename"]).name for item in json.loads(result.stdout or "[]")}
    return result.returncode, names, result.stderr


@needs_git
def test_everything_is_found_without_the_option(git_repo: Path) -> None:
    result = run_script("check", "--no-cache", "--output-format", "json", ".", cwd=git_repo)
    assert {Path(i["filename"]).name for i in json.loads(result.stdout)} == {
        "train_a.py",
        "train_b.py",
        "launched.py",
        "inline.py",
        "other.py",
    }


@needs_git
def test_only_changed_and_untracked_files_are_checked(git_repo: Path) -> None:
    assert changed_files(git_repo)[:2] == (0, set())
    (git_repo / "train_a.py").write_text(ZERO3 + "# edited\n")
    (git_repo / "new.py").write_text(ZERO3)
    code, names, stderr = changed_files(git_repo)
    assert (code, names) == (1, {"train_a.py", "new.py"})
    assert "Checking 2 of " in stderr
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "edit")
    assert changed_files(git_repo)[:2] == (0, set())
    result = run_script("check", "--changed-since", "HEAD~1", "--no-cache", "--output-format", "concise", ".", cwd=git_repo)
    assert "train_a.py:4:" in result.stdout and "new.py:4:" in result.stdout and "train_b.py" not in result.stdout


@needs_git
@pytest.mark.parametrize("edited", ["scripts/run.sh", "configs/acc.yaml", "configs/ds.json"])
def test_a_changed_launcher_or_config_rechecks_what_it_launches(git_repo: Path, edited: str) -> None:
    with open(git_repo / edited, "a") as handle:
        handle.write("\n")
    code, names, stderr = changed_files(git_repo)
    assert (code, names) == (1, {"launched.py"})
    assert "for their launch context" in stderr


@needs_git
def test_a_changed_config_named_in_a_file_rechecks_that_file(git_repo: Path) -> None:
    (git_repo / "ds_inline.json").write_text('{"zero_optimization": {"stage": 3}, "train_batch_size": 8}')
    assert changed_files(git_repo)[:2] == (1, {"inline.py"})


@needs_git
def test_a_changed_settings_file_rechecks_everything(git_repo: Path) -> None:
    (git_repo / "pyproject.toml").write_text("[tool.placement-lint]\nselect = ['DPL']\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "config")
    assert changed_files(git_repo, "--changed-since", "HEAD~1")[1] == {
        "train_a.py",
        "train_b.py",
        "launched.py",
        "inline.py",
        "other.py",
    }


@needs_git
@pytest.mark.parametrize(
    ("ref", "message"),
    [("no-such-branch", "unknown git ref 'no-such-branch'"), ("--output=x", "invalid git ref"), ("", "invalid git ref")],
)
def test_a_bad_ref_is_a_usage_error(git_repo: Path, ref: str, message: str) -> None:
    result = run_script("check", f"--changed-since={ref}", ".", cwd=git_repo, env=GIT_ENV)
    assert result.returncode == 2 and message in result.stderr
    assert not (git_repo / "x").exists()


def test_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(ZERO3)
    result = run_script(
        "check", "--changed-since", "HEAD", ".", cwd=tmp_path, env={**GIT_ENV, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}
    )
    assert result.returncode == 2 and "not in a git repository" in result.stderr


def test_what_needs_a_human_points_into_a_notebook_cell() -> None:
    finding = Finding("train.ipynb", Violation("DPL007", "message", 0, 1), Context(), 2, 15, 2, 20, cell=3)
    summary = summarize(RunResult([FileResult("train.ipynb", findings=[finding])], checked=1), RunOptions(fix=True), NAMES)
    assert [w.places for w in summary.needs_human] == [["train.ipynb:cell 3:2:15"]]


def test_add_noqa_never_edits_a_noqa_inside_a_string(tmp_path: Path) -> None:
    """`"# noqa: E501"` in a string literal is the program's text, not a comment to merge into."""
    source = decode_source(tmp_path / "x.py", b'x = f("# noqa: E501")\ny = f("# noqa")\n')
    text, added = add_noqa(source, [("DPL001", 0), ("DPL002", 22)])
    assert (text, added) == ('x = f("# noqa: E501")  # noqa: DPL001\ny = f("# noqa")  # noqa: DPL002\n', 2)
