"""Launch commands written in Python (subprocess, os.system), read with `ast`, never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement_lint.context.launch_files import commands_in, launcher_kind
from placement_lint.context.launcher_names import documents_a_launch, python_launch_files
from placement_lint.settings import Settings

HERE = Path("/repo/tools/launch.py")


def texts(source: str) -> list[tuple[int, str]]:
    return [(command.line, command.text) for command in commands_in(HERE, source, launcher_kind(HERE, b""))]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            'import subprocess\nsubprocess.run(["torchrun", "--nproc_per_node", "8", "t.py"])\n',
            "torchrun --nproc_per_node 8 t.py",
        ),
        ('import os\nos.system("deepspeed t.py --deepspeed ds.json")\n', "deepspeed t.py --deepspeed ds.json"),
        ('from subprocess import Popen as P\nP(["accelerate", "launch", "t.py"])\n', "accelerate launch t.py"),
        ('import subprocess as sp\nsp.check_call("torchrun " + "t.py", shell=True)\n', "torchrun t.py"),
        ('import os\nos.execvp("torchrun", ["torchrun", "t.py"])\n', "torchrun t.py"),
        (
            'import subprocess, sys\nsubprocess.run([sys.executable, "-m", "torch.distributed.run", "t.py"])\n',
            "python -m torch.distributed.run t.py",
        ),
        # A name bound once, grown with +=, .append and .extend, an f-string of a module constant.
        (
            'import subprocess\nN = 4\ndef go():\n    c = ["torchrun"]\n    c += [f"--nproc_per_node={N}"]\n'
            '    c.extend(["t.py"])\n    c.append("--x")\n    subprocess.Popen(c)\n',
            "torchrun --nproc_per_node=4 t.py --x",
        ),
        ('import subprocess, shlex\nsubprocess.run(shlex.join(["deepspeed", "t.py"]), shell=True)\n', "deepspeed t.py"),
    ],
)
def test_a_command_written_in_python_is_read_at_the_calls_line(source: str, expected: str) -> None:
    assert texts(source) == [(source.count("\n") if "def " not in source else 8, expected)]


def test_what_is_known_only_when_the_script_runs_is_an_unknown_word() -> None:
    source = 'import subprocess\ndef go(n):\n    subprocess.run(["torchrun", "--nproc_per_node", str(n), "t.py"])\n'
    assert texts(source) == [(3, "torchrun --nproc_per_node $UNKNOWN t.py")]


def test_a_name_bound_twice_is_not_guessed() -> None:
    source = 'import subprocess\ncmd = ["torchrun", "t.py"]\nif x:\n    cmd = ["python", "t.py"]\nsubprocess.run(cmd)\n'
    assert texts(source) == []


def test_a_parameter_hides_the_module_constant_of_its_name() -> None:
    source = 'import subprocess\ncmd = ["torchrun", "t.py"]\ndef go(cmd):\n    subprocess.run(cmd)\n'
    assert texts(source) == []


@pytest.mark.parametrize(
    "source",
    [
        # Returned by a function of the file, called where it runs, or bound first.
        'import subprocess\ndef build():\n    return ["deepspeed", "--num_gpus", "8", "t.py"]\nsubprocess.run(build())\n',
        'import subprocess\nN = "8"\ndef build(extra):\n    cmd = ["deepspeed", "--num_gpus", N]\n    cmd += ["t.py"]\n    return cmd\n'
        "cmd = build(1)\nsubprocess.Popen(cmd)\n",
    ],
)
def test_a_command_returned_by_a_function_of_the_file_is_read(source: str) -> None:
    assert [text for _, text in texts(source)] == ["deepspeed --num_gpus 8 t.py"]


@pytest.mark.parametrize(
    "source",
    [
        # Returned on some paths only, a function defined twice, one that calls itself.
        'import subprocess\ndef build(a):\n    if a:\n        return ["torchrun", "t.py"]\n    return ["python", "t.py"]\nsubprocess.run(build(1))\n',
        'import subprocess\ndef build():\n    return ["torchrun", "t.py"]\ndef build():\n    return ["python", "t.py"]\nsubprocess.run(build())\n',
        "import subprocess\ndef build():\n    return build()\nsubprocess.run(build())\n",
    ],
)
def test_a_command_a_function_returns_only_on_some_paths_is_not_guessed(source: str) -> None:
    assert texts(source) == []


def test_a_file_that_does_not_parse_holds_no_command() -> None:
    assert texts('import os\nos.system("torchrun t.py"\n') == []


def test_only_files_that_start_processes_and_name_a_launcher_are_read(tmp_path: Path) -> None:
    (tmp_path / "launch.py").write_text('import subprocess\nsubprocess.run(["torchrun", "t.py"])\n')
    (tmp_path / "train.py").write_text("import torch.distributed as dist\n")  # names a launcher's module, starts nothing
    (tmp_path / "note.py").write_text('import subprocess\nsubprocess.run(["ls"])\n# torchrun elsewhere\n')
    assert python_launch_files(tmp_path, Settings(root=tmp_path)) == [tmp_path / "launch.py"]


def test_a_file_named_alone_outside_a_repository_reads_only_the_python_launchers_beside_it(tmp_path: Path) -> None:
    from placement_lint.engine import run
    from placement_lint.results import RunOptions

    from helpers import CODES

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"  # the file is outside the working folder
    elsewhere.mkdir()
    nested = project / "old" / "experiments"
    nested.mkdir(parents=True)
    (project / "train.py").write_text(
        'from transformers import AutoModelForCausalLM, Trainer\nm = AutoModelForCausalLM.from_pretrained("x", device_map="auto")\n'
        "Trainer(model=m).train()\n"
    )
    (nested / "go.py").write_text('import subprocess\nsubprocess.run(["torchrun", "--nproc_per_node", "8", "../../train.py"])\n')
    settings = Settings(root=project, codes=CODES)
    assert run([project / "train.py"], settings, RunOptions(), elsewhere).findings == []
    (project / "go.py").write_text('import subprocess\nsubprocess.run(["torchrun", "--nproc_per_node", "8", "train.py"])\n')
    assert "DPL001" in {f.code for f in run([project / "train.py"], settings, RunOptions(), elsewhere).findings}


@pytest.mark.parametrize(
    ("setting", "counts"),
    [('extend-exclude = ["tools"]', True), ('launch-exclude = ["tools"]', False), ('extend-exclude = ["tools/run.py"]', True)],
)
def test_a_python_launcher_counts_the_same_whatever_paths_are_checked(tmp_path: Path, setting: str, counts: bool) -> None:
    """`exclude` leaves a launcher out of the report, not out of the launches (`launch-exclude` does):
    as a walk for launch files finds it when the run names one file, so when it walks the folder."""
    from placement_lint.engine import run
    from placement_lint.results import RunOptions
    from placement_lint.settings import load_settings

    from helpers import CODES

    (tmp_path / ".git").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "train.py").write_text(
        'from transformers import AutoModelForCausalLM, Trainer\nm = AutoModelForCausalLM.from_pretrained("x", device_map="auto")\n'
        "Trainer(model=m).train()\n"
    )
    (tmp_path / "tools" / "run.py").write_text(
        'import subprocess\nsubprocess.run(["torchrun", "--nproc_per_node", "8", "train.py"])\n'
    )
    (tmp_path / "pyproject.toml").write_text(f"[tool.placement-lint]\n{setting}\n")
    settings = load_settings(tmp_path / "pyproject.toml", tmp_path, CODES)
    for paths in ([tmp_path], [tmp_path / "train.py"], [tmp_path / "tools", tmp_path / "train.py"]):
        codes = [f.code for f in run(paths, settings, RunOptions(), tmp_path).findings]
        assert codes == (["DPL001"] if counts else []), paths


@pytest.mark.parametrize(
    "source",
    [
        'import subprocess\nsubprocess.run("torchrun --nproc_per_node 8 t.py".split())\n',
        'import subprocess, shlex\nsubprocess.run(shlex.split("torchrun --nproc_per_node 8 t.py"))\n',
    ],
)
def test_a_command_split_into_words_is_read(source: str) -> None:
    assert texts(source) == [(2, "torchrun --nproc_per_node 8 t.py")]


def test_a_python_file_that_runs_a_launch_script_is_read(tmp_path: Path) -> None:
    (tmp_path / "go.py").write_text('import os\nos.system("bash scripts/train.sh 4 3")\n')
    assert python_launch_files(tmp_path, Settings(root=tmp_path)) == [tmp_path / "go.py"]


def test_options_added_on_some_paths_are_one_unknown_word() -> None:
    source = (
        'import subprocess\ndef go(gpus, script="t.py"):\n    cmd = ["deepspeed"]\n    if gpus:\n'
        '        cmd.extend(["--include", "localhost:0"])\n    else:\n        cmd.extend(["--num_gpus=8"])\n'
        '    cmd += ["t.py"]\n    subprocess.Popen(cmd)\n'
    )
    assert texts(source) == [(9, "deepspeed $UNKNOWN $UNKNOWN t.py")]


TRL_STYLE = '''# Copyright 2020-2026 The HuggingFace Team. All rights reserved.
#
# /// script
# dependencies = ["trl"]
# ///

"""
pip install pillow

# Tested on 8x H100 GPUs
accelerate launch \\
    --config_file examples/accelerate_configs/deepspeed_zero3.yaml \\
    examples/scripts/sft_vlm.py \\
    --output_dir LLaVA-1.5-7B-SFT

For LLaVA-NeXT, use:
    --model_name_or_path llava-hf/llava-v1.6-mistral-7b-hf

python examples/scripts/sft_vlm.py --output_dir one-gpu
$ CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 examples/scripts/sft_vlm.py
This runs with accelerate launch and deepspeed, as said above.
"""

import torch
'''


def test_a_module_docstring_documents_its_launches() -> None:
    """The commands with a launcher that starts several processes, at their lines, run from the module's
    folder; the prose, the continuation lines of another command and a plain `python` run are not read."""
    commands = commands_in(HERE, TRL_STYLE, "python")
    assert [(c.line, " ".join(c.text.split())) for c in commands] == [
        (
            11,
            "accelerate launch --config_file examples/accelerate_configs/deepspeed_zero3.yaml examples/scripts/sft_vlm.py"
            " --output_dir LLaVA-1.5-7B-SFT",
        ),
        (20, "CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 examples/scripts/sft_vlm.py"),
    ]
    assert all(c.documented and c.cwd == HERE.parent for c in commands)


def test_a_docstring_after_code_or_in_a_function_is_no_module_docstring() -> None:
    for source in (
        'import os\n"""accelerate launch train.py"""\n',
        'def f():\n    """accelerate launch train.py"""\n',
        '# a comment\nx = """\naccelerate launch train.py\n"""\n',
    ):
        assert commands_in(HERE, source, "python") == [], source


@pytest.mark.parametrize(
    ("raw", "documents"),
    [
        (TRL_STYLE.encode(), True),
        (TRL_STYLE.replace("\n", "\r\n").encode(), True),
        (b'r"""torchrun --nproc_per_node 2 t.py"""\n', True),
        (b"'''\nsrun python train.py\n'''\n", True),
        (b'"""Run with `python train.py`: one process."""\n', False),
        (b'"""Speeds training up: accelerate your runs."""\n', False),
        (b'import os\n"""accelerate launch t.py"""\n', False),
        (b'"""accelerate launch t.py', False),  # never closed
        # A CRLF header of comments with no docstring: found not to hold one in a single pass.
        (b"# licence line\r\n" * 200 + b"import os\r\n", False),
    ],
)
def test_which_module_docstrings_are_launch_sources(raw: bytes, documents: bool) -> None:
    assert documents_a_launch(raw) is documents


def test_a_script_whose_docstring_documents_its_launch_is_a_python_launcher(tmp_path: Path) -> None:
    (tmp_path / "sft.py").write_text(TRL_STYLE)
    (tmp_path / "lib.py").write_text('"""Helpers. Run `python sft.py` to train."""\nimport subprocess\n')
    assert python_launch_files(tmp_path, Settings(root=tmp_path)) == [tmp_path / "sft.py"]


def test_a_script_that_only_documents_its_launch_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr("placement_lint.context.python_launches.python_commands", fail)
    assert len(commands_in(HERE, TRL_STYLE, "python")) == 2


def test_a_backslash_escaped_in_a_docstring_continues_the_command() -> None:
    """`\\\\` at a line's end in a docstring that is not raw is one backslash: the next line goes on."""
    source = '"""Run::\n\n    torchrun --nproc_per_node=2 worker.py \\\\\n        tests.spec:make\n"""\n'
    assert [(c.line, " ".join(c.text.split())) for c in commands_in(HERE, source, "python")] == [
        (3, "torchrun --nproc_per_node=2 worker.py tests.spec:make")
    ]
    raw = "r" + source  # in a raw docstring the two backslashes are what the reader sees
    assert [c.line for c in commands_in(HERE, raw, "python")] == [3]
