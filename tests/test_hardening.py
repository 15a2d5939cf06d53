"""Hostile input, interrupted fixes, and code that must never run."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import time
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_lint.fixes.apply import apply_edits

from helpers import SCRIPT, lint_file, run_script

BAD = 'import torch.distributed as dist\ndist.init_process_group("nccl")\nmodel = X.from_pretrained("m", device_map="auto")\nTrainer(model=model)\n'
CANDIDATE = b"device_map = init_process_group()\n"  # enough code to pass the pre-check (a comment is not)


def test_hostile_tree(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(BAD)
    (tmp_path / "syntax.py").write_bytes(CANDIDATE + b"def (:\n")
    (tmp_path / "nul.py").write_bytes(CANDIDATE + b"x = 1\x00\n")
    (tmp_path / "latin.py").write_bytes(CANDIDATE + b"x = '\xe9\xe8'\n")
    (tmp_path / "cookie.py").write_bytes(b"# -*- coding: klingon -*-\n" + CANDIDATE)
    (tmp_path / "bom_crlf.py").write_bytes(b"\xef\xbb\xbf" + BAD.replace("\n", "\r\n").encode())
    (tmp_path / "formfeed.py").write_bytes(CANDIDATE + b"\x0cx = 1\n")
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "generated.py").write_bytes(CANDIDATE + b"x = 1\n" * 800_000)  # about 5 MB: skipped, with a warning
    (tmp_path / "one_line.py").write_bytes(CANDIDATE + b"x = [" + b"1, " * 3_000_000 + b"]\n")  # about 10 MB
    (tmp_path / "dir.py").mkdir()
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "again").symlink_to(tmp_path / "loop")
    (tmp_path / "linked.py").symlink_to(tmp_path / "good.py")
    (tmp_path / "ünïcödé_名前.py").write_text(BAD)
    os.mkfifo(tmp_path / "pipe.py")
    started = time.monotonic()
    result = run_script("check", "--output-format", "concise", "--no-cache", ".", cwd=tmp_path, timeout=120)
    assert time.monotonic() - started < 60
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    for name, reason in [
        ("syntax.py", "cannot parse"),
        ("nul.py", "cannot parse"),
        ("latin.py", "cannot decode"),
        ("cookie.py", "cannot decode"),
    ]:
        assert f"{name}: {reason}" in result.stderr, name
    findings = [line.split(":")[0] for line in result.stdout.splitlines() if ": DPL" in line]
    assert sorted(findings) == ["bom_crlf.py", "good.py", "ünïcödé_名前.py"], "each real file once, hostile ones named, none lost"
    assert "generated.py: skipped, larger than 4 MiB" in result.stderr and "one_line.py: skipped" in result.stderr


def test_internal_error_in_a_rule_costs_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placement_lint.rules.dpl001_spread_device_map import SpreadDeviceMapInDistributed

    def broken(self, file):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(SpreadDeviceMapInDistributed, "check", broken)
    (tmp_path / "a.py").write_text(BAD)
    result = lint_file(tmp_path / "a.py")
    assert result.error is not None and "internal error in DPL001: RuntimeError: boom" in result.error


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_migration_leaves_every_file_untouched_or_fixed(tmp_path: Path, stop: signal.Signals) -> None:
    fixed_text = BAD.replace('device_map="auto"', "device_map=None")
    for index in range(2500):
        (tmp_path / f"train_{index:04d}.py").write_text(BAD)
    process = subprocess.Popen(
        [str(SCRIPT), "check", "--fix", "--no-cache", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A suite started in the background inherits SIGINT ignored, and Python then keeps it ignored:
        # the run starts with the default handling, as one started from a terminal does.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # Which files are fixed first depends on how the walk's listing is shared among the workers: watch
    # files spread over the whole listing, so the signal follows the first fixes, wherever they land.
    watched = [tmp_path / name for name in os.listdir(tmp_path)[::25]]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.read_text() == fixed_text for p in watched):
        time.sleep(0.02)
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted:" in stderr and "Traceback" not in stderr
    states = [p.read_text() for p in tmp_path.glob("train_*.py")]
    assert set(states) <= {BAD, fixed_text}, "a file was left half-written"
    assert BAD in states and fixed_text in states, "the interrupt landed mid-run"
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith("train_")], "a temp file was left behind"


def test_linted_code_and_configs_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(f"open({str(marker)!r}, 'w').close()\nimport deepspeed\n" + BAD)
    (tmp_path / "run.sh").write_text(f"touch {marker}\ntorchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "cfg.yaml").write_text(f"distributed_type: !!python/object/apply:os.system ['touch {marker}']\n")
    (tmp_path / "launch.sh").write_text("accelerate launch --config_file cfg.yaml train.py\n")
    # The package layout is read from setup.py's literals, never by running it.
    (tmp_path / "setup.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom setuptools import setup\nsetup(package_dir={{'': 'src'}})\n"
    )
    result = run_script("check", "--fix", ".", cwd=tmp_path)
    assert result.returncode in (0, 1) and not marker.exists()
    assert "cfg.yaml: cannot parse config" in result.stderr


def test_launchers_over_the_size_cap_are_skipped(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(BAD.replace('import torch.distributed as dist\ndist.init_process_group("nccl")\n', ""))
    (tmp_path / "huge.sh").write_bytes(b"torchrun --nproc_per_node 2 train.py\n" + b"# padding\n" * 200_000)
    result = run_script("check", ".", cwd=tmp_path)
    assert result.returncode == 0 and "huge.sh: skipped" in result.stderr


FIXTURES = sorted(p for p in (Path(__file__).parent / "fixtures").glob("DPL*/bad_*.py") if not p.name.endswith(".fixed.py"))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fixture=st.sampled_from(FIXTURES),
    newline=st.sampled_from(["\n", "\r\n"]),
    comments=st.lists(st.sampled_from(["  # é", "\t# x", "  # noqa: E501", ""]), min_size=1, max_size=40),
)
def test_fix_changes_only_reported_spans(tmp_path: Path, fixture: Path, newline: str, comments: list[str]) -> None:
    """Perturbed fixtures (line endings, trailing comments): --fix output parses, a second --fix changes
    nothing, and every character outside the reported spans stays."""
    lines = fixture.read_text().splitlines()
    perturbed = (
        newline.join(
            line + (comments[i % len(comments)] if line.strip() and not line.rstrip().endswith(("\\", ",", "(")) else "")
            for i, line in enumerate(lines)
        )
        + newline
    )
    work = tmp_path / fixture.parent.name
    work.mkdir(exist_ok=True)
    for sibling in fixture.parent.glob("*.json"):
        (work / sibling.name).write_bytes(sibling.read_bytes())
    target = work / fixture.name
    target.write_bytes(perturbed.encode())
    try:
        ast.parse(perturbed)
    except SyntaxError:
        return  # a comment placement that breaks the program is not a test of the fixer
    reported = lint_file(target)
    edits = [e for f in reported.findings if f.violation.fix for e in f.violation.fix.edits]
    fixed = lint_file(target, fix=True, unsafe_fixes=True)
    assert fixed.error is None
    after = target.read_bytes().decode()
    ast.parse(after)
    # The fixed file is exactly the original with the reported edits applied: nothing else moved.
    assert after == apply_edits(perturbed, edits)
    again = lint_file(target, fix=True, unsafe_fixes=True)
    assert not again.fixed and target.read_bytes().decode() == after


FUZZ_EXAMPLES = int(os.environ.get("PLACEMENT_LINT_FUZZ_EXAMPLES", "25"))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(program=hypothesmith.from_grammar())
def test_fix_on_generated_programs(tmp_path_factory: pytest.TempPathFactory, program: str) -> None:
    """Generated Python (hypothesmith) around a fixable load: the fixed file parses, equals the
    original with exactly the reported edits applied, and a second --fix changes nothing.
    A longer run: PLACEMENT_LINT_FUZZ_EXAMPLES=2000 pytest tests/test_hardening.py -k generated"""
    try:
        ast.parse(program)
    except (SyntaxError, ValueError, RecursionError):
        return
    source = program + ("\n" if program and not program.endswith(("\n", "\r")) else "") + BAD
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return  # e.g. a trailing backslash-continued line
    target = tmp_path_factory.mktemp("fuzz") / "train.py"
    target.write_bytes(source.encode("utf-8"))
    reported = lint_file(target)
    if reported.error:
        return  # what CPython accepts but the file's own text cannot round-trip (rare encodings)
    edits = [e for f in reported.findings if f.violation.fix for e in f.violation.fix.edits]
    fixed = lint_file(target, fix=True, unsafe_fixes=True)
    after = target.read_bytes().decode("utf-8")
    if fixed.warnings:
        assert after == source  # a reverted fix leaves the file as it was
        return
    ast.parse(after)
    assert after == apply_edits(source, edits)
    again = lint_file(target, fix=True, unsafe_fixes=True)
    assert not again.fixed and target.read_bytes().decode("utf-8") == after


def test_a_file_that_vanishes_after_discovery_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placement_lint import engine
    from placement_lint.discover import Discovered
    from placement_lint.settings import Settings

    from helpers import CODES

    (tmp_path / "real.py").write_text(BAD)
    gone = tmp_path / "gone.py"
    monkeypatch.setattr(
        engine, "discover", lambda *_, **__: Discovered([str(gone), str(tmp_path / "real.py")], walked=(tmp_path,))
    )
    result = engine.run([tmp_path], Settings(root=tmp_path, codes=CODES), engine.RunOptions(), tmp_path)
    [vanished] = [f for f in result.files if f.error]
    assert vanished.display == "gone.py" and "cannot read" in vanished.error
    assert [f.code for f in result.findings] == ["DPL001"]


def test_hostile_launch_sources(tmp_path: Path) -> None:
    """Every kind of file a launch can be written in, broken: none crashes the run or hides the one
    real launch, and the ones it cannot read are named."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(BAD.replace('import torch.distributed as dist\ndist.init_process_group("nccl")\n', ""))
    (tmp_path / "README.md").write_text("```bash\ntorchrun --nproc_per_node 2 train.py\n```\n")
    (tmp_path / "HUGE.md").write_bytes(b"```bash\ntorchrun --nproc_per_node 2 other.py\n" + b"x\n" * 700_000)
    (tmp_path / "binary.md").write_bytes(b"```bash\ntorchrun x.py\n```\n\x00\x01\x02" * 100)
    (tmp_path / "open_fence.md").write_text("```python\n" + "torchrun \\\n" * 20_000)
    (tmp_path / "docs.mdx").write_text("<Tabs>\n  ```\n  $ torchrun \\\n" + "<" * 50_000 + "\n")
    (tmp_path / "nested.rst").write_text("".join(f"{' ' * i}Para::\n\n" for i in range(3000)) + "torchrun x.py\n")
    (tmp_path / "directive.rst").write_text(".. code-block::\n" + "   :opt:\n" * 10_000)
    (tmp_path / "template.yml").write_text("run: |\n  torchrun {{ x }}\nbad: [\n" + "  - script: >\n" * 5_000)
    (tmp_path / "deep.yaml").write_text("command: " + "[" * 10_000 + "\n")
    (tmp_path / "unclosed.sh").write_text('ARGS="\n' + "--nproc_per_node 8 \\\n" * 5_000 + "torchrun $ARGS train.py\n")
    (tmp_path / "array.sh").write_text("A=(\n" * 5_000 + "torchrun ${A[@]} train.py\n")
    (tmp_path / "job.ipynb").write_text('{"cells": [{"cell_type": "code", "source": "%%bash\\nA=\\"\\ntorchrun"}]}')
    started = time.monotonic()
    result = run_script("check", "--output-format", "concise", "--no-cache", ".", cwd=tmp_path, timeout=120)
    assert time.monotonic() - started < 60
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "train.py:" in result.stdout and "(launched by README.md:2)" in result.stdout
    assert "HUGE.md: skipped, larger than" in result.stderr
    assert "binary.md: skipped, binary" in result.stderr
    assert "template.yml: YAML does not parse" in result.stderr


_LAUNCH_PIECES = [
    "torchrun ", "accelerate launch ", "deepspeed ", "python ", "train.py", "--nproc_per_node ", "8 ", "$N ",
    "${A[@]} ", "N=", '"', "'", "(", ")", "\\", "\n", "  ", "\t", "$ ", ">>> ", "!", "%%bash\n", "```", "```python\n",
    "~~~", "::\n", ".. code-block:: bash\n", ":linenos:\n", "run: ", "script:\n", "- ", "command: [", "]", "args: ",
    "|\n", ">\n", "{{ x }}", "#", "cd ", "&& ", "; ", "<<EOF\n", "EOF\n", "bash -c '", "export ", "+=", "\x00", "é", "for x in a b; do ", "for y in $Z\n", "do\n", "done", "eval ",
    "f() {", "function g ", "{\n", "}\n", " }", "f ", "g ", '"$@" ', "$1 ",
]  # fmt: skip


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(["shell", "markdown", "rst", "yaml", "make", "docker", "procfile"]),
    pieces=st.lists(st.sampled_from(_LAUNCH_PIECES), max_size=60),
)
def test_launch_readers_never_raise(kind: str, pieces: list[str]) -> None:
    """Any text, in any launch source: commands or nothing, each on a line of the file, never an error."""
    from placement_lint.context.commands import parse_command
    from placement_lint.context.launch_files import commands_in

    text = "".join(pieces)
    problems: list[str] = []
    for command in commands_in(Path("/repo/x"), text, kind, problems):
        assert 1 <= command.line <= text.count("\n") + 2, (command, text)
        parse_command(command.text)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    version=st.sampled_from([2, 3, 4, 5]),
    count=st.integers(min_value=0, max_value=2**32 - 1),
    body=st.binary(max_size=400),
)
def test_a_planted_git_index_never_breaks_the_walk(version: int, count: int, body: bytes) -> None:
    """Any bytes after a valid-looking header: the reader gives paths or None, never an exception."""
    from placement_lint.git_index import _paths

    data = b"DIRC" + version.to_bytes(4, "big") + count.to_bytes(4, "big") + body
    try:
        found = _paths(data, 20)
    except (ValueError, IndexError):
        return
    assert all(isinstance(path, str) and path for path in found)
