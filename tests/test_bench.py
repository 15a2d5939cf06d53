"""bench/run.py's generators and bookkeeping, without timing anything (speed is measured by the benchmark)."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "bench" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_run", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_run"]


def _main_of(tree: ast.Module) -> ast.FunctionDef:
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")


@pytest.mark.parametrize("shape", ["issue", "redefined", "nested"])
def test_long_function_is_parseable_and_grows_with_its_scale(bench, shape):
    assert shape in bench.LONG_FUNCTION_SHAPES
    lengths, lines = {}, {}
    for scale in (1, 2, 4, 8):
        source = bench.long_training_script(shape, scale)
        main = _main_of(ast.parse(source))
        lengths[scale] = main.end_lineno - main.lineno + 1
        lines[scale] = source.count("\n")
        loads = [node for node in ast.walk(main) if isinstance(node, ast.Attribute) and node.attr == "from_pretrained"]
        models = [node for node in loads if isinstance(node.value, ast.Name) and node.value.id == "AutoModelForCausalLM"]
        assert len(models) == bench._BLOCKS_PER_SCALE[shape] * scale
    assert 260 <= lines[1] <= 300  # "1x is about 280 lines"
    assert lengths[1] >= 0.9 * lines[1]  # nearly all of it one function
    for scale in (2, 4, 8):
        assert scale * 0.95 <= lengths[scale] / lengths[1] <= scale


def test_the_issue_shape_is_the_block_the_issue_timed(bench):
    source = bench.long_training_script("issue", 1)
    assert source.count("\n") == 274
    assert source.count('"device_map": "auto"') == 40
    assert source.count(".to(device)") == 20


def test_the_nested_shape_has_fresh_names_and_nested_loops_with_and_try(bench):
    main = _main_of(ast.parse(bench.long_training_script("nested", 1)))
    assigned = [node.id for node in ast.walk(main) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)]
    models = [name for name in assigned if name.startswith("model_")]
    assert len(set(models)) == bench._BLOCKS_PER_SCALE["nested"]
    tries = [node for node in main.body if isinstance(node, ast.Try)]
    assert tries
    with_in_try = tries[0].body[0]
    assert isinstance(with_in_try, ast.With)
    assert isinstance(with_in_try.body[0], ast.For)
    assert any(isinstance(node, ast.While) for node in main.body)


def test_the_redefined_shape_reuses_its_names(bench):
    main = _main_of(ast.parse(bench.long_training_script("redefined", 2)))
    stores = [node.id for node in ast.walk(main) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)]
    assert stores.count("model_kwargs") == 2 * bench._BLOCKS_PER_SCALE["redefined"]


def test_the_long_function_project_is_launched_under_zero3(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "WORK", tmp_path)
    project = bench.make_long_function_project("issue", 2)
    assert (project / ".git").is_dir()
    assert "torchrun --nproc_per_node 8 train.py --deepspeed ds_z3.json" in (project / "launch.sh").read_text()
    assert json.loads((project / "ds_z3.json").read_text())["zero_optimization"]["stage"] == 3
    assert (project / "train.py").read_text() == bench.long_training_script("issue", 2)


def test_growth_is_a_lower_bound_when_8x_ran_past_the_cap(bench):
    assert bench._growth({1: 0.5, 2: 1.0, 4: 4.0, 8: 16.0}, 60.0) == {"ratio": 16.0, "lower_bound": False}
    assert bench._growth({2: 2.0, 4: 20.0, 8: None}, 60.0) == {"ratio": 30.0, "lower_bound": True}
    assert bench._growth({1: 0.5}, 60.0) is None


def test_the_report_prints_a_capped_size_and_the_growth(bench):
    rows = [
        dict(shape="issue", scale=2, lines=534, pl_wall=2.0, pl_cpu=2.0, pl_rss=25.0, ruff_wall=0.01, ratio=200.0),
        dict(shape="issue", scale=8, lines=2094, pl_wall=None),
    ]
    results = {
        "machine": "m",
        "placement_lint": "0",
        "ruff": "ruff 0",
        "date": "d",
        "runs": 1,
        "scaling": {"rows": rows, "max_seconds": 60.0, "growth": {"issue": bench._growth({2: 2.0, 8: None}, 60.0)}},
        "repositories": {"rows": [], "skipped": "skipped: no --repos DIR"},
    }
    report = bench.markdown(results)
    assert "| issue | 8x | 2094 | > 60 s |" in report
    assert "t(8x)/t(2x): > 30.0 (8x ran past the 60 s cap" in report
    assert "Real training repositories: skipped: no --repos DIR" in report


def test_every_repository_is_pinned_and_fetchable(bench):
    folders = [repo.folder for repo in bench.REPOSITORIES]
    assert len(set(folders)) == len(folders) >= 10
    assert {"diffusers", "open-instruct", "accelerate"} <= set(folders)
    commands = bench.how_to_fetch(bench.REPOSITORIES)
    for repo in bench.REPOSITORIES:
        assert len(repo.commit) == 40
        assert f"https://github.com/{repo.github} {repo.commit}" in commands
    assert set(bench.PRECOMMIT_CHANGES) <= set(folders)


def _git(*args, cwd):
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def test_export_leaves_out_a_blob_the_clone_lacks_and_the_note_says_the_tree_is_partial(bench, tmp_path):
    source = tmp_path / "source"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "train.py").write_text("print('train')\n")
    (source / "big.bin").write_bytes(b"\0" * 100)
    _git("init", "-q", cwd=source)
    _git("add", "-A", cwd=source)
    _git("commit", "-q", "-m", "one", cwd=source)
    commit = _git("rev-parse", "HEAD", cwd=source)
    big = _git("rev-parse", "HEAD:big.bin", cwd=source)
    (source / ".git" / "objects" / big[:2] / big[2:]).unlink()  # as a snapshot without its largest files
    repo = bench.Repository("source", "owner/source", commit, 2)

    target = tmp_path / "trees"
    bench.export_repositories(str(tmp_path / "{name}" / ".git"), target, [repo])

    assert (target / "source" / "pkg" / "train.py").read_text() == "print('train')\n"
    assert not (target / "source" / "big.bin").exists()
    assert bench.tree_note(repo, target / "source") == "1 of the commit's 2 files"
    (target / "source" / "big.bin").write_bytes(b"\0" * 100)
    assert bench.tree_note(repo, target / "source") == ""


def test_targets_say_met_not_met_and_not_known(bench):
    transformers = f"transformers {bench.WHEELS['transformers']}, cold"
    results = {
        "corpora": [{"corpus": transformers, "ratio": 0.7}],
        "repositories": {
            "rows": [{"corpus": "diffusers", "pl_wall": 2.5}],
            "worst": {"repository": "axolotl", "ratio": 7.0},
            "median_ratio": 2.0,
            "memory": {"tree_rss_mb": 250.0},
        },
        "scaling": {"growth": {"issue": {"ratio": 4.2, "lower_bound": False}, "nested": {"ratio": 3.0, "lower_bound": True}}},
        "precommit": {
            "repository": "diffusers",
            "rows": [
                {"kind": "library module", "edited": "lib.py", "path": "lib.py", "pl_wall": 0.4},
                {"kind": "launch script", "edited": "run.sh", "path": "train.py", "pl_wall": 1.5},
            ],
        },
    }
    met = {check["target"]: check["met"] for check in bench.targets(results)}
    assert met == {
        "transformers wheel cold <= 0.8x ruff": True,
        "every real repository cold <= 6x ruff --isolated": False,
        "median of the real repositories <= 3x": True,
        "diffusers cold <= 3 s": True,
        "8 copies of trl: peak memory <= 200 MB (PSS, all processes)": False,
        "long function (issue): t(8x)/t(2x) <= 5": True,
        "long function (nested): t(8x)/t(2x) <= 5": None,
        "pre-commit, warm, diffusers: library module edited <= 0.5 s": True,
        "pre-commit, warm, diffusers: launch script edited, the script it launches checked <= 1 s": False,
    }


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="reads /proc")
def test_tree_memory_counts_the_child_processes(bench, tmp_path):
    child = "import time; held = bytearray(60_000_000); time.sleep(0.5)"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    assert bench.tree_peak_rss_mb([sys.executable, "-c", parent], tmp_path) > 60


def test_every_form_of_bench_shapes_parses_and_grows_with_its_scale(bench):
    for name, shape in bench.shapes.SHAPES.items():
        lines = {}
        for scale in (1, 2, 8):
            source = bench.shapes.training_script(name, scale)
            ast.parse(source)
            lines[scale] = source.count("\n")
        assert 260 <= lines[1] <= 320, name  # about 280 lines at 1x
        assert 7 * (lines[2] - lines[1]) <= lines[8] - lines[1] <= 7 * (lines[2] - lines[1]) + 2, name
        assert shape.doc, name


def test_the_elif_form_is_one_chain_on_the_model_type(bench):
    main = _main_of(ast.parse(bench.shapes.training_script("elif", 1)))
    chain = next(node for node in main.body if isinstance(node, ast.If))
    depth = 0
    while isinstance(chain, ast.If):
        depth += 1
        assert ast.unparse(chain.test).startswith("args.model_type == ")
        chain = chain.orelse[0] if len(chain.orelse) == 1 else None
    assert depth == bench.shapes.SHAPES["elif"].per_scale


def test_the_forms_that_grew_faster_than_the_code_are_in_the_scaling_section(bench, tmp_path, monkeypatch):
    assert set(bench.shapes.SCALING_SHAPES) <= set(bench.LONG_FUNCTION_SHAPES)
    monkeypatch.setattr(bench, "WORK", tmp_path)
    for shape in bench.shapes.SCALING_SHAPES:
        project = bench.make_long_function_project(shape, 2)
        assert (project / "train.py").read_text() == bench.long_training_script(shape, 2)
        assert "deepspeed --num_gpus 8 train.py --deepspeed ds_z3.json" in (project / "launch.sh").read_text()
        assert json.loads((project / "ds_z3.json").read_text())["zero_optimization"]["stage"] == 3
