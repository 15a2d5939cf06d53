"""Repo-wide launch context: fixture repositories under tests/fixtures/launch/, one per launcher form.

Each case is copied into a temporary folder with a `.git` marker (its repository root) and checked
from there. `expected.txt` holds the concise findings, each with its notes indented under it (regenerate with
PLACEMENT_LINT_UPDATE_GOLDENS=1, then read the diff); `warnings.txt`, where present, lines the run must warn.
`bad_*` cases must produce findings, `good_*` (the single-process look-alikes) none.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from placement_lint.engine import run
from placement_lint.report.text import concise
from placement_lint.results import RunOptions
from placement_lint.settings import Settings

from helpers import CODES, lint_repo, notes_of

CASES = sorted(p for p in (Path(__file__).parent / "fixtures" / "launch").iterdir() if p.is_dir())
UPDATE = os.environ.get("PLACEMENT_LINT_UPDATE_GOLDENS") == "1"


def check_case(case: Path, tmp_path: Path, **options: object):  # type: ignore[no-untyped-def]
    root = tmp_path / case.name
    shutil.copytree(case, root, ignore=shutil.ignore_patterns("expected.txt", "warnings.txt"))
    (root / ".git").mkdir()
    return run([root], Settings(root=root, codes=CODES), RunOptions(**options), root)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_launch_case(case: Path, tmp_path: Path) -> None:
    result = check_case(case, tmp_path)
    assert not result.errors and not any(f.error for f in result.files)
    lines = [
        line
        for finding, headline in zip(result.findings, concise(result, RunOptions()), strict=True)
        for line in (headline, *notes_of(finding).splitlines())
    ]
    golden = case / "expected.txt"
    if UPDATE:
        golden.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    assert lines == golden.read_text(encoding="utf-8").splitlines()
    if case.name.startswith("bad_"):
        assert lines, "a bad case must produce a finding"
    else:
        assert lines == [], "a look-alike must stay clean"
    expected_warnings = case / "warnings.txt"
    for wanted in expected_warnings.read_text().splitlines() if expected_warnings.exists() else []:
        assert any(wanted in warning for warning in result.warnings), (wanted, result.warnings)


def test_a_map_a_ddp_launch_needs_is_kept_behind_the_zero3_check(tmp_path: Path) -> None:
    case = Path(__file__).parent / "fixtures" / "launch" / "bad_zero3_and_ddp_launches"
    result = check_case(case, tmp_path, fix=True)
    assert result.findings == []
    fixed = (tmp_path / case.name / "sft.py").read_text()
    assert (
        "device_map=None if is_deepspeed_zero3_enabled() else get_kbit_device_map() if quantization_config is not None else None,"
        in fixed
    )
    assert "from transformers.integrations import is_deepspeed_zero3_enabled\n" in fixed


def test_launch_reaches_a_loader_through_a_plain_helper_module(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "train.py").write_text(
        "from helpers import build\nfrom transformers import Trainer\nTrainer(model=build()).train()\n"
    )
    (tmp_path / "helpers.py").write_text("from loader import load\n\n\ndef build():\n    return load()\n")
    (tmp_path / "loader.py").write_text('def load():\n    return X.from_pretrained("m", device_map="auto")\n')
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [("loader.py", "DPL001")]


@pytest.mark.parametrize("working", ["elsewhere", "home"])
def test_a_file_named_alone_outside_a_repository_reads_only_the_launchers_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, working: str
) -> None:
    """No .git and no pyproject.toml, and the file is outside the working folder, or the working folder
    is the home folder: the folder beside the file speaks for it, not every folder below (checking
    ~/train.py must not read the whole home folder)."""
    from placement_lint import discover

    project = tmp_path / "project"
    nested = project / "old" / "experiments"
    nested.mkdir(parents=True)
    (project / "train.py").write_text(
        'from transformers import AutoModelForCausalLM, Trainer\nm = AutoModelForCausalLM.from_pretrained("x", device_map="auto")\n'
        "Trainer(model=m).train()\n"
    )
    (project / "z3.yaml").write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n")
    (nested / "run.sh").write_text("accelerate launch --config_file ../../z3.yaml ../../train.py\n")
    cwd = tmp_path / "elsewhere"
    if working == "home":
        cwd = project
        monkeypatch.setenv("HOME", str(project))
    cwd.mkdir(exist_ok=True)
    discover._shared_folders.cache_clear()
    try:
        settings = Settings(root=project, codes=CODES)
        assert run([project / "train.py"], settings, RunOptions(), cwd).findings == []
        (project / "run.sh").write_text("accelerate launch --config_file z3.yaml train.py\n")
        assert "DPL001" in {f.code for f in run([project / "train.py"], settings, RunOptions(), cwd).findings}
    finally:
        monkeypatch.undo()
        discover._shared_folders.cache_clear()


def test_outside_a_repository_the_working_folder_stands_for_one(tmp_path: Path) -> None:
    """No marker anywhere (a downloaded archive): from its top, a notebook's launch of a script in a
    folder below is seen whether the run names the script, its folder, the notebook's folder or the
    top, cached or not."""
    from placement_lint.cache import CACHE_DIR_NAME

    top = tmp_path / "archive"
    scripts = top / "training" / "scripts"
    (top / "training" / "configs").mkdir(parents=True)
    scripts.mkdir()
    (scripts / "run_sft.py").write_text(
        "from transformers import AutoModelForCausalLM, HfArgumentParser, Seq2SeqTrainingArguments\n"
        "(args,) = HfArgumentParser(Seq2SeqTrainingArguments).parse_args_into_dataclasses()\n"
        'm = AutoModelForCausalLM.from_pretrained("x", device_map="auto")\n'
    )
    (top / "training" / "configs" / "z3.json").write_text('{"zero_optimization": {"stage": 3}}\n')
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
            "source": "!deepspeed --num_gpus=8 scripts/run_sft.py --deepspeed configs/z3.json"}  # fmt: skip
    (top / "training" / "train.ipynb").write_text(
        json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    settings = Settings(root=top, codes=CODES)
    shown = set()
    for cache in (None, top / CACHE_DIR_NAME, top / CACHE_DIR_NAME):
        for path in (scripts / "run_sft.py", scripts, top / "training", top):
            findings = run([path], settings, RunOptions(), top, cache).findings
            shown.add(tuple((f.display, f.row, f.code) for f in findings))
    assert shown == {(("training/scripts/run_sft.py", 3, "DPL001"),)}


def test_an_importers_use_reaches_a_loader_through_a_helper_module(tmp_path: Path) -> None:
    """train.py only generates with what helpers.build returns, which is what loader.load returns."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "train.py").write_text("from helpers import build\nmodel = build()\nmodel.generate()\n")
    (tmp_path / "helpers.py").write_text("from loader import load\n\n\ndef build():\n    return load()\n")
    (tmp_path / "loader.py").write_text('def load():\n    return X.from_pretrained("m", device_map="auto")\n')
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [("loader.py", "DPL007")]
    assert ("used by", "model.generate at train.py:3") in result.findings[0].violation.notes
    # A second launched script that trains with it makes it DPL001, told where.
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\ntorchrun --nproc_per_node 2 sft.py\n")
    (tmp_path / "sft.py").write_text("import helpers\nfrom trl import SFTTrainer\nSFTTrainer(model=helpers.build()).train()\n")
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [("loader.py", "DPL001")]
    assert ("trained by", "SFTTrainer at sft.py:3") in result.findings[0].violation.notes
    assert result.findings[0].violation.fix is not None
    assert result.findings[0].violation.fix.applicability.value == "unsafe", "other importers may need the map"


def watch_the_child(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What each forked child of the context build sends back (None: it gave no answer), in order."""
    from placement_lint.context import repo
    from placement_lint.process import Aside

    answered: list[object] = []

    class Watched(Aside):
        def result(self) -> object | None:
            answered.append(super().result())
            return answered[-1]

    monkeypatch.setattr(repo, "Aside", Watched)
    return answered


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the returned values are followed aside where processes fork")
def test_returned_values_followed_in_a_second_process_give_the_same_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two processes, a forked child follows the returned values while this one reads parsers and
    calls: the context (consumers, the files read and their order) is the one a single process builds."""
    from placement_lint.context import repo

    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\ntorchrun --nproc_per_node 2 sft.py\n")
    (tmp_path / "train.py").write_text("from helpers import build\nmodel = build()\nmodel.generate()\n")
    (tmp_path / "sft.py").write_text("import helpers\nfrom trl import SFTTrainer\nSFTTrainer(model=helpers.build()).train()\n")
    (tmp_path / "helpers.py").write_text("from loader import load\n\n\ndef build():\n    return load()\n")
    (tmp_path / "loader.py").write_text('def load(for_eval=False):\n    return X.from_pretrained("m", device_map="auto")\n')

    answered = watch_the_child(monkeypatch)
    monkeypatch.setattr(repo, "RETURNS_ASIDE_IMPORTERS", 0)
    settings = Settings(root=tmp_path, codes=CODES)
    alone, shared = (repo.build_repo_context(tmp_path, settings, str, jobs=jobs) for jobs in (1, 2))
    assert len(answered) == 1 and answered[0] is not None, "the second build took the child's answer"
    assert shared.consumers == alone.consumers and shared.consumers
    assert (shared.calls, list(shared.inputs), shared.import_only) == (alone.calls, list(alone.inputs), alone.import_only)
    assert {path: shared.by_file[path] for path in shared.by_file} == dict(alone.by_file)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="launch files are read on both cores where processes fork")
def test_launch_files_read_in_two_processes_give_the_same_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two processes, a forked child reads every other launch file: the launches, the warnings
    (in the files' order) and the files read are those a single process finds."""
    from placement_lint.context import repo

    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    for number in range(9):
        launcher = ("torchrun --nproc_per_node 2", "deepspeed --num_gpus 8", "python")[number % 3]
        (tmp_path / "scripts" / f"run_{number}.sh").write_text(f"{launcher} train_{number % 2}.py --seed {number}\n")
    (tmp_path / "scripts" / "run_7.sh").write_bytes(b"torchrun train_0.py\0\n")  # binary: a warning in its place
    (tmp_path / "scripts" / "run_2.sh").write_text("torchrun --nproc_per_node 2 train_1.py\n" + "#" * 1_100_000)
    # Read by the child: the script it sources is an input of the context all the same.
    (tmp_path / "scripts" / "env.cfg").write_text("LAUNCH='deepspeed --num_gpus 8'\n")
    (tmp_path / "scripts" / "run_5.sh").write_text("source scripts/env.cfg\n$LAUNCH train_1.py --seed 5\n")
    for number in range(2):
        (tmp_path / f"train_{number}.py").write_text('model = X.from_pretrained("m", device_map="auto")\n')
    answered = watch_the_child(monkeypatch)
    monkeypatch.setattr(repo, "SPLIT_READING_FILES", 4)
    settings = Settings(root=tmp_path, codes=CODES)
    alone = repo.build_repo_context(tmp_path, settings, str, jobs=1)
    reader, here = repo._commands, os.getpid()
    read_here: list[str] = []

    def reading(path: Path, *rest: object):  # type: ignore[no-untyped-def]
        if os.getpid() == here:
            read_here.append(path.name)
        return reader(path, *rest)

    monkeypatch.setattr(repo, "_commands", reading)
    shared = repo.build_repo_context(tmp_path, settings, str, jobs=2)
    assert len(answered) == 1 and answered[0] is not None, "the second build took the child's reading"
    assert sorted(read_here) == [f"run_{number}.sh" for number in range(0, 9, 2)], "each file read by one process"
    assert len(alone.warnings) == 2 and shared.warnings == alone.warnings
    assert dict(shared.by_file) == dict(alone.by_file) and len(alone.by_file) == 2
    assert sorted(shared.inputs) == sorted(alone.inputs) and tmp_path / "scripts" / "env.cfg" in alone.inputs


def _many_launches(root: Path) -> None:
    """A repository whose launches read configs (one broken), a script's own `--deepspeed` default and
    a project's markers, one run on a single process, into scripts that import a chain of modules."""
    (root / ".git").mkdir()
    (root / "ds_z3.json").write_text('{"zero_optimization": {"stage": 3}}')
    (root / "broken.json").write_text("{not json")
    (root / "sub").mkdir()
    (root / "sub" / "pyproject.toml").write_text('[project]\nname = "sub"\n')
    (root / "sub" / "train_sub.py").write_text("from loader import load\nmodel = load()\n")
    (root / "train.py").write_text(
        "import argparse\nfrom helpers import build\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--deepspeed', default='ds_z3.json')\nargs = parser.parse_args()\nmodel = build()\n"
    )
    (root / "sft.py").write_text("import helpers\nfrom trl import SFTTrainer\nSFTTrainer(model=helpers.build()).train()\n")
    (root / "helpers.py").write_text("from loader import load\n\n\ndef build():\n    return load()\n")
    (root / "loader.py").write_text('def load():\n    return X.from_pretrained("m", device_map="auto")\n')
    (root / "unrelated.py").write_text("import helpers\n")
    # Read whole for its own default (it imports nothing of the repository, so only its import lines would count).
    (root / "solo.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--deepspeed', default='ds_z3.json')\n"
        'model = X.from_pretrained("m", device_map="auto")\n'
    )
    # A config found from the folder the launch runs in, whose project's marker only the setup reads.
    (root / "proj2").mkdir()
    (root / "proj2" / "pyproject.toml").write_text('[project]\nname = "p"\n')
    (root / "proj2" / "train2.py").write_text('model = X.from_pretrained("m", device_map="auto")\n')
    (root / "cfg").mkdir()
    (root / "cfg" / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    lines = [
        "deepspeed --num_gpus 8 solo.py",
        "cd proj2 && deepspeed train2.py --deepspeed ../cfg/ds.json",
        "deepspeed --num_gpus 8 train.py",
        "torchrun --nproc_per_node 2 sft.py --deepspeed broken.json",
        "python sft.py",
        "accelerate launch sub/train_sub.py",
        "torchrun --nproc_per_node 4 train.py --deepspeed ds_z3.json",
    ]
    (root / "run.sh").write_text("".join(f"{lines[n % len(lines)]} --seed {n}\n" for n in range(14)))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the setups are worked out aside where processes fork")
def test_launch_setups_worked_out_in_a_second_process_give_the_same_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two processes, a forked child works out the launches' setups while this one summarizes the
    modules they may import: the context (evidence, warnings, inputs, what is read whole) is the one a
    single process builds, and no setup is worked out twice."""
    from placement_lint.context import repo

    _many_launches(tmp_path)
    answered = watch_the_child(monkeypatch)
    monkeypatch.setattr(repo, "SETUPS_ASIDE_LAUNCHES", 0)
    settings = Settings(root=tmp_path, codes=CODES)
    alone = repo.build_repo_context(tmp_path, settings, str, jobs=1)
    assert not answered
    resolve, here = repo.resolve_setup, os.getpid()
    resolved_here: list[str] = []

    def resolving(*args, **kwargs):  # type: ignore[no-untyped-def]
        if os.getpid() == here:
            resolved_here.append(args[0].text)
        return resolve(*args, **kwargs)

    monkeypatch.setattr(repo, "resolve_setup", resolving)
    shared = repo.build_repo_context(tmp_path, settings, str, jobs=2, facets=True)
    assert answered and answered[0] is not None, "the second build took the child's setups"
    assert not resolved_here, "every setup was worked out by the child"
    assert dict(shared.by_file) == dict(alone.by_file) and len(alone.by_file) == 7
    assert shared.used == alone.used and shared.consumers == alone.consumers and shared.calls == alone.calls
    assert shared.warnings == alone.warnings and any("broken.json" in warning for warning in alone.warnings)
    assert sorted(shared.inputs) == sorted(alone.inputs) and tmp_path / "proj2" / "pyproject.toml" in alone.inputs
    assert shared.import_only == alone.import_only and tmp_path / "solo.py" not in alone.import_only


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the setups are worked out aside where processes fork")
def test_launch_setups_a_child_could_not_work_out_are_worked_out_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placement_lint.context import repo

    _many_launches(tmp_path)
    settings = Settings(root=tmp_path, codes=CODES)
    alone = repo.build_repo_context(tmp_path, settings, str, jobs=1)
    answered = watch_the_child(monkeypatch)
    monkeypatch.setattr(repo, "SETUPS_ASIDE_LAUNCHES", 0)
    evidence, here = repo._SetUps.evidence, os.getpid()

    def failing(self, found):  # type: ignore[no-untyped-def]
        if os.getpid() != here:
            raise OSError("a reader failed in the child")
        return evidence(self, found)

    monkeypatch.setattr(repo._SetUps, "evidence", failing)
    shared = repo.build_repo_context(tmp_path, settings, str, jobs=2)
    assert answered == [None]
    assert dict(shared.by_file) == dict(alone.by_file) and shared.warnings == alone.warnings


def test_the_modules_launches_may_reach_are_summarized_ahead_until_enough(tmp_path: Path) -> None:
    """What the propagation asks of the graph, asked ahead (while a child works out the setups): the
    modules a launched script's imports reach, not those nothing it runs imports, and nothing more
    once the child is done."""
    from placement_lint.context.module_graph import ModuleGraph
    from placement_lint.context.propagation import summarize_ahead

    _many_launches(tmp_path)
    graph = ModuleGraph(tmp_path.resolve(), anchors=(b"from_pretrained",))
    summarize_ahead(graph, [(tmp_path.resolve() / "sft.py", "__main__")], lambda: False)
    assert {path.name for path, *_ in graph.summarized()} == {"sft.py", "helpers.py"}  # loader.py imports nothing
    other = ModuleGraph(tmp_path.resolve(), anchors=(b"from_pretrained",))
    summarize_ahead(other, [(tmp_path.resolve() / "sft.py", "__main__")], lambda: True)
    assert not list(other.summarized())


def test_a_trainer_subclass_from_another_module_counts_with_in_file_evidence(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "custom.py").write_text("from trl.experimental.xpo import XPOTrainer\n\n\nclass MyXPO(XPOTrainer):\n    pass\n")
    (tmp_path / "train.py").write_text(
        "from trl.experimental.xpo import XPOConfig\nfrom custom import MyXPO\n"
        'MyXPO(model="Qwen/Qwen2.5-0.5B", args=XPOConfig("out", deepspeed="ds.json")).train()\n'
    )
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [("train.py", "DPL004")]
    assert "MyXPO (a XPOTrainer)" in result.findings[0].message


@pytest.mark.parametrize(
    "name", ["train.dockerfile", "RUN.SH", "jobs/train.SBATCH", "Makefile", "ci.yml", "src/notes.md", "site/guide.mdx", "api.RST"]
)
def test_every_launcher_the_walk_keeps_is_one_an_extractor_reads(name: str) -> None:
    """The walk's name check and the extractor's choice agree (they once disagreed on case and .dockerfile)."""
    from placement_lint.context.launch_files import launcher_kind
    from placement_lint.context.launcher_names import launcher_name

    path = Path(name)
    assert launcher_name(path.name) and launcher_kind(path, b"") is not None


def test_a_bare_accelerate_launch_takes_the_nearest_shipped_config(tmp_path: Path) -> None:
    """The config beside the script decides over one farther up; a far one counts when nothing is nearer."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "fsdp.yaml").write_text("distributed_type: FSDP\nnum_processes: 8\n")
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "zero3.yaml").write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n")
    (tmp_path / "sft" / "train.py").write_text('X.from_pretrained("m", device_map={"": 0})\n')
    (tmp_path / "dpo").mkdir()
    (tmp_path / "dpo" / "train.py").write_text('X.from_pretrained("m", device_map={"": 0})\n')
    (tmp_path / "run.sh").write_text("accelerate launch sft/train.py\naccelerate launch dpo/train.py\n")
    result = lint_repo(tmp_path)
    messages = {(f.display, f.code): f.message + notes_of(f) for f in result.findings}
    assert "the repository ships sft/zero3.yaml (distributed_type DEEPSPEED, zero_stage 3)" in messages["sft/train.py", "DPL003"]
    assert (
        "the repository ships configs/fsdp.yaml (distributed_type FSDP, fsdp_cpu_ram_efficient_loading true"
        in messages["dpo/train.py", "DPL003"]
    )


@pytest.mark.parametrize(
    ("command", "several"),
    [
        ("accelerate launch train.py", True),  # accelerate's default: one process per GPU
        ("python -m accelerate.commands.launch train.py", True),
        ("accelerate launch --num_processes 1 train.py", False),
        ("accelerate launch --cpu train.py", False),
        ("torchrun --nproc_per_node auto train.py", True),
        ("python -m torch.distributed.run --nproc-per-node=gpu train.py", True),
        ("python -m torch.distributed.launch --nproc_per_node 2 --use_env train.py", True),
        ("deepspeed train.py", True),  # every GPU without --num_gpus
        # deepspeed/launcher/runner.py: CUDA_VISIBLE_DEVICES becomes `--include localhost:<devices>`
        # when nothing names resources, and is dropped when something does.
        ("CUDA_VISIBLE_DEVICES=0 deepspeed train.py", False),
        ("CUDA_VISIBLE_DEVICES=0,1 deepspeed train.py", True),
        ("CUDA_VISIBLE_DEVICES=0 deepspeed --num_gpus 2 train.py", True),
        ("CUDA_VISIBLE_DEVICES=0,1 deepspeed --include localhost:1 train.py", False),
        ("deepspeed --include localhost:1 train.py", False),
        ("deepspeed -i localhost:1 train.py", False),
        ("deepspeed --num_gpus 1 train.py", False),
        ("deepspeed --num_accelerators=1 train.py", False),
        ("CUDA_VISIBLE_DEVICES=0,1 python train.py", False),
    ],
)
def test_launchers_own_defaults(tmp_path: Path, command: str, several: bool) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text(command + "\n")
    (tmp_path / "train.py").write_text(
        'from transformers import AutoModelForCausalLM, Trainer\nTrainer(model=AutoModelForCausalLM.from_pretrained("m", device_map="auto")).train()\n'
    )
    result = lint_repo(tmp_path)
    assert [f.code for f in result.findings] == (["DPL001"] if several else [])


@pytest.mark.parametrize(
    ("pinned", "load_error"),
    [("accelerate==0.34.2", False), ("accelerate>=1.0", True), ("", True)],
)
def test_zero3_init_flag_off_on_the_command_line_follows_the_pinned_accelerate(
    tmp_path: Path, pinned: str, load_error: bool
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text(pinned + "\n")
    (tmp_path / "run.sh").write_text("accelerate launch --use_deepspeed --zero_stage 3 --zero3_init_flag false train.py\n")
    (tmp_path / "train.py").write_text(
        "from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments\n"
        "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
        'Trainer(model=AutoModelForCausalLM.from_pretrained("m", device_map="auto"), args=args).train()\n'
    )
    result = lint_repo(tmp_path)
    (finding,) = result.findings
    assert finding.code == "DPL001"
    said = notes_of(finding)
    assert ("transformers raises" in said) is load_error
    assert ("the load does not fail" in said) is (pinned != "accelerate>=1.0")


def test_a_parser_the_tool_cannot_follow_leaves_the_branch_as_unknown(tmp_path: Path) -> None:
    """Options named at run time and `**vars(args)`: the launch's `--use_4bit` binds to nothing the
    tool can read, so the branch stays undecided, as without a launch; nothing crashes."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("deepspeed train.py --use_4bit --deepspeed ds.json\n")
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    (tmp_path / "train.py").write_text(
        "import argparse\nfrom transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        "parser = argparse.ArgumentParser()\n"
        "for name in ('use_4bit', 'use_lora'):\n    parser.add_argument(f'--{name}', action='store_true')\n"
        "parser.add_argument('--deepspeed')\nargs = Namespace(**vars(parser.parse_args()))\n"
        "device_map = None\nif args.use_4bit:\n    device_map = 'auto'\n"
        "model = AutoModelForCausalLM.from_pretrained('m', device_map=device_map)\n"
        "Trainer(model=model, args=TrainingArguments('o', deepspeed=args.deepspeed)).train()\n"
    )
    result = lint_repo(tmp_path)
    assert not result.errors and not any(f.error for f in result.files)
    assert result.findings == []
    (tmp_path / "train.py").write_text((tmp_path / "train.py").read_text().replace("f'--{name}'", "'--use_4bit'"))
    result = lint_repo(tmp_path)
    assert [(f.code, f.row) for f in result.findings] == [("DPL001", 10)]  # the same code, followed: the flag decides


def test_a_launch_reaches_every_module_of_a_long_chain(tmp_path: Path) -> None:
    """A launch once stopped after the 64 modules nearest its script (and warned): it now reaches its
    whole import closure, the last module of a chain longer than that too."""
    from placement_lint.context.propagation import NEAREST_MODULES

    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    count = NEAREST_MODULES + 20
    (tmp_path / "train.py").write_text("from transformers import Trainer\nfrom m0 import load\nTrainer(model=load()).train()\n")
    for i in range(count):
        nxt = f"from m{i + 1} import load as _next\n" if i + 1 < count else "_next = print\n"
        (tmp_path / f"m{i}.py").write_text(
            nxt + 'def load():\n    _next()\n    return X.from_pretrained("m", device_map="auto")\n'
        )
    result = lint_repo(tmp_path)
    assert {f.display for f in result.findings} == {f"m{i}.py" for i in range(count)}
    assert not any("modules" in w for w in result.warnings)


def _package_launched_many_times(root: Path, launches: int, modules: int) -> None:
    """`launches` scripts, each launched, each importing one package of `modules` modules (a registry
    of them), whose loader is three imports down: diffusers' examples and src/diffusers, in small."""
    (root / ".git").mkdir()
    (root / "pkg" / "models").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "models" / "__init__.py").write_text("")
    (root / "pkg" / "layers.py").write_text("class Block:\n    pass\n")
    for i in range(modules):
        (root / "pkg" / "models" / f"arch{i}.py").write_text(
            f"from pkg.layers import Block\nclass Arch{i}(Block):\n    @classmethod\n    def from_pretrained(cls, path):\n        return cls()\n"
        )
    (root / "pkg" / "registry.py").write_text(
        "".join(f"from pkg.models.arch{i} import Arch{i}\n" for i in range(modules))
        + "MODELS = {"
        + ", ".join(f'"{i}": Arch{i}' for i in range(modules))
        + "}\n"
        + "def build(name):\n    return MODELS[name].from_pretrained(name)\n"
    )
    (root / "pkg" / "pipeline.py").write_text("from pkg.stages import stage\ndef prepare(name):\n    return stage(name)\n")
    (root / "pkg" / "stages.py").write_text("from pkg.loader import load\ndef stage(name):\n    return load(name)\n")
    (root / "pkg" / "loader.py").write_text(
        "from transformers import AutoModelForCausalLM\n"
        'def load(name):\n    return AutoModelForCausalLM.from_pretrained(name, device_map="auto")\n'
    )
    commands = []
    for i in range(launches):
        (root / f"train{i}.py").write_text(
            "import sys\nfrom transformers import Trainer\nfrom pkg.registry import build\nfrom pkg.pipeline import prepare\n"
            'model = build(sys.argv[1]) if len(sys.argv) > 1 else prepare("m")\nTrainer(model=model).train()\n'
        )
        launcher = "torchrun --nproc_per_node 2" if i % 2 else "accelerate launch --multi_gpu --num_processes 2"
        commands.append(f"{launcher} train{i}.py\n")
    (root / "run.sh").write_text("".join(commands))


def test_launches_that_reach_a_whole_package_are_walked_together_as_each_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Launches past the nearest modules are walked together: each module a launch reaches gets its
    evidence once, with a chain of importers as short as walking that launch alone finds, and each
    module is used for, and passed to by, what walking them one by one finds."""
    import placement_lint.context.propagation as propagation
    from placement_lint.context.repo import build_repo_context

    _package_launched_many_times(tmp_path, launches=6, modules=propagation.NEAREST_MODULES + 10)
    settings = Settings(root=tmp_path, codes=CODES)
    together = build_repo_context(tmp_path, settings, lambda p: p.relative_to(tmp_path).as_posix())
    monkeypatch.setattr(propagation, "NEAREST_MODULES", 10**6)
    alone = build_repo_context(tmp_path, settings, lambda p: p.relative_to(tmp_path).as_posix())

    def reached(context):  # type: ignore[no-untyped-def]
        return {
            path: sorted((e.kind, e.path, e.line, e.origin, e.chain[0], e.chain[-1], len(e.chain)) for e in items)
            for path, items in context.by_file.items()
        }

    assert reached(together) == reached(alone)
    assert len(together.by_file[tmp_path / "pkg" / "loader.py"]) == 6
    assert dict(together.used) == dict(alone.used)
    assert together.consumers == alone.consumers and together.calls == alone.calls


def test_a_module_many_launches_reach_is_followed_once_for_all_of_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a module imports for a name is looked up once for all the launches past the nearest
    modules, not once a launch: 12 launches of a 90-module package cost about one walk of it."""
    from placement_lint.context import module_graph
    from placement_lint.context.propagation import NEAREST_MODULES

    modules = NEAREST_MODULES + 26
    _package_launched_many_times(tmp_path, launches=12, modules=modules)
    asked: list[tuple[Path, frozenset[str]]] = []
    imports = module_graph.ModuleSummary.imports

    def counted(self, wanted):  # type: ignore[no-untyped-def]
        asked.append((self.path, wanted))
        return imports(self, wanted)

    monkeypatch.setattr(module_graph.ModuleSummary, "imports", counted)
    result = lint_repo(tmp_path)
    assert {f.display for f in result.findings} == {"pkg/loader.py"}
    past_the_nearest = [path for path, _ in asked if path.name.startswith("arch")]
    # Each launch walks alone only as far as its nearest modules, which end before the architectures.
    assert len(past_the_nearest) <= modules


def test_a_package_that_imports_a_launched_script_back_does_not_give_it_its_own_launch(tmp_path: Path) -> None:
    """A launch does not import its own script, however far its walk goes: the script's evidence is
    its launch, not an import of it through the package."""
    from placement_lint.context.repo import build_repo_context

    _package_launched_many_times(tmp_path, launches=2, modules=80)
    (tmp_path / "pkg" / "stages.py").write_text(
        "from pkg.loader import load\nfrom train0 import model\ndef stage(name):\n    return load(name), model\n"
    )
    context = build_repo_context(tmp_path, Settings(root=tmp_path, codes=CODES), lambda p: p.relative_to(tmp_path).as_posix())
    script = context.by_file[tmp_path / "train0.py"]
    assert [e.origin for e in script] == ["launch", "import"]  # its launch, and train1's through the package
    assert script[1].chain[-1] == "train1.py"


def test_an_unsafe_fix_in_one_arm_leaves_the_other_arm_judged(tmp_path: Path) -> None:
    # Both loads read one "cuda" name, each judged at its own load; the fix that writes PartialState()
    # into the quantized arm's load does not run before the plain arm's load, so that one is fixed too.
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("accelerate launch --multi_gpu --num_processes 2 tune.py\n")
    (tmp_path / "tune.py").write_text(
        "import sys\n"
        "from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer, TrainingArguments\n"
        "\n"
        'placement = "cuda"\n'
        'if "--four-bit" in sys.argv:\n'
        '    model = AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True), device_map=placement)\n'
        "else:\n"
        '    model = AutoModelForCausalLM.from_pretrained("m", device_map=placement)\n'
        'Trainer(model=model, args=TrainingArguments(output_dir="out")).train()\n'
    )
    result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(fix=True, unsafe_fixes=True), tmp_path)
    assert result.findings == []
    fixed = (tmp_path / "tune.py").read_text()
    assert "device_map=placement" not in fixed
    assert fixed.count('device_map={"": PartialState().local_process_index}') == 2
    assert lint_repo(tmp_path).findings == []


def test_a_path_climbing_out_with_dots_is_not_looked_up_from_folders_above(tmp_path: Path) -> None:
    # `../../train.py` was written for one folder; from the script's own folder it names nothing, and
    # trying it from the folders above would pick the top's train.py by accident.
    (tmp_path / ".git").mkdir()
    (tmp_path / "recipes" / "tune" / "notes").mkdir(parents=True)
    (tmp_path / "recipes" / "tune" / "notes" / "run.sh").write_text("torchrun --nproc_per_node 2 ../../train.py\n")
    (tmp_path / "train.py").write_text(
        "from transformers import AutoModelForCausalLM, Trainer\n"
        'Trainer(model=AutoModelForCausalLM.from_pretrained("m", device_map="auto")).train()\n'
    )
    assert lint_repo(tmp_path).findings == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="work is done aside where processes fork")
def test_work_done_aside_comes_back_or_is_none() -> None:
    from placement_lint.process import Aside

    assert Aside(lambda: {"a": (1, 2)}).result() == {"a": (1, 2)}
    assert Aside(lambda: os._exit(3)).result() is None, "a child that dies answers nothing: the caller does the work"
    cancelled = Aside(lambda: __import__("time").sleep(30))
    cancelled.cancel()
    assert cancelled.result() is None


def test_many_launches_of_scripts_sharing_a_module_give_it_each_launch_once(tmp_path: Path) -> None:
    """Every launched script imports lib.loader: it inherits each launch once, in launch order, each
    with its script's parser fields that it reads (gathered, not copied once a launch)."""
    from placement_lint.context import propagation
    from placement_lint.context.repo import build_repo_context

    (tmp_path / ".git").mkdir()
    (tmp_path / "lib").mkdir()
    scripts = 40
    (tmp_path / "run.sh").write_text("".join(f"torchrun --nproc_per_node 2 s{i}.py --lr 1\n" for i in range(scripts)))
    for i in range(scripts):
        (tmp_path / f"s{i}.py").write_text(
            "import argparse\nfrom lib.loader import build\nfrom transformers import Trainer\n"
            f"p = argparse.ArgumentParser()\np.add_argument('--lr')\np.add_argument('--only_s{i}')\n"
            "Trainer(model=build(p.parse_args())).train()\n"
        )
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "loader.py").write_text(
        "from transformers import AutoModel\n\n\ndef build(args):\n    return AutoModel.from_pretrained(args.lr)\n"
    )
    copies: list[int] = []
    real_add = propagation._Inherited.add

    def add(self: propagation._Inherited, module: Path, items: tuple[object, ...]) -> None:
        copies.append(len(items))
        real_add(self, module, items)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(propagation._Inherited, "add", add)
        context = build_repo_context(tmp_path, Settings(root=tmp_path, codes=CODES), lambda p: p.relative_to(tmp_path).as_posix())
    evidence = context.by_file[(tmp_path / "lib" / "loader.py").resolve()]
    assert [e.chain[-1] for e in evidence] == [f"s{i}.py" for i in range(scripts)]
    assert all([row[1] for row in e.parser] == ["lr"] for e in evidence), "each carries the fields the module reads"
    assert copies == [1] * scripts, "each launch handed the module its own item, not the module's whole evidence"


def test_a_map_passed_to_an_imported_helper_names_the_load_in_the_helper_as_a_location(tmp_path: Path) -> None:
    case = Path(__file__).parent / "fixtures" / "launch" / "bad_device_map_passed_to_an_imported_loading_helper"
    result = check_case(case, tmp_path)
    (finding,) = result.findings
    spans = [(span.role, Path(span.path).name, span.row, span.message) for span in finding.violation.related]
    assert ("origin", "ppo.py", 11, "the device_map value") in spans, "the finding is the value at the call"
    assert ("load", "common.py", 6, "loaded here") in spans, "the load is where the helper's module has it"


@pytest.mark.parametrize(
    ("script", "zero3"),
    [
        ("ACCELERATE_USE_DEEPSPEED=true ACCELERATE_DEEPSPEED_ZERO_STAGE=3 torchrun --nproc_per_node 2 train.py", True),
        ("ACCELERATE_USE_DEEPSPEED=yes ACCELERATE_DEEPSPEED_ZERO_STAGE=3 torchrun --nproc_per_node 2 train.py", True),
        ("export ACCELERATE_USE_DEEPSPEED=1\nexport ACCELERATE_DEEPSPEED_ZERO_STAGE=3\npython train.py", True),
        ("ACCELERATE_USE_DEEPSPEED=true ACCELERATE_DEEPSPEED_ZERO_STAGE=2 torchrun --nproc_per_node 2 train.py", False),
        ("ACCELERATE_USE_DEEPSPEED=no ACCELERATE_DEEPSPEED_ZERO_STAGE=3 torchrun --nproc_per_node 2 train.py", False),
        ("ACCELERATE_DEEPSPEED_ZERO_STAGE=3 torchrun --nproc_per_node 2 train.py", False),
        # The script's own --deepspeed decides over the environment, as TrainingArguments reads it first.
        ("ACCELERATE_USE_DEEPSPEED=true ACCELERATE_DEEPSPEED_ZERO_STAGE=3 torchrun train.py --deepspeed z2.json", False),
    ],
)
def test_deepspeed_from_the_launch_environment_takes_the_stage_it_names(tmp_path: Path, script: str, zero3: bool) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text(script + "\n")
    (tmp_path / "z2.json").write_text('{"zero_optimization": {"stage": 2}}\n')
    (tmp_path / "train.py").write_text(
        "import os\n"
        "from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments\n"
        "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": int(os.environ["LOCAL_RANK"])})\n'
        "Trainer(model=model, args=args).train()\n"
    )
    result = lint_repo(tmp_path)
    assert [f.code for f in result.findings] == (["DPL002"] if zero3 else [])


def test_an_importer_whose_calls_reach_only_helpers_is_not_followed_for_returned_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a call returns matters where a rule can fire, or in an importer that passes it on: a
    module that only calls a logger of the repository gets no flow worked out (a library's modules
    mostly do); the loader's importer does, and the finding is the same."""
    import placement_lint.context.propagation as propagation

    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "train.py").write_text(
        "from transformers import Trainer\nimport report\nfrom loader import load\nreport.done()\nTrainer(model=load()).train()\n"
    )
    (tmp_path / "report.py").write_text("from log import get_logger\ndef done():\n    return get_logger('x').info('ok')\n")
    (tmp_path / "log.py").write_text("def get_logger(name):\n    return print\n")
    (tmp_path / "loader.py").write_text(
        'from transformers import AutoModelForCausalLM\nfrom log import get_logger\ndef load():\n    get_logger("l")\n'
        '    return AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
    )
    # A word a rule needs, so its imports are followed (a library module holds one where it loads).
    (tmp_path / "report.py").write_text((tmp_path / "report.py").read_text() + "# from_pretrained in a comment\n")
    flowed: list[str] = []
    inputs = propagation._flow_inputs

    def recorded(summary, graph):  # type: ignore[no-untyped-def]
        flowed.append(summary.path.name)
        return inputs(summary, graph)

    monkeypatch.setattr(propagation, "_flow_inputs", recorded)
    result = lint_repo(tmp_path, jobs=1)
    assert [(f.display, f.code) for f in result.findings] == [("loader.py", "DPL001")]
    assert sorted(flowed) == ["train.py"]


_LOADS_AUTO = 'from transformers import AutoModelForCausalLM, Trainer\nTrainer(model=AutoModelForCausalLM.from_pretrained("m", device_map="auto")).train()\n'


@pytest.mark.parametrize(
    ("files", "launched"),
    [
        # from the repository root, where the launch script's own folder holds no such package
        ({"scripts/run.sh": "torchrun --nproc_per_node 8 -m pkg.train\n"}, "pkg/train.py"),
        # from the launch file's folder, after a `cd` into a folder of another machine (as a script path is)
        ({"examples/run.sh": "cd /data\ntorchrun --nproc_per_node 8 -m pkg.train\n"}, "examples/pkg/train.py"),
        # from where a `cd` in the script goes
        ({"scripts/run.sh": 'cd "$(dirname "$0")/../apps"\ntorchrun --nproc_per_node 8 -m pkg.train\n'}, "apps/pkg/train.py"),
        # from a nested project's root, and from where its packaging puts its packages
        ({"svc/setup.py": "", "svc/scripts/run.sh": "torchrun --nproc_per_node 8 -m pkg.train\n"}, "svc/pkg/train.py"),
        (
            {
                "svc/setup.py": 'from setuptools import setup\nsetup(name="svc", package_dir={"": "source"})\n',
                "svc/scripts/run.sh": "torchrun --nproc_per_node 8 -m pkg.train\n",
            },
            "svc/source/pkg/train.py",
        ),
        # from a folder between a doc and the top, as a script path is (a doc of a project nested in folders)
        (
            {"research/beacon/examples/training.md": "```bash\ntorchrun --nproc_per_node 8 -m pkg.train\n```\n"},
            "research/beacon/pkg/train.py",
        ),
    ],
    ids=["root", "launch-file-folder", "cd", "nested-project", "nested-package-dir", "folder-above-doc"],
)
def test_a_dash_m_launch_finds_its_module_from_each_place_python_would_run_it(
    tmp_path: Path, files: dict[str, str], launched: str
) -> None:
    (tmp_path / ".git").mkdir()
    for name, text in {**files, launched: _LOADS_AUTO}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [(launched, "DPL001")]


def test_a_missing_script_under_the_repositorys_own_folder_is_not_taken_by_its_tail(tmp_path: Path) -> None:
    """`$(dirname "$0")/train.py` is a path of this checkout, not of another machine: a file it does not
    name is not found by its tail elsewhere in the repository."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text('torchrun --nproc_per_node 8 "$(dirname "$0")/train.py"\n')
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "train.py").write_text(_LOADS_AUTO)
    assert lint_repo(tmp_path).findings == []


def _archive_with_a_nested_project(top: Path) -> None:
    """R1-V's shape, downloaded without its `.git`: the top holds no marker, `src/r1-v` a setup.py, and
    the script that launches its SFT sits outside it, naming the target from the top."""
    project = top / "src" / "r1-v"
    (project / "src" / "open_r1").mkdir(parents=True)
    (project / "configs").mkdir()
    (project / "setup.py").write_text('from setuptools import setup\nsetup(name="r1-v", package_dir={"": "src"})\n')
    (project / "configs" / "zero2.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\nnum_processes: 8\n"
    )
    (project / "src" / "open_r1" / "sft.py").write_text(_LOADS_AUTO)
    (top / "src" / "scripts").mkdir()
    (top / "src" / "scripts" / "run_sft.sh").write_text(
        "accelerate launch --config_file src/r1-v/configs/zero2.yaml src/r1-v/src/open_r1/sft.py\n"
    )


def test_an_archive_checked_from_its_unmarked_top_reaches_into_the_project_nested_in_it(tmp_path: Path) -> None:
    top = tmp_path / "R1-V"
    _archive_with_a_nested_project(top)
    findings = run([top], Settings(root=top, codes=CODES), RunOptions(), top).findings
    assert [(f.display, f.code, f.message) for f in findings] == [
        (
            "src/r1-v/src/open_r1/sft.py",
            "DPL001",
            'device_map="auto" spreads each rank\'s model over every GPU under DeepSpeed ZeRO-2',
        )
    ]


def test_a_clone_inside_an_unmarked_top_stays_a_repository_of_its_own(tmp_path: Path) -> None:
    """A `.git` below the top is another repository (a clone kept inside an archive): the top's
    launch scripts do not speak for its files."""
    top = tmp_path / "R1-V"
    _archive_with_a_nested_project(top)
    (top / "src" / "r1-v" / ".git").mkdir()
    assert run([top], Settings(root=top, codes=CODES), RunOptions(), top).findings == []


@pytest.mark.parametrize(("pinned", "flag_fixed"), [("transformers==4.50.3", True), ("", True), ("transformers>=4.51", False)])
def test_low_cpu_mem_usage_beside_a_refused_map_is_fixed_where_transformers_may_refuse_it_too(
    tmp_path: Path, pinned: str, flag_fixed: bool
) -> None:
    """transformers <= 4.50 refuses `low_cpu_mem_usage=True` under ZeRO-3 with the map's error; 4.51 ignores it."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text(pinned + "\n")
    (tmp_path / "run.sh").write_text("deepspeed train.py --deepspeed ds.json\n")
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "train.py").write_text(
        "from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments\n"
        "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto", low_cpu_mem_usage=True)\n'
        "Trainer(model=model, args=args).train()\n"
    )
    (finding,) = lint_repo(tmp_path).findings
    assert finding.code == "DPL001" and finding.violation.fix is not None
    assert (len(finding.violation.fix.edits) == 2) is flag_fixed
    assert any("low_cpu_mem_usage=True is refused" in span.message for span in finding.violation.related) is flag_fixed
