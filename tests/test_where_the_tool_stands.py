"""Where the tool stands (issue 15, items 2 and 4): console scripts read as data, the root a file
checked alone finds (a downloaded archive, a monorepo, pre-commit naming one file), and IPython syntax
in notebooks. The fixture repositories live in tests/fixtures/launch/ (their goldens are checked by
test_launch_context.py); here they are driven through the command line, one file at a time."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_lint import discover
from placement_lint.cli import main
from placement_lint.context.commands import parse_command
from placement_lint.context.module_graph import ModuleGraph
from placement_lint.context.projects import Projects
from placement_lint.discover import repository_root
from placement_lint.notebook import read_notebook

LAUNCH = Path(__file__).parent / "fixtures" / "launch"
FUZZ_EXAMPLES = int(os.environ.get("PLACEMENT_LINT_FUZZ_EXAMPLES", "25"))


def copy_case(name: str, tmp_path: Path, git: bool) -> Path:
    root = tmp_path / name
    shutil.copytree(LAUNCH / name, root, ignore=shutil.ignore_patterns("expected.txt", "warnings.txt"))
    if git:
        (root / ".git").mkdir()
    return root


def cli(monkeypatch: pytest.MonkeyPatch, cwd: Path, *args: str) -> tuple[int, list[str]]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, [*args[:1], "--no-cache", "--output-format", "concise", *args[1:]])
    return result.exit_code, [line for line in result.output.splitlines() if ": DPL" in line]


def context(monkeypatch: pytest.MonkeyPatch, cwd: Path, *paths: str) -> str:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["context", *paths])
    assert result.exit_code == 0, result.output
    return result.output


# -- a downloaded archive: no .git, no pyproject.toml, a requirements.txt ---------------------------


def test_an_archive_file_checked_alone_sees_the_launches_a_check_from_the_top_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_case("bad_archive_requirements", tmp_path, git=False)
    _, from_top = cli(monkeypatch, root, "check", ".")
    assert [line.split(" ")[1] for line in from_top] == ["DPL008", "DPL001"]
    assert all(line.startswith("scripts/dpo.py:") for line in from_top)
    assert cli(monkeypatch, root, "check", "scripts/dpo.py") == (1, from_top)
    assert cli(monkeypatch, root, "check", "scripts") == (1, from_top)
    monkeypatch.chdir(root)
    editor = CliRunner().invoke(
        main,
        ["check", "--output-format", "concise", "--stdin-filename", "scripts/dpo.py", "-"],
        input=(root / "scripts" / "dpo.py").read_text(),
    )
    assert [line for line in editor.output.splitlines() if ": DPL" in line] == from_top, "an editor's buffer too"
    # From inside scripts/: the same findings, named from there.
    code, inside = cli(monkeypatch, root / "scripts", "check", "dpo.py")
    assert code == 1
    assert [line.removeprefix("scripts/").split(" ")[:2] for line in from_top] == [line.split(" ")[:2] for line in inside]
    assert "README.md:6 (accelerate launch" in context(monkeypatch, root / "scripts", "dpo.py")
    shown = context(monkeypatch, root, "scripts/dpo.py")
    assert (
        "scripts/dpo.py: DeepSpeed ZeRO-3" in shown and "README.md:6 (accelerate launch --config_file configs/zero3.yaml" in shown
    )


def test_a_nested_requirements_file_does_not_cut_the_archive_in_two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/chat/ has its own requirements.txt: the archive's top is still the outermost marker."""
    root = copy_case("bad_archive_requirements", tmp_path, git=False)
    assert repository_root(root / "examples" / "chat" / "app.py") == root.resolve()
    assert cli(monkeypatch, root / "examples" / "chat", "check", "app.py") == (0, [])


def fresh_root(start: Path) -> Path | None:
    """repository_root, forgetting what earlier calls saw (this test creates markers as it goes)."""
    for cached in (discover._shared_folders, discover._nearest, discover._outermost_project, discover._names):
        cached.cache_clear()
    return repository_root(start)


def test_without_any_marker_a_file_alone_reads_only_the_launchers_beside_it(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert fresh_root(tmp_path / "a" / "b") is None
    (tmp_path / "a" / "environment.yml").write_text("name: x\n")
    assert fresh_root(tmp_path / "a" / "b") == (tmp_path / "a").resolve()
    (tmp_path / "a" / "b" / ".git").mkdir()
    assert fresh_root(tmp_path / "a" / "b") == (tmp_path / "a" / "b").resolve(), ".git wins, the nearest"


def test_the_walk_up_stops_below_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stray marker (or a dotfiles .git) in the home folder must not make a run read all of it."""
    home = tmp_path / "home"
    project = home / "Downloads" / "proj"
    project.mkdir(parents=True)
    (home / "requirements.txt").write_text("numpy\n")
    (home / ".git").mkdir()
    monkeypatch.setenv("HOME", str(home))
    try:
        assert fresh_root(project) is None
        (project / "requirements.txt").write_text("torch\n")
        assert fresh_root(project) == project.resolve()
    finally:
        monkeypatch.undo()
        fresh_root(tmp_path)


# -- a monorepo: a nested project with its own packaging ---------------------------------------------


def test_pre_commit_naming_one_file_of_a_nested_project_uses_the_repository_launches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_case("bad_monorepo_nested_project", tmp_path, git=True)
    _, whole = cli(monkeypatch, root, "check", ".")
    for name in ("services/trainer/train/sft.py", "services/trainer/src/trainer_pkg/sft.py"):
        mine = [line for line in whole if line.startswith(f"{name}:")]
        assert mine and cli(monkeypatch, root, "check", "--force-exclude", name) == (1, mine)
    assert "console script trainer-sft = trainer_pkg.sft:main in services/trainer/pyproject.toml" in context(
        monkeypatch, root, "services/trainer/src/trainer_pkg/sft.py"
    ), "a launch file at the top runs the nested project's console script"
    shown = context(monkeypatch, root, "services/trainer/train/sft.py")
    assert "train/sft.py found from the project root services/trainer" in shown
    assert "distributed_type DEEPSPEED, zero_stage 3" in shown, "the config is found from the project root too"


def test_a_nested_projects_own_file_wins_over_the_one_at_the_top(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_case("good_monorepo_nested_project", tmp_path, git=True)
    assert cli(monkeypatch, root, "check", "train/sft.py") == (0, [])
    shown = context(monkeypatch, root, "services/trainer/train/sft.py")
    assert "multi-process DDP" in shown and "found from the project root services/trainer" in shown


# -- console scripts -------------------------------------------------------------------------------


def test_one_file_behind_a_console_script_is_checked_with_its_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_case("bad_console_script_which", tmp_path, git=True)
    code, lines = cli(monkeypatch, root, "check", "src/tinytune/loading.py")
    assert code == 1 and len(lines) == 1 and "(launched by scripts/train.sh:3)" in lines[0]
    monkeypatch.chdir(root)
    full = CliRunner().invoke(main, ["check", "--no-cache", "src/tinytune/loading.py"]).output
    assert "console script tinytune-sft = tinytune.cli:main in pyproject.toml" in full
    assert cli(monkeypatch, root, "check", "src/tinytune/serving.py") == (0, []), "serve() is not what tinytune-sft runs"


@pytest.mark.parametrize(
    ("command", "launcher", "program", "wrapped_by"),
    [
        ("accelerate launch --multi_gpu $(which sft) --lr 1", "accelerate", "sft", None),
        ('accelerate launch "$(command -v sft)"', "accelerate", "sft", None),
        ("torchrun --nproc_per_node 2 --no-python sft --x 1", "torchrun", "sft", None),
        ("torchrun --no_python sft", "torchrun", "sft", None),
        ("deepspeed --num_gpus 8 --no_python sft", "deepspeed", "sft", None),
        ("python `which sft` --x 1", "python", "sft", None),
        ("srun --ntasks-per-node 8 sft --epochs 3", "python", "sft", "srun"),
        ("mpirun -np 4 sft", "python", "sft", "mpirun"),
        ("srun $(which sft)", "python", "sft", "srun"),
    ],
)
def test_a_console_script_named_by_a_launch(command: str, launcher: str, program: str, wrapped_by: str | None) -> None:
    launch = parse_command(command, {"sft"})
    assert launch is not None
    assert (launch.launcher, launch.program, launch.target, launch.wrapped_by) == (launcher, program, None, wrapped_by)
    assert launch.text == command, "the command as written, $(which ...) included"


@pytest.mark.parametrize(
    "command",
    [
        "deepspeed sft",  # deepspeed runs `python sft`: a file, not the program
        "torchrun --nproc_per_node 2 sft",
        "sft --epochs 1",  # not a console script of this repository (no programs given)
        "srun -N 2 other",
        "srun -N 2 hostname",
    ],
)
def test_a_name_that_is_no_console_script_launch(command: str) -> None:
    launch = parse_command(command)
    assert launch is None or launch.program is None


@pytest.mark.parametrize("command", ["sft --deepspeed ds.json", "$(which sft) train", "FORCE_TORCHRUN=1 sft train x.yaml"])
def test_a_console_script_run_alone_is_not_followed(command: str) -> None:
    """It may start its own launcher for some subcommands and not for others: nothing to tell which."""
    assert parse_command(command, {"sft"}) is None


def _packaging(tmp_path: Path, files: dict[str, str | bytes]) -> Projects:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return Projects(tmp_path.resolve())


def test_console_scripts_are_read_from_every_packaging_form(tmp_path: Path) -> None:
    projects = _packaging(
        tmp_path,
        {
            "pyproject.toml": '[project.scripts]\na = "pkg.a:main"\nbad = "no_colon"\n'
            '[tool.poetry.scripts]\nb = "pkg.b:run"\nc = { reference = "pkg.c:go", type = "console" }\n'
            'd = { reference = "d.sh", type = "file" }\n',
            "setup.cfg": "[options.entry_points]\nconsole_scripts =\n    e = pkg.e:main [gpu]\n",
            "setup.py": 'from setuptools import setup\nsetup(entry_points={"console_scripts": ["f=pkg.f:app.run"]})\n',
        },
    )
    scripts = projects.packaging(tmp_path.resolve()).scripts
    assert {name: (s.module, s.function) for name, s in scripts.items()} == {
        "a": ("pkg.a", "main"),
        "b": ("pkg.b", "run"),
        "c": ("pkg.c", "go"),
        "e": ("pkg.e", "main"),
        "f": ("pkg.f", "app"),
    }


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"pyproject.toml": "[project\nscripts = 1\n"}, "invalid TOML"),
        ({"pyproject.toml": b"\xff\xfe\x00[project.scripts]\x00\x00"}, "invalid TOML"),
        ({"setup.py": "from setuptools import setup\nsetup(entry_points=make())\n"}, None),  # not literal: declares nothing
        ({"setup.py": "setup(entry_points={'console_scripts': [\n"}, "cannot parse"),
        ({"setup.cfg": "console_scripts = x\n[options.entry_points\n"}, "cannot parse"),
        ({"setup.py": "entry_points = 1\n" + "x = 1\n" * 200_000}, "larger than"),
    ],
)
def test_packaging_that_cannot_be_read_declares_nothing_and_says_why(
    tmp_path: Path, files: dict[str, str | bytes], problem: str | None
) -> None:
    packaging = _packaging(tmp_path, files).packaging(tmp_path.resolve())
    assert packaging.scripts == {}
    assert [reason for _, reason in packaging.problems if problem and problem in reason] or problem is None
    assert problem is not None or packaging.problems == ()


def test_a_setup_py_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    projects = _packaging(
        tmp_path,
        {
            "setup.py": f"open({str(marker)!r}, 'w')\nfrom setuptools import setup\nsetup(entry_points={{'console_scripts': ['x = p:m']}})\n"
        },
    )
    assert list(projects.packaging(tmp_path.resolve()).scripts) == ["x"]
    assert not marker.exists()


def test_a_console_scripts_module_is_found_in_the_declared_package_folder(tmp_path: Path) -> None:
    projects = _packaging(
        tmp_path,
        {
            "pyproject.toml": '[project.scripts]\nx = "pkg.cli:main"\n[tool.setuptools.packages.find]\nwhere = ["lib"]\n',
            "lib/pkg/__init__.py": "",
            "lib/pkg/cli.py": "def main(): pass\n",
        },
    )
    script = projects.scripts_near(tmp_path.resolve())["x"]
    graph = ModuleGraph(tmp_path.resolve(), project_of=projects.root_of)
    assert projects.module_of(script, graph) == (tmp_path / "lib" / "pkg" / "cli.py").resolve()


# -- notebooks ---------------------------------------------------------------------------------------


def _notebook(*sources: str) -> bytes:
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "source": source} for source in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def test_an_automagic_cd_moves_the_notebooks_later_shell_commands() -> None:
    notebook = read_notebook(_notebook("cd repo\n!torchrun --nproc_per_node 2 train.py", "pip install -q trl"))
    commands = [(c.kind, c.text) for c in notebook.shell_commands()]
    assert commands == [("cd", "repo"), ("escape", "torchrun --nproc_per_node 2 train.py")]


@pytest.mark.parametrize(
    "source",
    [
        "time = compute(a,\n    b)",  # Python going on over the next line
        "ls -la",  # Python: ls minus la
        "cd = 3\nprint(cd)",
        "run(x)",
    ],
)
def test_python_that_starts_like_a_magic_is_left_as_python(source: str) -> None:
    notebook = read_notebook(_notebook(source))
    assert notebook.python == source + "\n"


def test_a_notebook_with_ipython_syntax_is_checked_not_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "explore.ipynb").write_bytes(
        _notebook(
            "pip install -q transformers\ncd data\nload_ext autoreload\nAutoModelForCausalLM?",
            "%%capture\nfrom transformers import AutoModelForCausalLM",
            'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\nmodel.generate()',
        )
    )
    code, lines = cli(monkeypatch, tmp_path, "check", "explore.ipynb")
    assert (code, lines) == (0, []), "parsed, not an error; one process spreading its model is right"
    (tmp_path / "ddp.ipynb").write_bytes(
        _notebook(
            "pip install -q transformers\ncd data",
            "from transformers import AutoModelForCausalLM, Trainer\nimport torch.distributed as dist\ndist.init_process_group()",
            'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\nTrainer(model=model).train()',
        )
    )
    code, lines = cli(monkeypatch, tmp_path, "check", "ddp.ipynb")
    assert code == 1 and [line.split(" ")[:3] for line in lines] == [["ddp.ipynb:cell", "3:1:62:", "DPL001"]]


# -- hostile input -----------------------------------------------------------------------------------


def test_hostile_packaging_never_crashes_never_runs_and_is_never_guessed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "executed"
    loader = 'from transformers import AutoModelForCausalLM, Trainer\n\n\ndef main():\n    Trainer(model=AutoModelForCausalLM.from_pretrained("m", device_map="auto")).train()\n'
    files: dict[str, str | bytes] = {
        ".git/HEAD": "ref: refs/heads/main\n",
        "setup.py": f"open({str(marker)!r}, 'w')\nfrom setuptools import setup\nsetup(entry_points=compute())\n",
        "setup.cfg": "[options.entry_points\nconsole_scripts = a = pkg.a:main\n",
        "pkg/__init__.py": "",
        "pkg/a.py": loader,
        "binary/pyproject.toml": b"\x00\xff\xfe[project.scripts]\nb = \x00",
        "binary/run.sh": "torchrun --nproc_per_node 2 --no-python b\n",
        "deep/pyproject.toml": "[project.scripts]\n" + "x = [" * 5000 + "\n",
        "deep/run.sh": "srun -N 2 x\n",
        "missing/pyproject.toml": '[project.scripts]\nghost = "ghost.mod:main"\nweird = "1nvalid:ref"\n',
        "missing/run.sh": "accelerate launch --multi_gpu $(which ghost)\naccelerate launch --multi_gpu $(which weird)\n",
        "run.sh": "accelerate launch --multi_gpu $(which a)\ndeepspeed --no_python a\nsrun $(which\n",
        "notebook.ipynb": json.dumps(
            {"cells": [{"cell_type": "code", "source": "cd \x00\n" + "time " * 10_000 + "(", "metadata": {}}]}
        ),
    }
    _packaging(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", "."])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1, 2) and "Traceback" not in result.output
    assert not marker.exists()
    assert ": DPL" not in result.output, "no console script could be read: nothing to guess"
    assert "no module ghost.mod in the repository" in result.output


_TEXT = st.text(st.sampled_from(list("[]{}=:\"' \n\t.,-_#$()`ab1xsrunwhich")), max_size=200)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=_TEXT)
def test_packaging_readers_and_commands_take_any_text(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    """Whatever a packaging file or a command holds: read, or named as unreadable; never an exception."""
    folder = tmp_path_factory.mktemp("packaging")
    for name in ("pyproject.toml", "setup.cfg", "setup.py"):
        (folder / name).write_text(text)
    projects = Projects(folder.resolve())
    graph = ModuleGraph(folder.resolve(), project_of=projects.root_of)
    for script in projects.packaging(folder.resolve()).scripts.values():
        projects.module_of(script, graph)
    parse_command(text, {"a", "x"})
    read_notebook(_notebook(text))


def test_a_cached_launch_context_sees_a_changed_console_script(tmp_path: Path) -> None:
    """The packaging files are inputs of the cached context: pointing the script at another function
    changes what the launch reaches, on the next warm run."""
    from placement_lint.engine import run
    from placement_lint.results import RunOptions
    from placement_lint.settings import Settings

    from helpers import CODES

    root = copy_case("bad_console_script_which", tmp_path, git=True)

    def codes_by_file() -> list[tuple[str, str]]:
        result = run([root], Settings(root=root, codes=CODES), RunOptions(), root, root / ".placement_lint_cache")
        return sorted((f.display, f.code) for f in result.findings)

    before = codes_by_file()
    assert ("src/tinytune/loading.py", "DPL001") in before
    assert codes_by_file() == before
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('tinytune-sft = "tinytune.cli:main"', 'tinytune-sft = "tinytune.cli:serve"')
    )
    after = codes_by_file()
    assert ("src/tinytune/loading.py", "DPL001") not in after and ("src/tinytune/serving.py", "DPL007") in after
