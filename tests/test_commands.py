"""Launch commands and the files that hold them, parsed without running anything."""

from __future__ import annotations

import shlex
from pathlib import Path

import hypothesis
import pytest

from placement_lint.context import launch_files
from placement_lint.context.commands import expand, parse_command, shell_words, split
from placement_lint.context.launch_files import CommandLine, SourcedFiles, commands_in, launcher_kind, may_launch
from placement_lint.context.launch_setup import one_gpu, one_process


@pytest.mark.parametrize(
    ("command", "launcher", "target", "module", "option", "script_arg"),
    [
        (
            "accelerate launch --config_file a.yaml train.py --lr 1",
            "accelerate",
            "train.py",
            None,
            ("--config_file", "a.yaml"),
            ("--lr", "1"),
        ),
        (
            "accelerate launch --multi_gpu --num_processes=2 -m pkg.train",
            "accelerate",
            None,
            "pkg.train",
            ("--num_processes", "2"),
            None,
        ),
        (
            "python -m accelerate.commands.launch --use_deepspeed train.py",
            "accelerate",
            "train.py",
            None,
            ("--use_deepspeed", ""),
            None,
        ),
        (
            "torchrun --nproc-per-node 1 train.py --deepspeed ds.json",
            "torchrun",
            "train.py",
            None,
            ("--nproc-per-node", "1"),
            ("--deepspeed", "ds.json"),
        ),
        (
            "python3 -u -m torch.distributed.launch --nproc_per_node 4 --use_env x.py",
            "torchrun",
            "x.py",
            None,
            ("--use_env", ""),
            None,
        ),
        (
            "deepspeed --num_gpus=4 --include localhost:0,1 src/train.py --deepspeed cfg.json",
            "deepspeed",
            "src/train.py",
            None,
            ("--include", "localhost:0,1"),
            ("--deepspeed", "cfg.json"),
        ),
        (
            "CUDA_VISIBLE_DEVICES=0,1 nohup python train.py --config recipe.yaml",
            "python",
            "train.py",
            None,
            None,
            ("--config", "recipe.yaml"),
        ),
        ("srun -N 2 --gres=gpu:8 python train.py", "python", "train.py", None, None, None),
        ("uv run torchrun --standalone --nproc_per_node 8 train.py", "torchrun", "train.py", None, ("--standalone", ""), None),
        (
            "trl sft --config recipe.yaml --accelerate_config zero3",
            "trl",
            None,
            "trl.scripts.sft",
            ("--accelerate_config", "zero3"),
            None,
        ),
        (
            "python scripts/run.py recipes/zephyr/config.yaml",
            "python",
            "scripts/run.py",
            None,
            None,
            ("", "recipes/zephyr/config.yaml"),
        ),
    ],
)
def test_parse_command(command, launcher, target, module, option, script_arg) -> None:  # type: ignore[no-untyped-def]
    launch = parse_command(command)
    assert launch is not None
    assert (launch.launcher, launch.target, launch.module) == (launcher, target, module)
    if option:
        assert launch.options.get(option[0]) == option[1]
    if script_arg:
        assert launch.script_args.get(script_arg[0]) == script_arg[1]


def test_wrappers_and_env_are_recorded() -> None:
    launch = parse_command("CUDA_VISIBLE_DEVICES=0 srun --ntasks 8 python train.py")
    assert launch is not None and launch.wrapped_by == "srun" and launch.env == {"CUDA_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("command", ["pip install -r requirements.txt", "echo torchrun", "accelerate config", "ls", ""])
def test_not_a_launch(command: str) -> None:
    assert parse_command(command) is None


def test_expand_variables() -> None:
    variables = {"NGPU": "8", "EMPTY": ""}
    assert expand("${NGPU:-2} ${MISSING:-4} $NGPU ${EMPTY:-1} $(NGPU) $UNKNOWN", variables) == "8 4 8 1 8 $UNKNOWN"


def test_shell_script_continuations_cd_and_variables(tmp_path: Path) -> None:
    script = tmp_path / "scripts" / "run.sh"
    text = "#!/bin/bash\nCONFIG=configs/z3.yaml\ncd ..\naccelerate launch \\\n  --config_file $CONFIG \\\n  train.py  # go\n"
    [command] = commands_in(script, text, "shell")
    assert command.line == 4
    assert command.text == "accelerate launch --config_file configs/z3.yaml train.py"
    assert command.cwd == tmp_path  # `cd ..` from scripts/, as the shell takes it


def test_makefile_recipes_and_variables(tmp_path: Path) -> None:
    text = "GPUS ?= 4\ntrain:\n\t@torchrun --nproc_per_node $(GPUS) \\\n\t\ttrain.py\nclean:\n\trm -rf out\n"
    commands = commands_in(tmp_path / "Makefile", text, "make")
    assert [(c.line, c.text) for c in commands] == [(3, "torchrun --nproc_per_node 4 train.py"), (6, "rm -rf out")]


def test_dockerfile_exec_form(tmp_path: Path) -> None:
    [command] = commands_in(tmp_path / "Dockerfile", 'FROM x\nCMD ["accelerate", "launch", "train.py"]\n', "docker")
    assert command.text == "accelerate launch train.py" and command.line == 2


def test_ci_yaml_run_blocks(tmp_path: Path) -> None:
    text = "jobs:\n  t:\n    steps:\n      - run: |\n          pip install .\n          torchrun --nproc_per_node 2 train.py\n"
    commands = commands_in(tmp_path / "ci.yml", text, "yaml")
    assert [c.text for c in commands] == ["pip install .", "torchrun --nproc_per_node 2 train.py"]


def test_markdown_fences_only_shell(tmp_path: Path) -> None:
    text = "```python\nos.system('torchrun x.py')\n```\n\n```bash\n$ deepspeed train.py --deepspeed ds.json\n```\n"
    [command] = commands_in(tmp_path / "README.md", text, "markdown")
    assert command.text == "deepspeed train.py --deepspeed ds.json" and command.line == 6


@pytest.mark.parametrize(
    ("name", "head", "kind"),
    [
        ("run.sh", b"", "shell"),
        ("job", b"#!/bin/bash\n#SBATCH -N 1", "shell"),
        ("Makefile", b"", "make"),
        ("Dockerfile.gpu", b"", "docker"),
        ("Procfile", b"", "procfile"),
        ("train.yaml", b"", "yaml"),
        ("README.md", b"", "markdown"),
        ("notes.md", b"", "markdown"),  # Markdown anywhere, not only READMEs and docs/
        ("guide.mdx", b"", "markdown"),
        ("index.rst", b"", "rst"),
        ("data.csv", b"", None),
    ],
)
def test_launcher_kind(name: str, head: bytes, kind: str | None) -> None:
    assert launcher_kind(Path(name), head) == kind


def test_procfile(tmp_path: Path) -> None:
    [command] = commands_in(
        tmp_path / "Procfile", "web: gunicorn app\ntrain: torchrun --nproc_per_node 2 train.py\n", "procfile"
    )[1:]
    assert command.text == "torchrun --nproc_per_node 2 train.py" and command.line == 2


def test_configs_outside_the_repository_are_never_read(tmp_path: Path) -> None:
    from placement_lint.context.configs import ConfigReader

    outside = tmp_path / "secret.json"
    outside.write_text('{"zero_optimization": {"stage": 3}}')
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    (repo / "configs" / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    (repo / "configs" / "link.json").symlink_to(outside)
    reader = ConfigReader(repo)
    assert reader.find("../secret.json", repo) is None
    assert reader.find(str(outside), repo) is None
    assert reader.find("configs/link.json", repo) is None, "a symlink out of the repository is not followed"
    assert reader.find("ds.json", repo / "configs") == (repo / "configs" / "ds.json").resolve()


def test_yaml_tags_that_build_objects_are_refused(tmp_path: Path) -> None:
    from placement_lint.context.configs import ConfigReader

    marker = tmp_path / "executed"
    config = tmp_path / "evil.yaml"
    config.write_text(f"distributed_type: !!python/object/apply:os.system ['touch {marker}']\n")
    reader = ConfigReader(tmp_path)
    assert reader.load(config) is None
    assert not marker.exists()
    assert "cannot parse config" in reader.warnings[0]


@pytest.mark.parametrize(
    "command",
    [
        "mpirun -np 4 python train.py",
        "mpirun -np 4 -x NCCL_DEBUG=INFO python train.py",
        "mpiexec -n 2 --allow-run-as-root python train.py",
    ],
)
def test_mpi_wrappers(command: str) -> None:
    launch = parse_command(command)
    assert launch is not None and launch.wrapped_by in ("mpirun", "mpiexec") and launch.target == "train.py"


def test_heredoc_text_is_not_a_command(tmp_path: Path) -> None:
    text = "cat > job.sh <<'EOF'\naccelerate launch --config_file z3.yaml train.py\nEOF\npython train.py\n"
    assert [c.text for c in commands_in(tmp_path / "run.sh", text, "shell")] == ["cat > job.sh <<'EOF'", "python train.py"]


@pytest.mark.parametrize(
    "text",
    [
        "````bash\ntorchrun --nproc_per_node 2 train.py\n````\n",
        "```\ntorchrun --nproc_per_node 2 train.py\n```\n",
        "1. Train:\n\n   ```shell\n   torchrun --nproc_per_node 2 train.py\n   ```\n",
        "> ```bash\n> torchrun --nproc_per_node 2 train.py\n> ```\n",
        # A line that opens with inline code in triple backticks opens no fence (CommonMark: a backtick
        # fence's info string holds no backtick), so the block after it is still read the right way out.
        "```export WANDB_DISABLED=true``` first, then:\n\n```bash\ntorchrun --nproc_per_node 2 train.py\n```\n",
    ],
)
def test_markdown_fence_forms(tmp_path: Path, text: str) -> None:
    [command] = commands_in(tmp_path / "README.md", text, "markdown")
    assert command.text == "torchrun --nproc_per_node 2 train.py"


def test_pragma_only_in_comments() -> None:
    from placement_lint.context.in_file import pragma_override

    assert pragma_override('s = "# placement-lint: context=zero3"\n', "x.py") is None
    assert pragma_override('"""\n# placement-lint: context=zero3\n"""\n', "x.py") is None
    found = pragma_override("x = 1  # placement-lint: context=zero3\n", "x.py")
    assert found is not None and found.setup.zero3


def test_yaml_alias_bomb_does_not_hang(tmp_path: Path) -> None:
    import time

    levels = ["a: &a [run, run, run, run, run, run, run, run, run]"]
    levels += [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]"
        for i in range(8)
    ]
    started = time.monotonic()
    commands_in(tmp_path / "bomb.yml", "\n".join(levels) + "\nscript: [torchrun x.py]\n", "yaml")
    assert time.monotonic() - started < 5


# -- launches wherever repositories write them ---------------------------------------------------


def texts(path: Path, text: str, kind: str) -> list[str]:
    return [" ".join(c.text.split()) for c in commands_in(path, text, kind) if parse_command(c.text) is not None]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```text\ntorchrun --nproc_per_node 2 train.py\n```\n", ["torchrun --nproc_per_node 2 train.py"]),
        (
            "```console\n$ torchrun --nproc_per_node 2 train.py\npython train.py printed this\n```\n",
            ["torchrun --nproc_per_node 2 train.py"],
        ),
        ("```console\nme@box:~/repo$ torchrun a.py\n>>> python b.py\n```\n", ["torchrun a.py"]),
        ("```bash\n$ export N=2\ntorchrun --nproc_per_node $N a.py\n```\n", ["torchrun --nproc_per_node 2 a.py"]),
        (
            "```python\n# as run on the cluster\naccelerate launch --multi_gpu train.py\n```\n",
            ["accelerate launch --multi_gpu train.py"],
        ),
        ("```python\nNPROC=8\ntorchrun --nproc_per_node $NPROC train.py\n```\n", ["torchrun --nproc_per_node 8 train.py"]),
        (
            "```py\n!pip install trl\n!accelerate launch \\\n  --multi_gpu train.py\nx = 1\n```\n",
            ["accelerate launch --multi_gpu train.py"],
        ),
        ("```python\n%%bash\ntorchrun a.py\n```\n", ["torchrun a.py"]),
        ("```yaml\ntorchrun a.py\n```\n", ["torchrun a.py"]),
    ],
)
def test_markdown_blocks_of_every_label(tmp_path: Path, text: str, expected: list[str]) -> None:
    assert texts(tmp_path / "notes.md", text, "markdown") == expected


@pytest.mark.parametrize(
    "text",
    [
        '```python\nimport os\nos.system("torchrun --nproc_per_node 8 train.py")\n```\n',
        '```python\ncmd = "python train.py"\nsubprocess.run(cmd.split())\n```\n',
        "```python\ncd = 3\nprint(cd)\n```\n",  # valid Python that opens with a shell word
        '```python\nUSAGE = """\ntorchrun --nproc_per_node 8 train.py\n"""\nprint(USAGE)\n```\n',  # a launch in a string
        '```python\n# torchrun --nproc_per_node 8 train.py\nprint("python train.py")\n```\n',
        '```json\n{"cmd": "torchrun train.py"}\n```\n',
    ],
)
def test_real_python_in_a_block_is_never_shell(tmp_path: Path, text: str) -> None:
    assert texts(tmp_path / "README.md", text, "markdown") == []


def test_console_prompts_keep_their_line_numbers(tmp_path: Path) -> None:
    text = "# T\n\n```console\n$ cd scripts\nok\n$ torchrun \\\n    a.py\n```\n"
    [command] = [c for c in commands_in(tmp_path / "README.md", text, "markdown") if c.text.startswith("torchrun")]
    assert (command.line, command.text, command.cwd) == (6, "torchrun a.py", tmp_path / "scripts")


@pytest.mark.parametrize(
    ("name", "kind", "text"),
    [
        ("README.md", "markdown", "Go there:\n\n```bash\ncd examples/sft\n```\n\nThen:\n\n```bash\ntorchrun a.py\n```\n"),
        ("index.rst", "rst", "Go there::\n\n    cd examples/sft\n\nThen:\n\n.. code-block:: bash\n\n   torchrun a.py\n"),
        (
            "README.md",
            "markdown",
            "```console\n$ cd examples\n$ ls\nsft\n```\n\n```console\n$ cd sft\n```\n\n```bash\ntorchrun a.py\n```\n",
        ),
    ],
)
def test_a_cd_moves_the_launches_of_the_later_blocks(tmp_path: Path, name: str, kind: str, text: str) -> None:
    (tmp_path / "examples" / "sft").mkdir(parents=True)
    [command] = [c for c in commands_in(tmp_path / name, text, kind) if c.text.startswith("torchrun")]
    assert command.cwd == tmp_path / "examples" / "sft"


def test_a_doc_that_clones_its_own_repository_moves_into_the_folder_beside_it(tmp_path: Path) -> None:
    # Baichuan2's README: `git clone .../Baichuan2.git`, `cd Baichuan2/fine-tune`, then the launch.
    repository = tmp_path / "Baichuan2"
    (repository / "fine-tune").mkdir(parents=True)
    (tmp_path / "tool" / "fine-tune").mkdir(parents=True)
    clone = "```shell\ngit clone https://github.com/org/{0}.git\ncd {0}/fine-tune\n```\n\n```shell\ndeepspeed fine-tune.py\n```\n"
    [own] = [c for c in commands_in(repository / "README.md", clone.format("Baichuan2"), "markdown") if "deepspeed" in c.text]
    assert own.cwd == repository / "fine-tune"
    # Another repository's clone (its name is no folder the doc is in) leaves the launch where it was.
    [other] = [c for c in commands_in(repository / "README.md", clone.format("tool"), "markdown") if "deepspeed" in c.text]
    assert other.cwd == repository


@pytest.mark.parametrize(
    "text",
    [
        # Into the repository the README is in: its folder, not a NAME inside it.
        "```bash\ngit clone https://github.com/org/proj && cd proj\n```\n\n```bash\ntorchrun a.py\n```\n",
        "```bash\ncd examples/sft\npython a.py\ncd ../..\n```\n\n```bash\ntorchrun a.py\n```\n",
        "```bash\ntorchrun a.py\n```\n\n```bash\ncd examples/sft\n```\n",  # a cd after the launch
        "```python\nimport os\nos.chdir('examples/sft')\n```\n\n```bash\ntorchrun a.py\n```\n",
    ],
)
def test_a_block_that_moves_nowhere_this_repository_has_leaves_the_next_in_place(tmp_path: Path, text: str) -> None:
    (tmp_path / "examples" / "sft").mkdir(parents=True)
    [command] = [c for c in commands_in(tmp_path / "README.md", text, "markdown") if c.text.startswith("torchrun")]
    assert command.cwd == tmp_path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "T\n=\n\n.. code-block:: bash\n   :linenos:\n\n   torchrun --nproc_per_node 2 a.py\n\nAfter.\n",
            (7, "torchrun --nproc_per_node 2 a.py"),
        ),
        ("T\n=\n\n.. code:: console\n\n    $ deepspeed a.py\n    done\n", (6, "deepspeed a.py")),
        (".. prompt:: bash $\n\n   torchrun a.py\n", (3, "torchrun a.py")),
        ("Run it::\n\n    torchrun a.py\n", (3, "torchrun a.py")),
        ("Run it:\n\n::\n\n  torchrun a.py\n", (5, "torchrun a.py")),
        ("- item\n\n  Nested::\n\n      torchrun a.py\n\n  back in the item\n", (5, "torchrun a.py")),
    ],
)
def test_rst_blocks(tmp_path: Path, text: str, expected: tuple[int, str]) -> None:
    [command] = [c for c in commands_in(tmp_path / "index.rst", text, "rst") if parse_command(c.text)]
    assert (command.line, command.text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Example::\n\n    import os\n    os.system('torchrun a.py')\n",
        ".. note::\n\n   torchrun a.py\n",  # prose in a note, not a code block
        ".. code-block:: python\n\n   launcher = 'torchrun a.py'\n",
        "Title\n::::::\n\n    torchrun a.py\n",  # a title underline of colons is no literal block
        "   torchrun a.py\n",
    ],
)
def test_rst_text_that_is_not_a_shell_block(tmp_path: Path, text: str) -> None:
    assert texts(tmp_path / "index.rst", text, "rst") == []


def test_yaml_container_command_and_args(tmp_path: Path) -> None:
    text = "containers:\n- name: a\n  command: [bash, -c]\n  args: ['cd src && torchrun --nproc_per_node 8 train.py']\n"
    [command] = [c for c in commands_in(tmp_path / "job.yaml", text, "yaml") if c.text.startswith("torchrun")]
    assert command.cwd == tmp_path / "src" and command.line == 4
    text = 'spec:\n  command: ["torchrun"]\n  args: ["--nproc_per_node", 8, "train.py"]\n'
    assert [(c.line, c.text) for c in commands_in(tmp_path / "job.yaml", text, "yaml")] == [
        (2, "torchrun --nproc_per_node 8 train.py")
    ]


def test_yaml_template_values_are_unknown_words(tmp_path: Path) -> None:
    text = "steps:\n  - run: torchrun --nproc_per_node ${{ matrix.gpus }} train.py --config ${{ inputs.cfg }}.yaml\n"
    [command] = commands_in(tmp_path / "ci.yml", text, "yaml")
    launch = parse_command(command.text)
    assert launch is not None and launch.target == "train.py" and launch.option("--nproc_per_node") == "${TEMPLATED}"
    text = "{% for n in [2, 8] %}\njob:\n  run: torchrun {{ args }} train.py\n{% endfor %}\n"
    [command] = commands_in(tmp_path / "ci.yml", text, "yaml", [])
    launch = parse_command(command.text)
    assert launch is not None and launch.target == "train.py"


def test_yaml_that_does_not_parse_is_read_line_by_line_with_a_problem(tmp_path: Path) -> None:
    text = (
        "image: {{ image }}\n"
        "steps:\n"
        "  - run: torchrun --nproc_per_node 2 a.py\n"
        "  - script: |\n"
        "      cd sub\n"
        "      deepspeed b.py\n"
        "  - command: >\n"
        "      accelerate launch\n"
        "      c.py\n"
        "  - script:\n"
        "      - 'pip install .'\n"
        "      - torchrun d.py\n"
        "  - cmd: [torchrun, e.py]\n"
        "bad: [\n"
    )
    problems: list[str] = []
    commands = commands_in(tmp_path / "ci.yml", text, "yaml", problems)
    assert [(c.line, c.text) for c in commands if parse_command(c.text)] == [
        (3, "torchrun --nproc_per_node 2 a.py"),
        (6, "deepspeed b.py"),
        (8, "accelerate launch c.py"),
        (12, "torchrun d.py"),
        (13, "torchrun e.py"),
    ]
    assert [c.cwd for c in commands if c.text == "deepspeed b.py"] == [tmp_path / "sub"]
    assert len(problems) == 1 and "YAML does not parse" in problems[0]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            'deepspeed_args="--master_port=11000"\ndeepspeed ${deepspeed_args} examples/finetune.py',
            "deepspeed --master_port=11000 examples/finetune.py",
        ),
        ("ARGS='--nproc_per_node 8 --nnodes 1'\ntorchrun $ARGS a.py", "torchrun --nproc_per_node 8 --nnodes 1 a.py"),
        (
            'N=2\nARGS="--nproc_per_node $N"\nARGS+=" --nnodes 1"\ntorchrun $ARGS a.py',
            "torchrun --nproc_per_node 2 --nnodes 1 a.py",
        ),
        ('ARGS="\n  --nproc_per_node 4 \\\n  --nnodes 1\n"\ntorchrun $ARGS a.py', "torchrun --nproc_per_node 4 --nnodes 1 a.py"),
        (
            'A=(\n  --nproc_per_node 4  # GPUs\n  --nnodes=1\n)\ntorchrun "${A[@]}" a.py',
            "torchrun --nproc_per_node 4 --nnodes=1 a.py",
        ),
        (
            "A=(--multi_gpu)\nA+=(--num_processes 2)\naccelerate launch ${A[*]} a.py",
            "accelerate launch --multi_gpu --num_processes 2 a.py",
        ),
        ("N=8\nN=$(nproc)\ntorchrun --nproc_per_node $N a.py", "torchrun --nproc_per_node $N a.py"),
        ("N=8\nN=$(nvidia-smi -L | wc -l)\ntorchrun --nproc_per_node $N a.py", "torchrun --nproc_per_node $N a.py"),
        ('N=8\nN="$(nproc)"\ntorchrun --nproc_per_node $N a.py', "torchrun --nproc_per_node $N a.py"),
        ("torchrun --nproc_per_node ${N:=4} a.py", "torchrun --nproc_per_node 4 a.py"),
        ("CMD='torchrun --nproc_per_node 2 a.py'\n$CMD", "torchrun --nproc_per_node 2 a.py"),
        ("bash -c 'N=2; torchrun --nproc_per_node $N a.py'", "torchrun --nproc_per_node 2 a.py"),
        ('X="a b" torchrun c.py', 'X="a b" torchrun c.py'),  # an environment prefix, not an assignment
        ('CMD="torchrun --nproc_per_node 2 a.py"\neval "$CMD"', "torchrun --nproc_per_node 2 a.py"),
        ("srun --ntasks 8 bash -c 'python a.py --lr 1'", "srun --ntasks 8 python a.py --lr 1"),
        ('docker run --gpus all img bash -lc "cd /w && torchrun a.py"', "torchrun a.py"),
    ],
)
def test_shell_variables_as_real_scripts_use_them(tmp_path: Path, script: str, expected: str) -> None:
    assert texts(tmp_path / "run.sh", script + "\n", "shell") == [expected]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # The script and its arguments in a variable, then the launcher (SLURM jobs that build their command).
        (
            'CMD="scripts/run.py --config recipes/x.yaml"\nsrun accelerate launch --config_file z3.yaml $CMD',
            "srun accelerate launch --config_file z3.yaml scripts/run.py --config recipes/x.yaml",
        ),
        (
            "export CMD='scripts/run.py --config x.yaml'\naccelerate launch --config_file z3.yaml ${CMD}",
            "accelerate launch --config_file z3.yaml scripts/run.py --config x.yaml",
        ),
        (
            'export CMD=" \\\n    scripts/run.py --config x.yaml\n    "\nL="accelerate launch --config_file z3.yaml"\n'
            'srun --jobid 1 bash -c "$L $CMD" 2>&1',
            "srun --jobid 1 accelerate launch --config_file z3.yaml scripts/run.py --config x.yaml",
        ),
        ('L="torchrun --nproc_per_node 2"\nbash -c "$L a.py" > log.txt', "torchrun --nproc_per_node 2 a.py"),
        ('CMD=a.py\nbash -c "torchrun $CMD" >>log 2>/dev/null', "torchrun a.py"),
        # Set in the branches of an `if`: known only where every way through it agrees.
        (
            'if [ "$X" = 1 ]; then\n  CMD=a.py\nelse\n  CMD=b.py\nfi\ntorchrun --nproc_per_node 2 $CMD',
            "torchrun --nproc_per_node 2 $CMD",
        ),
        ('CMD=a.py\nif [ -n "$X" ]; then CMD=b.py; fi\ntorchrun $CMD', "torchrun $CMD"),
        ('if [ -n "$X" ]; then CMD=a.py; else CMD=a.py; fi\ntorchrun $CMD', "torchrun a.py"),
        ('CMD=a.py\nif [ -n "$X" ]; then N=2; fi\ntorchrun $CMD', "torchrun a.py"),
        # The test of a default: set only where it was unset, as `N=${N:-8}`.
        ('if [ -z "$N" ]; then\n  N=8\nfi\ntorchrun --nproc_per_node $N a.py', "torchrun --nproc_per_node 8 a.py"),
        ("if [[ -z ${N} ]]; then export N=8; fi\ntorchrun --nproc_per_node $N a.py", "torchrun --nproc_per_node 8 a.py"),
        ('N=4\nif [ -z "$N" ]; then N=8; fi\ntorchrun --nproc_per_node $N a.py', "torchrun --nproc_per_node 4 a.py"),
        ('if [ -z "$N" ]; then N=8; else N=2; fi\ntorchrun --nproc_per_node $N a.py', "torchrun --nproc_per_node $N a.py"),
        ('N=$1\nif [ "$N" == "" ]; then\n    N=8\nfi\ntorchrun --nproc_per_node $N a.py', "torchrun --nproc_per_node 8 a.py"),
        ('if [ -n "$X" ]; then\n  CMD=b.py\n  torchrun $CMD\nfi', "torchrun b.py"),  # inside its branch
        (
            'if [ "$A" ]; then\n  if [ "$B" ]; then C=x.py; fi\nelif [ "$D" ]; then\n  C=y.py\nelse\n  C=z.py\nfi\ntorchrun $C',
            "torchrun $C",
        ),
    ],
)
def test_a_launch_built_from_variables_resolves_as_the_shell_would(tmp_path: Path, script: str, expected: str) -> None:
    assert [text for text in texts(tmp_path / "run.sh", script + "\n", "shell") if "torchrun" in text or "launch" in text] == [
        expected
    ]


def test_an_unknown_variable_before_the_script_hides_options_not_the_launch() -> None:
    launch = parse_command("torchrun $DISTRIBUTED_ARGS train.py --bf16 True")
    assert launch is not None and launch.target == "train.py" and launch.script_args == {"--bf16": "True"}
    launch = parse_command('deepspeed "${HOST_ARGS[@]}" --master_port 1 train.py')
    assert launch is not None and launch.target == "train.py" and launch.option("--master_port") == "1"
    launch = parse_command("torchrun --nproc_per_node 2 $SCRIPT --lr 1")
    assert launch is not None and launch.target is None, "an unknown script stays unknown"


@pytest.mark.parametrize(
    ("script", "target"),
    [
        ('SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)\ntorchrun --nproc_per_node 2 $SCRIPT_DIR/train.py', "scripts/train.py"),
        ('ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"\ntorchrun $ROOT/train.py', "train.py"),
        ("HERE=$(dirname $(readlink -f $0))\ncd $HERE/..\ntorchrun sub/train.py", "sub/train.py"),
        ("cd ..\nTOP=$(pwd)\ntorchrun ${TOP}/train.py", "train.py"),
        ("torchrun --nproc_per_node ${1:-8} ${2:-train.py}", "scripts/train.py"),
        ('PYTHONPATH="$(dirname $0)/..":$PYTHONPATH \\\n  torchrun $(dirname "$0")/train.py ${@:3}', "scripts/train.py"),
        ("UP=$(dirname $0)/..\ntorchrun $UP/train.py", "train.py"),
        ('python "$(dirname "$0")/train.py" "$OUT"', "scripts/train.py"),
    ],
)
def test_folders_a_script_computes(tmp_path: Path, script: str, target: str) -> None:
    [command] = commands_in(tmp_path / "scripts" / "run.sh", script + "\n", "shell")
    launch = parse_command(command.text)
    assert launch is not None and launch.target is not None
    assert (command.cwd / launch.target).resolve() == (tmp_path / target).resolve()


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            "for cfg in zero2 zero3; do\n  accelerate launch --config_file configs/$cfg.yaml train.py\ndone",
            [
                "accelerate launch --config_file configs/zero2.yaml train.py",
                "accelerate launch --config_file configs/zero3.yaml train.py",
            ],
        ),
        (
            "for n in 1 8\ndo\n  torchrun --nproc_per_node $n a.py\ndone\ntorchrun b.py",
            ["torchrun --nproc_per_node 1 a.py", "torchrun --nproc_per_node 8 a.py", "torchrun b.py"],
        ),
        (
            "for n in 2 4; do torchrun --nproc_per_node $n a.py; done",
            ["torchrun --nproc_per_node 2 a.py", "torchrun --nproc_per_node 4 a.py"],
        ),
        ("N=8\nfor N in $GPUS; do\n  torchrun --nproc_per_node $N a.py\ndone", ["torchrun --nproc_per_node $N a.py"]),
        (
            "for a in x y; do\n  for b in 1; do\n    torchrun --nproc_per_node $b $a.py\n  done\ndone",
            ["torchrun --nproc_per_node 1 x.py", "torchrun --nproc_per_node 1 y.py"],
        ),
    ],
)
def test_loops_over_written_words_run_once_per_word(tmp_path: Path, script: str, expected: list[str]) -> None:
    assert texts(tmp_path / "run.sh", script + "\n", "shell") == expected


def test_a_loop_keeps_its_lines(tmp_path: Path) -> None:
    commands = commands_in(tmp_path / "run.sh", "# x\nfor s in 1 2; do\n  echo $s\n  torchrun a.py\ndone\n", "shell")
    assert [(c.line, c.text) for c in commands if c.text.startswith("torchrun")] == [(4, "torchrun a.py"), (4, "torchrun a.py")]


def test_nested_loops_do_not_multiply_without_end(tmp_path: Path) -> None:
    words = " ".join(str(n) for n in range(16))
    script = "".join(f"for v{depth} in {words}; do\n" for depth in range(6)) + "torchrun a.py\n" + "done\n" * 6
    commands = commands_in(tmp_path / "run.sh", script, "shell")
    assert 1 <= len(commands) <= 5000


@pytest.mark.parametrize(
    ("text", "target", "kept"),
    [
        # `${#GPUS[@]}` is the length of an array, not a comment: the script and its arguments stay.
        ("torchrun --nproc_per_node ${#GPUS[@]} train.py --deepspeed configs/z3.json", "train.py", "configs/z3.json"),
        ("torchrun train.py --deepspeed z3.json  # the ZeRO-3 run", "train.py", "z3.json"),
        ('python x.py --deepspeed "a # b.json"', "x.py", "a # b.json"),
    ],
)
def test_a_hash_starts_a_comment_only_at_the_start_of_a_word(text: str, target: str, kept: str) -> None:
    launch = parse_command(text)
    assert launch is not None and launch.target == target
    assert launch.script_arg("--deepspeed") == kept


@pytest.mark.parametrize(
    "text",
    [
        "torchrun --nproc_per_node 8 train.py --lr 1e-5",
        "accelerate\tlaunch\r\n  train.py  # a comment",
        "deepspeed ${#GPUS[@]} train.py #note",
        "python\x0btrain.py\xa0--x",  # whitespace shlex does not split on
        "a=b ./run.sh $(pwd)/x.py; echo done && true | cat",
        "",
    ],
)
def test_a_command_without_quotes_splits_as_shlex_would(text: str) -> None:
    """Commands without quotes or backslashes skip shlex: the words must be the same."""
    import shlex

    words = shlex.split(text, comments=False)
    comment = next((i for i, word in enumerate(words) if word.startswith("#")), None)
    assert split(text) == (words if comment is None else words[:comment])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("torchrun --master_port=$(( RANDOM + 1000 )) run.py", ["torchrun", "--master_port=$(( RANDOM + 1000 ))", "run.py"]),
        ("a=b ./run.sh $(dirname $0)/x.py; echo", ["a=b", "./run.sh", "$(dirname $0)/x.py;", "echo"]),
        ("python x.py --n $(( (A + B) * 2 )) --m 1", ["python", "x.py", "--n", "$(( (A + B) * 2 ))", "--m", "1"]),
        # Quotes inside a substitution are its own; the ones around it are the shell's.
        (
            'torchrun "$(cd "$(dirname "$0")" && pwd)"/t.py --a "b c"',
            ["torchrun", '$(cd "$(dirname "$0")" && pwd)/t.py', "--a", "b c"],
        ),
        ('python x.py --name "$(date +%F) $(echo a b) run"', ["python", "x.py", "--name", "$(date +%F) $(echo a b) run"]),
        ("python x.py --s $(echo ')' b)", ["python", "x.py", "--s", "$(echo ')' b)"]),
        # Single quotes make it text; one never closed is split as before.
        ("echo '$(a b)' x", ["echo", "$(a b)", "x"]),
        ("python x.py $(never closed", ["python", "x.py", "$(never", "closed"]),
    ],
)
def test_a_substitution_is_part_of_one_word_spaces_and_all(text: str, words: list[str]) -> None:
    assert split(text) == words


def test_a_computed_word_before_the_script_is_unknown_as_an_unset_variable_is() -> None:
    launch = parse_command("torchrun --nproc_per_node 2 --master_port=$(( RANDOM + 1000 )) train.py --bf16 True")
    assert launch is not None and launch.target == "train.py" and launch.option("--master_port") == "$(( RANDOM + 1000 ))"
    launch = parse_command("torchrun $(get_launch_args a b) train.py --bf16 True")
    assert launch is not None and launch.target == "train.py" and launch.script_args == {"--bf16": "True"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The body runs at each call, its words as "$@" and $1, said at the call's line.
        (
            'run() {\n  torchrun --nproc_per_node 4 "$@"\n}\nrun train.py --lr 1\n',
            [(4, "torchrun --nproc_per_node 4 train.py --lr 1")],
        ),
        (
            "go() { deepspeed $1 --deepspeed ds.json; }\ngo a.py\ngo b.py\n",
            [(2, "deepspeed a.py --deepspeed ds.json"), (3, "deepspeed b.py --deepspeed ds.json")],
        ),
        ("function launch\n{\n    accelerate launch $@\n}\nlaunch x.py\n", [(5, "accelerate launch x.py")]),
        ('launch() { torchrun "$@"; }\nwrap() { launch "$@" --bf16; }\nwrap t.py\n', [(3, "torchrun t.py --bf16")]),
        # Never called here (another script may source it): read as written, as before functions were.
        ("train() {\n  torchrun --nproc_per_node 2 train.py\n}\n", [(2, "torchrun --nproc_per_node 2 train.py")]),
        # Calling itself, or each other ten times over, ends.
        ("f() { f; torchrun x.py; }\nf\n", [(2, "torchrun x.py")] * 8),
    ],
)
def test_shell_functions(tmp_path: Path, text: str, expected: list[tuple[int, str]]) -> None:
    assert [(c.line, c.text) for c in commands_in(tmp_path / "run.sh", text, "shell")] == expected


def test_functions_that_call_each_other_many_times_end(tmp_path: Path) -> None:
    names = [f"f{i}" for i in range(10)]
    text = "".join(f"{name}() {{ {'; '.join([following] * 10)}; }}\n" for name, following in zip(names, names[1:], strict=False))
    text += "f9() { torchrun x.py; }\nf0\n"
    assert len(commands_in(tmp_path / "run.sh", text, "shell")) <= 2000  # ten to the ninth, were each call run


def test_positional_parameters_expand_only_inside_a_call() -> None:
    assert expand("torchrun $1 $@", {}) == "torchrun $1 $@"
    assert expand('torchrun "$@"', {"@": "a.py '--x=1 2'", "1": "a.py"}) == "torchrun a.py '--x=1 2'"


def test_yaml_commands_are_found_in_one_pass_over_the_file(tmp_path: Path) -> None:
    from placement_lint.context import launch_files

    class CountedText(str):
        """Counts the characters the finder's searches go over (a search from the top for every
        command went over the file once a command: 18 s for 20,000 jobs)."""

        scanned = 0

        def find(self, sub: str, start: int = 0, end: int | None = None) -> int:  # type: ignore[override]
            found = str.find(self, sub, start, len(self) if end is None else end)
            CountedText.scanned += (found + len(sub) if found >= 0 else (len(self) if end is None else end)) - start
            return found

    jobs = 2000
    text = CountedText("---\n".join(f"run: torchrun --nproc_per_node 2 job{i}.py\n" for i in range(jobs)))
    finder = launch_files._LineFinder(text)
    assert [finder.line_of(f"torchrun --nproc_per_node 2 job{i}.py") for i in range(jobs)] == list(range(1, 2 * jobs, 2))
    assert CountedText.scanned < 2 * len(text)
    assert finder.line_of("torchrun --nproc_per_node 2 job3.py") == 7, "a text found once is on the line found then"
    assert finder.line_of("torchrun --nproc_per_node 2 job0.py") == 1
    assert finder.first_line_of("torchrun") == 1, "a word is where it is first"
    assert finder.line_of("not there") == 0


def test_yaml_commands_out_of_order_and_repeated(tmp_path: Path) -> None:
    text = "a:\n  run: torchrun x.py\nb:\n  run: echo hi\nc:\n  run: torchrun x.py\nd:\n  command: [torchrun, y.py]\n"
    assert [(c.line, c.text) for c in commands_in(tmp_path / "ci.yml", text, "yaml")] == [
        (2, "torchrun x.py"),
        (4, "echo hi"),
        (2, "torchrun x.py"),
        (2, "torchrun y.py"),
    ]


@pytest.mark.parametrize(
    ("command", "several"),
    [
        ("srun --ntasks=1 python train.py", False),
        ("srun -n1 python train.py", False),
        ("srun -N 1 --ntasks-per-node 1 python train.py", False),
        ("srun --ntasks-per-node=8 python train.py", True),
        ("srun --ntasks-per-node=1 python train.py", True),  # as many tasks as the job has nodes
        ("srun python train.py", True),
    ],
)
def test_srun_of_one_task_starts_one_process(command: str, several: bool) -> None:
    launch = parse_command(command)
    assert launch is not None and (launch.wrapped_by == "srun") is several


@pytest.mark.parametrize(
    ("command", "processes", "gpus_each"),
    [
        ("deepspeed train.py", "several", "several"),
        ("CUDA_VISIBLE_DEVICES=0 deepspeed train.py", "one", "one"),  # runner.py: --include localhost:0
        ("CUDA_VISIBLE_DEVICES=2,3 deepspeed train.py", "several", "several"),  # each sees the node's two
        ("CUDA_VISIBLE_DEVICES=0 deepspeed --num_gpus 2 train.py", "several", "several"),  # the variable is dropped
        ("CUDA_VISIBLE_DEVICES=0,1 deepspeed --include localhost:1 train.py", "one", "one"),
        ("deepspeed --include=localhost:1 train.py", "one", "one"),
        ("deepspeed -i localhost:0,1 train.py", "several", "several"),
        ("deepspeed --include worker-0:0@worker-1:0 train.py", "several", "several"),
        ("deepspeed --num_gpus=1 train.py", "one", "one"),
        ("deepspeed --num_accelerators 1 train.py", "one", "one"),
        ("deepspeed --hostfile hosts --num_gpus 1 train.py", "several", "one"),  # one on each host of the file
        ("deepspeed --hostfile hosts --num_nodes 1 --num_gpus 1 train.py", "one", "one"),
        ("deepspeed --num_gpus $NGPU train.py", "several", "several"),
    ],
)
def test_the_deepspeed_launcher_counts_processes_and_gpus_as_its_runner_does(
    command: str, processes: str, gpus_each: str
) -> None:
    launch = parse_command(command)
    assert launch is not None
    env = launch.env
    assert ("one" if one_process(launch, env) else "several") == processes
    assert ("one" if one_gpu(launch, env) else "several") == gpus_each


def test_a_batch_script_of_one_task_makes_its_bare_srun_one_task() -> None:
    script = "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\nsrun python train.py\nsrun -n 4 python eval.py\n"
    texts = [command.text for command in commands_in(Path("/r/job.sbatch"), script, "shell")]
    assert texts == ["srun --ntasks=1 python train.py", "srun -n 4 python eval.py"]


_CASE_SCRIPT = """#!/bin/bash
STAGE=${1:-2}
case $STAGE in
  2) CONFIG=ds_zero2.json ;;
  3|zero3)
    CONFIG=ds_zero3.json
    ;;
  *) CONFIG=ds_other.json ;;
esac
deepspeed train.py --deepspeed $CONFIG
"""


def test_a_case_on_a_known_word_runs_the_branch_it_takes() -> None:
    texts = [command.text for command in commands_in(Path("/r/run.sh"), _CASE_SCRIPT, "shell")]
    assert texts[-1] == "deepspeed train.py --deepspeed ds_zero2.json"


def test_a_case_on_a_word_known_only_at_run_time_reads_every_line_as_before() -> None:
    script = _CASE_SCRIPT.replace("STAGE=${1:-2}\n", "").replace("$STAGE", "$(cat stage)")
    texts = [command.text for command in commands_in(Path("/r/run.sh"), script, "shell")]
    # As before: the last line that is an assignment alone wins (`*) CONFIG=...` is not one).
    assert texts[-1] == "deepspeed train.py --deepspeed ds_zero3.json"


def test_a_script_run_with_arguments_is_read_with_them_at_the_call(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text(_CASE_SCRIPT)
    doc = tmp_path / "README.md"
    text = "```bash\nbash scripts/run.sh zero3\nbash scripts/run.sh\n./scripts/run.sh 2\n```\n"
    found = [(command.source.name, command.line, command.text) for command in commands_in(doc, text, "markdown")]
    assert ("README.md", 2, "deepspeed train.py --deepspeed ds_zero3.json") in found
    assert ("README.md", 4, "deepspeed train.py --deepspeed ds_zero2.json") in found
    assert not any(line == 3 and "deepspeed" in launched for _, line, launched in found)  # no arguments: read on its own


def test_a_script_that_shifts_its_arguments_in_an_option_loop_is_read_with_them(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text(
        'while [[ "$1" != "" ]]; do\n  case $1 in\n    -c) shift; CONFIG=$1 ;;\n  esac\n  shift\ndone\ndeepspeed train.py --deepspeed $CONFIG\n'
    )
    found = [command.text for command in commands_in(tmp_path / "go.sh", "bash run.sh -c ds_zero3.json\n", "shell")]
    assert found == ["deepspeed train.py --deepspeed ds_zero3.json", "bash run.sh -c ds_zero3.json"]


def test_a_script_that_shifts_its_arguments_outside_an_option_loop_is_not_read_with_them(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("MODE=$1\nshift\nCONFIG=$1\ndeepspeed train.py --deepspeed $CONFIG\n")
    found = [command.text for command in commands_in(tmp_path / "go.sh", "bash run.sh sft ds_zero3.json\n", "shell")]
    assert found == ["bash run.sh sft ds_zero3.json"]


def test_what_a_called_script_exports_stays_with_its_commands(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("export CUDA_VISIBLE_DEVICES=0\npython train.py --deepspeed $1\n")
    found = commands_in(tmp_path / "go.sh", "export NCCL_DEBUG=INFO\nbash run.sh ds.json\n", "shell")
    assert [(command.text, dict(command.env)) for command in found if "python" in command.text] == [
        ("python train.py --deepspeed ds.json", {"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0"})
    ]


@hypothesis.settings(max_examples=3000, deadline=None)
@hypothesis.given(hypothesis.strategies.text(alphabet="ab '\"\\\t\n\r#$=é", max_size=30))
def test_shell_words_split_as_shlex_does(text: str) -> None:
    """The regular-expression split gives shlex's words, and fails where shlex fails."""
    try:
        expected: list[str] | str = shlex.split(text, comments=False)
    except ValueError as error:
        expected = str(error)
    try:
        got: list[str] | str = shell_words(text)
    except ValueError as error:
        got = str(error)
    assert got == expected


def sourced_commands(root: Path, script: str, text: str) -> list[CommandLine]:
    path = root / script
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return commands_in(path, text, "shell", None, SourcedFiles(root.resolve()))


def test_a_sourced_script_sets_the_variables_and_exports_of_the_script_that_sources_it(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "args.sh").write_text(
        'export LAUNCH="torchrun --nproc_per_node 8 -m pkg.train"\nBASE="--output_dir out"\nexport ACCELERATE_USE_FSDP=true\n'
    )
    # Written to be run from the top (`bash scripts/run.sh`): the sourced path is found from the folder above.
    [command] = sourced_commands(tmp_path, "scripts/run.sh", 'source scripts/args.sh\neval "$LAUNCH" "$BASE"\n')
    assert command.text == "torchrun --nproc_per_node 8 -m pkg.train --output_dir out"
    assert command.line == 2
    assert dict(command.env) == {"LAUNCH": "torchrun --nproc_per_node 8 -m pkg.train", "ACCELERATE_USE_FSDP": "true"}
    # `.` is `source`; from the script's own folder; a variable set after it wins.
    [command] = sourced_commands(tmp_path, "scripts/run2.sh", '. ./args.sh\nBASE="--output_dir mine"\n$LAUNCH $BASE\n')
    assert command.text == "torchrun --nproc_per_node 8 -m pkg.train --output_dir mine"


def test_a_sourced_script_sees_the_variables_set_before_it(tmp_path: Path) -> None:
    (tmp_path / "common.sh").write_text('CMD="deepspeed --num_gpus $GPUS train.py"\n')
    [command] = sourced_commands(tmp_path, "run.sh", "GPUS=4\nsource common.sh\n${CMD} --deepspeed ds.json\n")
    assert command.text == "deepspeed --num_gpus 4 train.py --deepspeed ds.json"


def test_source_reads_only_repository_files_within_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside.sh"
    outside.write_text('CMD="torchrun train.py"\n')
    root = tmp_path / "repo"
    (root / "big.sh").parent.mkdir()
    (root / "big.sh").write_text('CMD="torchrun train.py"\n')
    monkeypatch.setattr("placement_lint.context.launch_files.MAX_LAUNCHER_BYTES", 10)
    for name in (str(outside), "../outside.sh", "big.sh", "missing.sh", "$DIR/x.sh", "~/env.sh"):
        assert [c.text for c in sourced_commands(root, "run.sh", f"source {name}\n$CMD\n")] == ["$CMD"], name


def test_source_without_the_repository_reads_nothing(tmp_path: Path) -> None:
    (tmp_path / "args.sh").write_text('CMD="torchrun train.py"\n')
    assert [c.text for c in commands_in(tmp_path / "run.sh", "source args.sh\n$CMD\n", "shell")] == ["$CMD"]


def test_scripts_that_source_each_other_are_read_once_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.sh").write_text('source b.sh\nA="torchrun"\n')
    (tmp_path / "b.sh").write_text('source a.sh\nsource b.sh\nB="train.py"\n')
    read: list[str] = []
    real = launch_files._small_text
    monkeypatch.setattr(launch_files, "_small_text", lambda path: read.append(path.name) or real(path))
    commands = sourced_commands(tmp_path, "run.sh", "source a.sh\nsource a.sh\n$A $B\n")
    assert [c.text for c in commands] == ["torchrun train.py"]
    assert sorted(read) == ["a.sh", "b.sh"], "each file is read from disk once a run"


def test_a_script_sourced_again_with_the_same_variables_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "env.sh").write_text("case $SIZE in\n  13b) NODES=2 ;;\n  *) NODES=1 ;;\nesac\nexport NCCL_DEBUG=INFO\n")
    runs: list[int] = []
    real = launch_files._shell

    def counted(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if path.name == "env.sh":
            runs.append(1)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(launch_files, "_shell", counted)
    script = "for lr in 1 2 3 4 5; do\n  SIZE=7b\n  source env.sh\n  torchrun --nnodes $NODES t.py --lr $lr\ndone\nSIZE=13b\nsource env.sh\ntorchrun --nnodes $NODES t.py\n"
    commands = sourced_commands(tmp_path, "run.sh", script)
    assert [c.text for c in commands] == [*(f"torchrun --nnodes 1 t.py --lr {lr}" for lr in "12345"), "torchrun --nnodes 2 t.py"]
    assert all(dict(c.env) == {"NCCL_DEBUG": "INFO"} for c in commands)
    # The first pass, the second (which meets what the first set), and the 13b one: the later passes
    # differ from the second only in `lr`, a name env.sh does not hold.
    assert len(runs) == 3


def test_a_sourced_scripts_own_commands_are_not_said_at_the_source_line(tmp_path: Path) -> None:
    (tmp_path / "setup.sh").write_text('torchrun setup_data.py\nbash prepare.sh 4 3\nCMD="torchrun train.py"\n')
    (tmp_path / "prepare.sh").write_text("torchrun prepare.py\n")
    assert [c.text for c in sourced_commands(tmp_path, "run.sh", "source setup.sh\n$CMD\n")] == ["torchrun train.py"]


def test_a_shell_script_that_only_sources_may_launch() -> None:
    assert may_launch(b"#!/bin/bash\nsource args.sh\neval $HEADER\n", "shell")
    assert may_launch(b"set -e; . ./env.sh\n$CMD\n", "shell")
    assert not may_launch(b"#!/bin/bash\necho done\n", "shell")
    assert not may_launch(b"Open source projects. See the docs.\n", "markdown")


@pytest.mark.parametrize(
    ("command", "processes"),
    [
        # torch/distributed/run.py: --nproc-per-node defaults to "1" and --nnodes to "1:1"
        ("torchrun train.py", "one"),
        ("python -m torch.distributed.run train.py", "one"),
        ("torchrun --standalone --nnodes 1 train.py", "one"),
        ("torchrun --nproc_per_node 1 train.py", "one"),
        ("torchrun --nproc-per-node=2 train.py", "several"),
        ("torchrun --nproc_per_node gpu train.py", "several"),
        ("torchrun --nproc_per_node $NGPU train.py", "several"),
        ("torchrun --nnodes 2 train.py", "several"),  # one on each node
        ("PET_NPROC_PER_NODE=4 torchrun train.py", "several"),  # the option's environment variable
        ("PET_NNODES=2 torchrun train.py", "several"),
        ("torchrun $DISTRIBUTED_ARGS train.py", "several"),  # the computed words may set the count
        ("torchrun $(launch_args 2) train.py", "several"),
    ],
)
def test_torchrun_counts_processes_with_its_defaults(command: str, processes: str) -> None:
    launch = parse_command(command)
    assert launch is not None and launch.launcher == "torchrun"
    assert ("one" if one_process(launch, launch.env) else "several") == processes
