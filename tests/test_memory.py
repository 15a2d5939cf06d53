"""A checked file's objects go when its check lets go of them, by reference counting alone. A
reference cycle among them (an analysis and the loads it lists, each pointing back at it) keeps the
whole tree alive until the cycle collector walks it: the run's memory grows with every file, and the
collection after each file (process.collect_after_check) costs milliseconds instead of microseconds."""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path

import pytest

from helpers import checker

FIXTURES = Path(__file__).parent / "fixtures"
SCRIPTS = sorted(path for path in FIXTURES.glob("DPL*/*.py") if not path.name.endswith(".fixed.py"))


def _left_in_cycles(check) -> Counter[str]:  # type: ignore[no-untyped-def]
    """The tool's objects and tree nodes that only the cycle collector would free after `check()`."""
    gc.disable()
    gc.freeze()  # what lived before is not looked at: the collection below walks only what check() made
    try:
        check()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
    finally:
        gc.set_debug(0)
        gc.unfreeze()
        gc.enable()
    left = Counter(
        type(item).__qualname__
        for item in gc.garbage
        if type(item).__module__ in ("ast", "_ast") or type(item).__module__.startswith("placement_lint")
    )
    gc.garbage.clear()
    return left


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_checking_a_file_leaves_no_reference_cycles(script: Path) -> None:
    files = checker(script.parent)
    files.check(script)  # the first check builds what lives for the run (compiled patterns, class tables)
    assert _left_in_cycles(lambda: files.check(script)) == Counter()


def test_the_cycle_finder_sees_a_cycle() -> None:
    def make_cycle() -> None:
        import ast

        node = ast.Name("x")
        node.loop = node  # type: ignore[attr-defined]

    assert _left_in_cycles(make_cycle) == Counter({"Name": 1})


def test_no_collection_while_a_launch_context_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build keeps every tree it parses until it is done: a collection then walks them all to free
    nothing. Collections are paused for it, and as they were afterwards."""
    from placement_lint.context import repo
    from placement_lint.engine import run
    from placement_lint.results import RunOptions
    from placement_lint.settings import Settings

    from helpers import CODES

    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "train.py").write_text("from transformers import Trainer\nTrainer(model=m).train()\n")
    collecting: list[bool] = []
    real_build = repo.build_repo_context

    def build(*args, **kwargs):  # type: ignore[no-untyped-def]
        collecting.append(gc.isenabled())
        return real_build(*args, **kwargs)

    monkeypatch.setattr(repo, "build_repo_context", build)
    assert gc.isenabled()
    run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(jobs=1), tmp_path)
    assert collecting == [False]
    assert gc.isenabled()


def test_files_checked_in_this_process_leave_the_launch_context_to_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What lives when the checks start (the launch contexts, their module trees) lives for the run:
    frozen, the collection after each file checked here does not walk it (the first such collection
    walked diffusers' whole context, a second of a one-file run); thawed again once the checks end,
    for a program calling the API."""
    from placement_lint import checker as checker_module
    from placement_lint.engine import run
    from placement_lint.results import RunOptions
    from placement_lint.settings import Settings

    from helpers import CODES

    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "train.py").write_text(
        'from transformers import AutoModel, Trainer\nTrainer(model=AutoModel.from_pretrained("m", device_map="auto")).train()\n'
    )
    frozen: list[int] = []
    monkeypatch.setattr(checker_module, "collect_after_check", lambda: frozen.append(gc.get_freeze_count()))
    result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(jobs=1), tmp_path)
    assert result.findings and len(frozen) == 1 and frozen[0] > 0
    assert gc.get_freeze_count() == 0
