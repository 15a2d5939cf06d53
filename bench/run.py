"""Benchmark placement-lint against ruff on the same trees, in one run.

    python bench/run.py [--runs 5] [--scripts 10000] [--against OTHER/placement-lint]
                                                          (corpora in $PLACEMENT_LINT_BENCH_DIR, default /tmp)

Fetches pinned wheels from the package index (transformers, trl, accelerate, peft) and unpacks
their sources as corpora, generates a synthetic training monorepo (thousands of scripts with
launch scripts, configs and realistic findings), then runs `placement-lint check` and
`ruff check --select E711 --no-cache` on each corpus in alternating runs, and prints the median
wall time, CPU time, peak RSS, files per second and the ratio to ruff as a Markdown table.
Speed is measured here, never in the unit tests.
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

# Outside the project, so the project's own pyproject.toml and .gitignore do not apply to the corpora.
WORK = Path(os.environ.get("PLACEMENT_LINT_BENCH_DIR", Path(tempfile.gettempdir()) / "placement-lint-bench"))
WHEELS = {"transformers": "5.23.0", "trl": "1.16.0", "accelerate": "1.14.0", "peft": "0.20.0"}
BIN = Path(sys.executable).parent


@dataclass
class Sample:
    wall: float
    cpu: float
    rss_mib: float


def measure(command: list[str], cwd: Path) -> Sample:
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed in {cwd}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def fetch_corpus(name: str, version: str) -> Path:
    target = WORK / f"{name}-{version}"
    if target.is_dir():
        return target
    downloads = WORK / "wheels"
    downloads.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(downloads), f"{name}=={version}"],
        check=True,
    )
    wheel = next(downloads.glob(f"{name}-{version}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if not m.split("/")[0].endswith(".dist-info")]
        archive.extractall(target, members)
    return target


# -- the synthetic monorepo ------------------------------------------------------------------------

_LOADERS = [
    'model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype="auto", device_map={dm})',
    "model = AutoModelForCausalLM.from_pretrained(MODEL, **dict(device_map={dm}))",
]
# Mostly correct scripts, as in a real monorepo; about one in ten has a finding under its launch.
_MAPS = ["None"] * 12 + ['"auto"', '{"": PartialState().local_process_index}', '{"": 0}', '"cuda:0"']
_TEMPLATE = '''"""Project {project}, experiment {number}."""
import os
from dataclasses import dataclass, field

import torch
from accelerate import PartialState
from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser, Trainer, TrainingArguments

MODEL = "org/model-{number}"


@dataclass
class ScriptArguments:
    dataset: str = field(default="data/{number}.jsonl")
    lr: float = 2e-5


def build_dataset(path):
    rows = [line for line in open(path)]
    return [{{"input_ids": torch.tensor([len(r)])}} for r in rows]


def main():
    script_args, training_args = HfArgumentParser((ScriptArguments, TrainingArguments)).parse_args_into_dataclasses()
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    {loader}
    trainer = Trainer(model=model, args=training_args, train_dataset=build_dataset(script_args.dataset))
    trainer.train()


if __name__ == "__main__":
    main()
'''
_PLAIN = '''"""Helpers for project {project}."""
import json


def read_jsonl(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def save(rows, path):
    with open(path, "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\\n")
'''
_CONFIGS = {
    "zero3.yaml": "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\nnum_processes: 8\n",
    "ddp.yaml": "distributed_type: MULTI_GPU\nnum_processes: 8\n",
    "fsdp.yaml": "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\nnum_processes: 8\n",
    "single.yaml": 'distributed_type: "NO"\nnum_processes: 1\n',
}


def make_monorepo(scripts: int) -> Path:
    target = WORK / f"monorepo-{scripts}"
    if target.is_dir():
        return target
    rng = random.Random(0)
    (target / ".git").mkdir(parents=True)
    per_project = 50
    for project in range(max(1, scripts // per_project)):
        folder = target / "projects" / f"p{project:04d}"
        (folder / "configs").mkdir(parents=True)
        for name, text in _CONFIGS.items():
            (folder / "configs" / name).write_text(text)
        launches = []
        for number in range(per_project):
            index = project * per_project + number
            if index % 3 == 2:
                (folder / f"util_{number}.py").write_text(_PLAIN.format(project=project))
                continue
            loader = rng.choice(_LOADERS).format(dm=rng.choice(_MAPS))
            (folder / f"train_{number}.py").write_text(_TEMPLATE.format(project=project, number=index, loader=loader))
            config = rng.choice(list(_CONFIGS))
            launches.append(f"accelerate launch --config_file configs/{config} train_{number}.py --output_dir out/{number}")
        (folder / "run.sh").write_text('#!/bin/bash\nset -e\ncd "$(dirname "$0")"\n' + "\n".join(launches) + "\n")
    return target


# -- a monorepo whose launches are written in docs, CI files and notebooks, through a package -----------

_PACKAGE_LOADER = '''"""Model loading for project {project}."""
import torch
from transformers import AutoModelForCausalLM


def load_model(name):
    return AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16, device_map={dm})
'''
_PACKAGE_SCRIPT = '''"""Project {project}, entry point {number}."""
from transformers import HfArgumentParser, Trainer, TrainingArguments

from p{project:04d}.modeling import load_model
from p{project:04d}.data import read_jsonl


def main():
    (training_args,) = HfArgumentParser((TrainingArguments,)).parse_args_into_dataclasses()
    model = load_model("org/model-{number}")
    Trainer(model=model, args=training_args, train_dataset=read_jsonl("data/{number}.jsonl")).train()


if __name__ == "__main__":
    main()
'''
_README = """# Project {project}

Install, then train on every GPU of the node:

```console
$ pip install -e .
$ accelerate launch --config_file configs/{config} -m p{project:04d}.train_{first} --output_dir out
```

Or with the variables our cluster scripts use:

```bash
NPROC=8
torchrun --nproc_per_node $NPROC -m p{project:04d}.train_{second} \\
    --output_dir out
```

A quick single-GPU smoke test:

```text
python -m p{project:04d}.train_{third} --max_steps 2
```
"""
_RST = """Usage
=====

.. code-block:: bash

   deepspeed --num_gpus 8 -m p{project:04d}.train_{number} --deepspeed configs/ds_z2.json

Evaluation runs in one process::

   python -m p{project:04d}.evaluate --checkpoint out
"""
_WORKFLOW = """name: nightly
on: [workflow_dispatch]
jobs:
  train:
    runs-on: [self-hosted, gpu]
    steps:
      - uses: actions/checkout@v4
      - run: accelerate launch --config_file configs/{config} -m p{project:04d}.train_{number}
"""
_NOTEBOOK = """{{"cells": [{{"cell_type": "code", "metadata": {{}}, "outputs": [], "execution_count": null,
 "source": ["!accelerate launch --config_file configs/{config} -m p{project:04d}.train_{number}\\n"]}}],
 "metadata": {{}}, "nbformat": 4, "nbformat_minor": 5}}
"""


def make_copies(source: Path, copies: int) -> Path:
    """The issue's warm monorepo: `copies` copies of a corpus side by side (4 of transformers: 11,440 files)."""
    target = WORK / f"mono{copies}"
    if not target.is_dir():
        staging = WORK / f".mono{copies}-partial"
        shutil.rmtree(staging, ignore_errors=True)
        for index in range(1, copies + 1):
            shutil.copytree(source, staging / f"copy{index}")
        staging.rename(target)
    return target


def make_docs_monorepo(files: int) -> Path:
    """About `files` files: per project a package of entry points that import one loader module, and
    their launches written only in Markdown, reStructuredText, a CI workflow and a notebook."""
    target = WORK / f"docs-monorepo-{files}"
    if target.is_dir():
        return target
    rng = random.Random(1)
    (target / ".git").mkdir(parents=True)
    per_project = 40  # files per project, docs included
    scripts = per_project - 12
    for project in range(max(1, files // per_project)):
        folder = target / "projects" / f"p{project:04d}"
        package = folder / f"p{project:04d}"
        for sub in ("configs", "docs", ".github/workflows", "notebooks", package.name):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        for name, text in _CONFIGS.items():
            (folder / "configs" / name).write_text(text)
        (folder / "configs" / "ds_z2.json").write_text('{"zero_optimization": {"stage": 2}}\n')
        (package / "__init__.py").write_text("")
        (package / "modeling.py").write_text(_PACKAGE_LOADER.format(project=project, dm=rng.choice(_MAPS)))
        (package / "data.py").write_text(_PLAIN.format(project=project))
        (package / "evaluate.py").write_text(_PLAIN.format(project=project))
        for number in range(scripts):
            (package / f"train_{number}.py").write_text(_PACKAGE_SCRIPT.format(project=project, number=number))
        numbers = rng.sample(range(scripts), 6)
        config = rng.choice(list(_CONFIGS))
        (folder / "README.md").write_text(
            _README.format(project=project, config=config, first=numbers[0], second=numbers[1], third=numbers[2])
        )
        (folder / "docs" / "usage.rst").write_text(_RST.format(project=project, number=numbers[3]))
        (folder / ".github" / "workflows" / "nightly.yml").write_text(
            _WORKFLOW.format(project=project, config=config, number=numbers[4])
        )
        (folder / "notebooks" / "train.ipynb").write_text(_NOTEBOOK.format(project=project, config=config, number=numbers[5]))
        (folder / "pyproject.toml").write_text(f'[project]\nname = "p{project:04d}"\nversion = "0.1"\n')
    return target


# -- runs ----------------------------------------------------------------------------------------


def compare(
    label: str, corpus: Path, ours: list[str], runs: int, prepare=None, targets=(".",), ruff=None, files=None
) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """`ruff`: its command without the targets, when not `ruff check --select E711 --no-cache`; `files`:
    how many files our command reads, when not the targets' Python files."""
    ours = [*ours, *targets]
    ruff = [*(ruff or [str(BIN / "ruff"), "check", "--select", "E711", "--no-cache", "--quiet", "--exit-zero"]), *targets]
    pl_samples: list[Sample] = []
    ruff_samples: list[Sample] = []
    for _ in range(runs):  # alternate, so both see the same machine state
        if prepare:
            prepare()
        pl_samples.append(measure(ours, corpus))
        ruff_samples.append(measure(ruff, corpus))
    if files is None:
        files = sum(1 for _ in corpus.rglob("*.py")) if targets == (".",) else len(targets)
    pl_wall = statistics.median(s.wall for s in pl_samples)
    ruff_wall = statistics.median(s.wall for s in ruff_samples)
    return {
        "corpus": label,
        "files": files,
        "pl_wall": pl_wall,
        "pl_cpu": statistics.median(s.cpu for s in pl_samples),
        "pl_rss": max(s.rss_mib for s in pl_samples),
        "ruff_wall": ruff_wall,
        "ratio": pl_wall / ruff_wall,
        "files_per_s": files / pl_wall,
    }


_STAT_WALK = """
import os, click
stack = ["."]
while stack:
    with os.scandir(stack.pop()) as listing:
        for entry in listing:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.name.endswith(".py"):
                entry.stat()
"""


def compile_bytecode() -> None:
    """Measure placement-lint as installed: `pip install` compiles its bytecode, an editable install
    under PYTHONDONTWRITEBYTECODE never does, and then every run compiles it again (about 0.08 s)."""
    located = subprocess.run(
        [sys.executable, "-c", "import placement_lint, os; print(os.path.dirname(placement_lint.__file__))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    compileall.compile_dir(located.stdout.strip(), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scripts", type=int, default=10_000)
    parser.add_argument("--docs-files", type=int, default=10_000, help="files in the monorepo whose launches are in docs")
    parser.add_argument(
        "--against",
        type=Path,
        metavar="PLACEMENT_LINT",
        help="another release's placement-lint executable: adds the docs monorepo against it (in the ruff column)",
    )
    args = parser.parse_args()
    compile_bytecode()
    placement = [str(BIN / "placement-lint"), "check", "--quiet", "--exit-zero"]
    rows = []
    corpora = {name: fetch_corpus(name, version) for name, version in WHEELS.items()}
    monorepo = make_monorepo(args.scripts)
    docs_monorepo = make_docs_monorepo(args.docs_files)
    for name, path in corpora.items():
        rows.append(compare(f"{name} {WHEELS[name]}, cold", path, [*placement, "--no-cache"], args.runs))
    trl = corpora["trl"]
    cache = WORK / "cache-trl"
    shutil.rmtree(cache, ignore_errors=True)
    subprocess.run([*placement, "--cache-dir", str(cache), "."], cwd=trl, stdout=subprocess.DEVNULL, check=False)
    rows.append(compare(f"trl {WHEELS['trl']}, warm cache", trl, [*placement, "--cache-dir", str(cache)], args.runs))
    rows.append(compare(f"monorepo of {args.scripts} scripts, cold", monorepo, [*placement, "--no-cache"], args.runs))
    rows.append(
        compare(
            f"monorepo of {args.docs_files} files, launches in docs, cold", docs_monorepo, [*placement, "--no-cache"], args.runs
        )
    )
    mono_cache = WORK / "cache-monorepo"
    shutil.rmtree(mono_cache, ignore_errors=True)
    subprocess.run([*placement, "--cache-dir", str(mono_cache), "."], cwd=monorepo, stdout=subprocess.DEVNULL, check=False)
    touched = sorted(monorepo.rglob("train_*.py"))[:10]

    def touch() -> None:
        for path in touched:
            path.write_text(path.read_text())

    rows.append(
        compare(
            f"monorepo of {args.scripts} scripts, warm cache, 10 files touched",
            monorepo,
            [*placement, "--cache-dir", str(mono_cache)],
            args.runs,
            touch,
        )
    )
    # Cost is linear in the files read and parsed: the same tree 1, 2 and 4 times, cold.
    for count in (2, 4):
        tree_copies = make_copies(corpora["transformers"], count)
        rows.append(compare(f"{count} copies of transformers, cold", tree_copies, [*placement, "--no-cache"], args.runs))
    # The warm monorepo: both tools answer from their own warm cache (ruff with --cache-dir).
    copies = make_copies(corpora["transformers"], 4)
    ours_cache, ruff_cache = WORK / "cache-mono4", WORK / "cache-mono4-ruff"
    for folder in (ours_cache, ruff_cache):
        shutil.rmtree(folder, ignore_errors=True)
    ours_warm = [*placement, "--cache-dir", str(ours_cache)]
    ruff_warm = [str(BIN / "ruff"), "check", "--select", "E711", "--cache-dir", str(ruff_cache), "--quiet", "--exit-zero"]
    for command in (ours_warm, ruff_warm):
        subprocess.run([*command, "."], cwd=copies, stdout=subprocess.DEVNULL, check=False)
    rows.append(compare("monorepo of 4 copies of transformers, both warm", copies, ours_warm, args.runs, ruff=ruff_warm))
    # The least a warm run can do in Python: start, import click, and stat every Python file of the
    # tree in one walk (no .gitignore, no cache lookup), against the same warm ruff.
    walk = [sys.executable, "-c", _STAT_WALK]
    rows.append(
        compare(
            "floor: Python start, `import click` and a bare stat walk of the 4 copies", copies, walk, args.runs, ruff=ruff_warm
        )
    )
    five = tuple(str(p.relative_to(corpora["transformers"])) for p in sorted(corpora["transformers"].rglob("*.py"))[:5])
    tree = corpora["transformers"]
    rows.append(compare("pre-commit: 5 clean files, no cache", tree, [*placement, "--no-cache"], args.runs, targets=five))
    hook_cache = WORK / "cache-precommit"  # a hook run keeps its cache between commits
    shutil.rmtree(hook_cache, ignore_errors=True)
    subprocess.run([*placement, "--cache-dir", str(hook_cache), *five], cwd=tree, stdout=subprocess.DEVNULL, check=False)
    rows.append(
        compare(
            "pre-commit: 5 clean files, warm cache", tree, [*placement, "--cache-dir", str(hook_cache)], args.runs, targets=five
        )
    )
    # What every run pays before it looks at a file: Python's start and importing click. The warm rows
    # compare with ruff a run that is mostly this.
    floor = [sys.executable, "-c", "import click"]
    rows.append(
        compare("floor: Python start and `import click`, no file read (against ruff on trl)", trl, floor, args.runs, files=0)
    )
    if args.against is not None:
        version = subprocess.run([str(args.against), "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]
        other = [str(args.against), "check", "--quiet", "--exit-zero", "--no-cache"]
        label = f"monorepo of {args.docs_files} files, launches in docs, cold, against placement-lint {version}"
        rows.append(compare(label, docs_monorepo, [*placement, "--no-cache"], args.runs, ruff=other))
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(
        f"Medians of {args.runs} alternating runs; ruff = `ruff check --select E711 --no-cache`, "
        "except where both are warm (ruff with its own `--cache-dir`).\n"
    )
    print("| corpus | .py files | placement-lint wall | CPU | peak RSS | files/s | ruff wall | ratio |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for row in rows:
        print(
            f"| {row['corpus']} | {row['files']} | {_seconds(row['pl_wall'])} | {_seconds(row['pl_cpu'])} | {row['pl_rss']:.0f} MiB "
            f"| {row['files_per_s']:.0f} | {_seconds(row['ruff_wall'])} | {row['ratio']:.2f}x |"
        )


def _seconds(value: object) -> str:
    """Three decimals under 0.1 s, where a target such as 0.05 s would hide in two."""
    seconds = float(value)  # type: ignore[arg-type]
    return f"{seconds:.3f} s" if seconds < 0.1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    main()
