"""The module graph: where a first-party import leads, read from the repository's layout as data,
and what it costs (only the modules an import reaches are read, and only those that import something
of the repository are parsed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_lint.context.module_graph import ModuleGraph, read_layout, sys_path_additions
from placement_lint.engine import run
from placement_lint.results import RunOptions
from placement_lint.settings import Settings

from helpers import CODES, lint_repo

LOADER = 'from transformers import AutoModelForCausalLM\n\n\ndef load(n):\n    return AutoModelForCausalLM.from_pretrained(n, device_map="auto")\n'


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_setup_cfg_package_dir_and_packages_find_where(tmp_path: Path) -> None:
    write(tmp_path, {"setup.cfg": "[options]\npackage_dir =\n    =code\n[options.packages.find]\nwhere = more\n"})
    (tmp_path / "code").mkdir()
    (tmp_path / "more").mkdir()
    root = tmp_path.resolve()
    assert read_layout(root).folders == (root, root / "src", root / "code", root / "more")


def test_a_package_dir_entry_maps_one_package_to_its_folder(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.setuptools.package-dir]\nacme = "vendor/acme_src"\n',
            "vendor/acme_src/__init__.py": "",
            "vendor/acme_src/models.py": LOADER,
            "train.py": "from acme.models import load\n",
        },
    )
    graph = ModuleGraph(tmp_path)
    assert graph.resolve("acme.models", 0, tmp_path / "train.py") == (tmp_path / "vendor/acme_src/models.py").resolve()
    assert graph.resolve("acme", 0, tmp_path / "train.py") == (tmp_path / "vendor/acme_src/__init__.py").resolve()


def test_hatch_wheel_packages(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": '[tool.hatch.build.targets.wheel]\npackages = ["lib/tool"]\n', "lib/tool/__init__.py": ""})
    graph = ModuleGraph(tmp_path)
    assert graph.resolve("tool", 0, tmp_path / "x.py") == (tmp_path / "lib/tool/__init__.py").resolve()


@pytest.mark.parametrize(
    "config",
    [
        ("pyproject.toml", "[tool.setuptools\nwhere = "),  # does not parse
        ("pyproject.toml", '[tool.setuptools.packages.find]\nwhere = ["../outside", 3]\n'),  # outside the root, not a string
        ("pyproject.toml", "tool = 3\n"),
        ("setup.py", "setup(package_dir=make_dirs())\n"),  # not a literal: never evaluated
        ("setup.py", "setup(package_dir={'': \n"),  # does not parse
        ("setup.cfg", "[options\npackage_dir = =src\n"),
        ("setup.py", b"\xff\xfe\x00package_dir"),  # binary
    ],
)
def test_a_layout_it_cannot_read_is_the_default_one(tmp_path: Path, config: tuple[str, str | bytes]) -> None:
    (tmp_path / "outside").mkdir()
    root = tmp_path / "repo"
    root.mkdir()
    name, text = config
    (root / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    resolved = root.resolve()
    assert read_layout(resolved).folders == (resolved, resolved / "src")
    assert read_layout(resolved).packages == ()


def test_python_dash_m_runs_a_module_or_a_packages_main(tmp_path: Path) -> None:
    write(tmp_path, {"src/app/__init__.py": "", "src/app/__main__.py": "", "src/app/train.py": ""})
    graph = ModuleGraph(tmp_path)
    assert graph.launched_module("app.train", tmp_path) == (tmp_path / "src/app/train.py").resolve()
    assert graph.launched_module("app", tmp_path) == (tmp_path / "src/app/__main__.py").resolve()
    assert graph.launched_module("app.missing", tmp_path) is None
    assert graph.launched_module("../etc", tmp_path) is None


def test_only_modules_an_import_reaches_are_read_and_only_those_importing_the_repository_are_parsed(tmp_path: Path) -> None:
    files = {"train.py": "import helpers\nhelpers.build()\n", "helpers.py": "import loader\n", "loader.py": LOADER}
    files.update({f"unrelated_{i}.py": "import helpers\n" for i in range(20)})
    write(tmp_path, files)
    graph = ModuleGraph(tmp_path)
    train = (tmp_path / "train.py").resolve()
    helpers = graph.resolve("helpers", 0, train)
    loader = graph.resolve("loader", 0, helpers)  # type: ignore[arg-type]
    assert graph.summary(train) is not None and graph.summary(helpers) is not None  # type: ignore[arg-type]
    assert graph.summary(loader) is None  # type: ignore[arg-type]  # transformers only: read, not parsed
    assert sorted(graph.read()) == sorted([train, helpers, loader])


def test_re_exports_end_on_a_cycle(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import *\n",
            "pkg/a.py": "from .b import *\n",
            "pkg/b.py": "from .a import *\nfrom .c import thing\n",
            "pkg/c.py": "from . import a\n\n\ndef thing():\n    pass\n",
        },
    )
    graph = ModuleGraph(tmp_path)
    init = (tmp_path / "pkg/__init__.py").resolve()
    chain = graph.definitions(init, "thing")
    assert chain[-1] == ((tmp_path / "pkg/c.py").resolve(), "thing")
    assert graph.definitions(init, "missing") == [(init, "missing")]


def test_an_import_cycle_through_the_launched_script_ends(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".git/HEAD": "",
            "run.sh": "torchrun --nproc_per_node 2 train.py\n",
            "train.py": "from a import go\nimport train\ngo()\n",
            "a.py": "from b import go\nimport train\n",
            "b.py": "from a import go as again\nimport train\n\n\ndef go():\n    from loader import load\n    return load('m')\n",
            "loader.py": LOADER + "from a import go\n",
        },
    )
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [("loader.py", "DPL001")]
    assert not any(f.error for f in result.files)


def test_a_changed_layout_rebuilds_the_cached_launch_context(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".git/HEAD": "",
            "pyproject.toml": '[tool.setuptools.packages.find]\nwhere = ["elsewhere"]\n',
            "code/mylib/__init__.py": "",
            "code/mylib/loading.py": LOADER,
            "run.sh": "torchrun --nproc_per_node 2 train.py\n",
            "train.py": "from mylib.loading import load\nload('m')\n",
        },
    )
    (tmp_path / "elsewhere").mkdir()

    def check() -> list[tuple[str, str]]:
        result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(), tmp_path, tmp_path / ".cache")
        return [(f.display, f.code) for f in result.findings]

    assert check() == []
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.packages.find]\nwhere = ["code"]\n')
    assert check() == [("code/mylib/loading.py", "DPL001")]


def test_imports_of_hostile_files_cost_nothing_and_never_crash(tmp_path: Path) -> None:
    import os

    write(
        tmp_path,
        {
            ".git/HEAD": "",
            "run.sh": "torchrun --nproc_per_node 2 train.py\n",
            "train.py": "import pipe, dangling, folder, huge, binary, outside, deep\nfrom loader import load\nload('m')\n",
            "loader.py": LOADER + "import huge\n",
            "folder.py/__init__.py": "",
        },
    )
    os.mkfifo(tmp_path / "pipe.py")  # reading it would block: a FIFO is no module
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "huge.py").write_bytes(b"import loader\n" + b"x = 1\n" * 1_000_000)  # 6 MB: not read whole
    (tmp_path / "binary.py").write_bytes(b"import loader\n\x00\xff\xfe" * 100)
    outside = tmp_path.parent / f"{tmp_path.name}_outside.py"
    outside.write_text(LOADER)
    (tmp_path / "outside.py").symlink_to(outside)  # leads out of the repository: not followed
    (tmp_path / "deep.py").write_text("import deep\n" + "(" * 5000 + ")" * 5000 + "\n")  # nests too deeply to parse
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [("loader.py", "DPL001")]


def test_the_checker_asks_the_graph_the_launch_context_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module read for its classes while the launch context was built is not read again when the
    files are checked: the checker (and, forked or pickled, its workers) asks the same graph."""
    write(
        tmp_path,
        {
            ".git/HEAD": "",
            "run.sh": "accelerate launch --config_file fsdp.yaml train.py\n",
            "fsdp.yaml": "distributed_type: FSDP\nnum_processes: 8\n",
            "helpers.py": 'from transformers import AutoModelForCausalLM\n\n\ndef load(name):\n    model = AutoModelForCausalLM.from_pretrained(name)\n    model.to("cuda")\n    return model\n',
            "trainers.py": "from trl import SFTTrainer\n\n\nclass CustomSFT(SFTTrainer):\n    pass\n",
            "train.py": (
                "from transformers import AutoModelForCausalLM\nfrom trl import SFTConfig\n\nfrom helpers import load\n"
                'from trainers import CustomSFT\n\nCustomSFT(model=load("m"), args=SFTConfig("out")).train()\n'
                'other = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\nCustomSFT(model=other).train()\n'
            ),
        },
    )
    root = tmp_path
    built: list[Path] = []
    original = ModuleGraph._class_table

    def counted(self: ModuleGraph, path: Path) -> object:
        built.append(path)
        return original(self, path)

    monkeypatch.setattr(ModuleGraph, "_class_table", counted)
    result = run([root], Settings(root=root, codes=CODES), RunOptions(), root)
    assert [(f.display, f.code) for f in result.findings] == [("helpers.py", "DPL006"), ("train.py", "DPL001")]
    assert built == [(tmp_path / "trainers.py").resolve()]  # by the launch context, for helpers.py's consumer


def test_a_graph_sent_to_a_worker_keeps_its_class_tables_not_its_trees(tmp_path: Path) -> None:
    import pickle

    write(tmp_path, {"trainers.py": "from trl import SFTTrainer\n\n\nclass CustomSFT(SFTTrainer):\n    pass\n"})
    graph = ModuleGraph(tmp_path)
    path = (tmp_path / "trainers.py").resolve()
    table = graph.class_table(path)
    assert table is not None and table.classes == {"CustomSFT": ["SFTTrainer"]}
    copy = pickle.loads(pickle.dumps(graph))
    assert copy.class_table(path) == table and copy.read() == []  # answered without reading the file


_LAYOUT_PIECES = [
    "[tool.setuptools.packages.find]\n",
    "[tool.setuptools.package-dir]\n",
    "[tool.poetry]\n",
    "[options]\n",
    "[options.packages.find]\n",
    'where = ["src", "..", 1]\n',
    'packages = [{ include = "pkg", from = "lib" }, 3, "x"]\n',
    '"" = "lib"\n',
    "package_dir =\n    =src\n",
    "setup(package_dir={'': 'src'}, packages=find_packages(where='lib'))\n",
    "find_packages(3)\n",
    "package_dir = {",
    "\x00\xff",
    "\n",
]


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    name=st.sampled_from(["pyproject.toml", "setup.cfg", "setup.py"]),
    pieces=st.lists(st.sampled_from(_LAYOUT_PIECES), max_size=8),
)
def test_any_packaging_config_gives_a_layout_inside_the_repository(
    tmp_path_factory: pytest.TempPathFactory, name: str, pieces: list[str]
) -> None:
    root = tmp_path_factory.mktemp("layout").resolve()
    for folder in ("src", "lib", "pkg"):
        (root / folder).mkdir()
    (root / name).write_bytes("".join(pieces).encode("utf-8", "surrogateescape"))
    layout = read_layout(root)
    assert layout.folders[:2] == (root, root / "src")
    assert all(folder.is_relative_to(root) for folder in layout.folders)
    assert all(folder.is_relative_to(root) for _, folder in layout.packages)


def test_pyproject_is_parsed_once_for_layout_console_scripts_and_pins(tmp_path: Path) -> None:
    from placement_lint.settings import parsed_toml

    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["transformers>=4.40"]\n[project.scripts]\nsft = "p.cli:main"\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    (tmp_path / "src" / "p").mkdir(parents=True)
    (tmp_path / "src" / "p" / "__init__.py").write_text("")
    (tmp_path / "src" / "p" / "cli.py").write_text('def main():\n    X.from_pretrained("m", device_map="auto")\n')
    (tmp_path / "run.sh").write_text("accelerate launch --multi_gpu --num_processes 2 $(which sft)\n")
    parsed_toml.cache_clear()
    lint_repo(tmp_path)
    info = parsed_toml.cache_info()
    assert info.misses == 1 and info.hits >= 2, info  # the layout, the console scripts and the pins


def test_a_tree_the_graph_parsed_is_handed_over_once_and_only_for_the_same_bytes(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/loader.py": LOADER, "train.py": "from pkg.loader import load\nload('m')\n"})
    root = tmp_path.resolve()
    train = root / "train.py"
    graph = ModuleGraph(root)
    summary = graph.summary(train)
    assert summary is not None
    graph.release()
    raw = train.read_bytes()
    assert graph.parsed_tree(train, raw + b"\n") is None  # other bytes: the checker parses its own
    graph = ModuleGraph(root)
    tree = graph.summary(train).module  # type: ignore[union-attr]
    graph.release()
    assert graph.parsed_tree(train, raw) is tree
    assert graph.parsed_tree(train, raw) is None  # handed once: the checker drops it when done
    assert graph.parsed_tree(root / "pkg" / "loader.py", LOADER.encode()) is None  # imports nothing local: never parsed


def test_a_folder_listing_answers_for_names_it_does_not_hold_only(tmp_path: Path) -> None:
    write(tmp_path, {"Helpers.py": "", "Tools/__init__.py": "", "train.py": "import Helpers\nimport Tools\nimport torch\n"})
    root = tmp_path.resolve()
    graph = ModuleGraph(root)
    assert graph.resolve("Helpers", 0, root / "train.py") == root / "Helpers.py"
    assert graph.resolve("Tools", 0, root / "train.py") == root / "Tools" / "__init__.py"
    assert graph.resolve("torch", 0, root / "train.py") is None
    # Another case is asked by stat (a case-insensitive file system would find it), never ruled out by the listing.
    assert graph._may_hold(str(root), "helpers") and graph._may_hold(str(root), "TOOLS")
    assert not graph._may_hold(str(root), "torch")


@pytest.mark.parametrize(
    ("line", "added"),
    [
        ("sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), os.path.pardir)))", "app"),
        ("sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))", "app"),
        ('sys.path.append(os.path.join(os.path.dirname(__file__), "..", "shared"))', "app/shared"),
        ("sys.path.insert(0, str(Path(__file__).resolve().parents[1]))", "app"),
        ("sys.path.append(str(pathlib.Path(__file__).parent.parent / 'shared'))", "app/shared"),
        ("HERE = os.path.dirname(os.path.abspath(__file__))\nsys.path.append(os.path.join(HERE, os.pardir))", "app"),
        # Relative to the folder the process runs in, which a script that climbs out of it runs from.
        ('sys.path.append("..")', "app"),
        ('sys.path.insert(0, "../shared")', "app/shared"),
        ('sys.path.append(os.path.abspath(os.path.join("..", "shared")))', "app/shared"),
        ('sys.path.append("../../../..")', None),  # outside the repository
        ("sys.path.append(os.getcwd())", None),
        ("sys.path.append(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))", None),  # outside the repository
        ("def f():\n    sys.path.append(os.path.dirname(os.path.dirname(__file__)))", None),  # only if f is called
    ],
)
def test_the_folders_a_module_adds_to_sys_path_from_its_own_location(tmp_path: Path, line: str, added: str | None) -> None:
    root = tmp_path.resolve()
    (root / "app" / "shared").mkdir(parents=True)
    (root / "app" / "jobs").mkdir()
    script = root / "app" / "jobs" / "train.py"
    raw = f"import os\nimport pathlib\nimport sys\nfrom pathlib import Path\n{line}\n".encode()
    assert sys_path_additions(raw, script, root) == ((root / added,) if added else ())


_IMPORT_PIECES = [
    "import os\n",
    "from . import a, b\n",
    "from .x import (\n    A,\n    import_b,\n)\n",
    "    import torch\n",
    "import a; import b\n",
    "x = 'import y'\n",
    "# import z\n",
    "from ..pkg.mod import name as other\n",
    "important = 1\n",
    "from x import *\r\n",
    "\timport tab\n",
    "def f():\n    from .y import z\n",
    "s = '''\nimport in_a_string\n'''\n",
    "from\timport_lib import x\n",
    "import",
    "from a import (b,\n",
]


@given(st.lists(st.sampled_from(_IMPORT_PIECES), max_size=12))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_import_lines_are_found_as_the_pattern_finds_them(pieces: list[str]) -> None:
    """Import lines are looked for only where the word `import` is: the same matches as the
    pattern's own scan of every position, whatever the text around them."""
    from placement_lint.context.import_lines import IMPORT_LINE, import_matches
    from placement_lint.context.module_graph import _IMPORT_STATEMENT

    raw = "".join(pieces).encode()
    for pattern in (IMPORT_LINE, _IMPORT_STATEMENT):
        assert [m.span() for m in import_matches(pattern, raw)] == [m.span() for m in pattern.finditer(raw)]
