"""What a repository's packaging files declare, read as data and never run: where each project in it
starts (a monorepo holds several), and the console scripts each declares, so that a launch naming a
console script (`accelerate launch $(which sft)`, `torchrun --no-python sft`, `srun sft`) reaches the
module and function behind it.

Read: `[project.scripts]` and Poetry's `[tool.poetry.scripts]` in pyproject.toml (tomllib),
`console_scripts` in setup.cfg's `[options.entry_points]` (configparser), and a literal `entry_points=`
in setup.py (ast, literals only: a setup.py that computes its entry points declares nothing here).
A file that cannot be read or parsed declares nothing; nothing is guessed.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.context.setup_py import literal, module_literals, setup_py_tree
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.settings import parsed_toml, toml_module

if TYPE_CHECKING:
    from placement_lint.context.module_graph import ModuleGraph

# The files that make a folder a project's root (requirements files mark a repository's top, not a package).
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
MAX_PACKAGING_BYTES = 1024 * 1024
# `pkg.mod:func`, `pkg.mod:obj.attr`, with optional extras `[gpu]`.
_REFERENCE = LazyPattern(r"^\s*([A-Za-z_][\w.]*)\s*:\s*([A-Za-z_][\w.]*)\s*(?:\[[^\]]*\])?\s*$")


class ConsoleScript(NamedTuple):
    name: str
    module: str  # "pkg.cli"
    function: str  # "main": what of the module the script runs
    declared_in: Path  # the packaging file

    def describe(self, display: str) -> str:
        """`console script sft = pkg.cli:main in pyproject.toml`."""
        return f"console script {self.name} = {self.module}:{self.function} in {display}"


class Packaging(NamedTuple):
    """What one project root's packaging files say."""

    scripts: dict[str, ConsoleScript]
    problems: tuple[tuple[str, str], ...]  # (file name, why it was not read)


_UNKNOWN = object()


class Projects:
    """The projects of one repository (under `top`, resolved), read when a launch asks and once each:
    built with each launch context, so an editor that runs for hours sees packaging files change."""

    def __init__(self, top: Path, launch_files: Sequence[Path] = ()) -> None:
        self.top = top
        # The repository's launch files: the folders holding them tell which nested projects there are
        # (most have a README or a script), without a walk of their own.
        self._launch_files = launch_files
        self._elsewhere: dict[str, list[ConsoleScript]] | None = None
        self._modules: dict[ConsoleScript, Path | None] = {}
        self._roots: dict[Path, Path | None] = {}
        self._packaging: dict[Path, Packaging] = {}
        self._scripts: dict[tuple[Path, ...], dict[str, ConsoleScript]] = {}
        # The packaging files looked at (there or not): what a cached launch context depends on.
        self.read: list[Path] = []

    def root_of(self, folder: Path) -> Path | None:
        """The nearest folder from `folder` up to the top holding a pyproject.toml, setup.py or
        setup.cfg: the project a file of a monorepo belongs to."""
        known = self._roots.get(folder, _UNKNOWN)  # asked for the same folders thousands of times
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        written = folder
        folder = Path(os.path.normpath(folder))  # a command's folder after `cd ..` is written `scripts/..`
        if folder not in self._roots:
            found = None
            if folder.is_relative_to(self.top):
                marker = next((folder / name for name in PROJECT_FILES if (folder / name).is_file()), None)
                if marker is not None:
                    found = folder
                    self.read.append(marker)
                elif folder != self.top and folder.parent != folder:
                    found = self.root_of(folder.parent)
            self._roots[folder] = found
        self._roots[written] = self._roots[folder]
        return self._roots[folder]

    def scripts_near(self, *folders: Path) -> dict[str, ConsoleScript]:
        """The console scripts a command run from these folders can name: those of the projects
        holding them, nearest first, then the top's."""
        projects = tuple(self.projects_of(*folders))
        if projects not in self._scripts:
            found: dict[str, ConsoleScript] = {}
            for project in projects:
                for name, script in self.packaging(project).scripts.items():
                    found.setdefault(name, script)
            self._scripts[projects] = found
        return self._scripts[projects]

    def find(self, name: str, *folders: Path) -> ConsoleScript | None:
        """The console script `name` that a command run from `folders` names: declared by the projects
        holding them or by the top; else by the one other project of the repository declaring it (a
        launch file at the top running a nested project's script). None when several other projects
        declare it differently: nothing tells which one is installed."""
        near = self.scripts_near(*folders).get(name)
        if near is not None:
            return near
        if self._elsewhere is None:
            self._elsewhere = {}
            projects = dict.fromkeys(self.root_of(path.parent) for path in self._launch_files)
            for project in filter(None, projects):
                for script_name, script in self.packaging(project).scripts.items():
                    self._elsewhere.setdefault(script_name, []).append(script)
        candidates = {(script.module, script.function): script for script in self._elsewhere.get(name, ())}
        return next(iter(candidates.values())) if len(candidates) == 1 else None

    def projects_of(self, *folders: Path) -> list[Path]:
        projects = [self.root_of(folder) for folder in folders]
        return list(dict.fromkeys(p for p in (*projects, self.top) if p is not None))

    def packaging(self, project: Path) -> Packaging:
        """The console scripts and package folders `project`'s packaging files declare."""
        if project not in self._packaging:
            self._packaging[project] = _read_packaging(project)
            self.read += [project / name for name in PROJECT_FILES]
        return self._packaging[project]

    def module_of(self, script: ConsoleScript, graph: ModuleGraph) -> Path | None:
        """The file of the repository holding the script's module, where its project's layout puts it
        (the module graph reads layouts; nothing here resolves a module)."""
        if script not in self._modules:
            self._modules[script] = graph.module_in(script.declared_in.parent, script.module)
        return self._modules[script]


class ScriptNames:
    """The console script names a command can run (a Container for `parse_command`), looked at only
    for a command that srun/mpirun runs and that is no launcher of its own: packaging files are read
    when a command could name one of their scripts, not for every `cd`, `echo` or `pip`."""

    def __init__(self, projects: Projects, *folders: Path) -> None:
        self._projects = projects
        self._folders = folders

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._projects.find(name, *self._folders) is not None


def _read_packaging(project: Path) -> Packaging:
    scripts: dict[str, ConsoleScript] = {}
    problems: list[tuple[str, str]] = []
    for name, reader in (("setup.py", _setup_py), ("setup.cfg", _setup_cfg), ("pyproject.toml", _pyproject)):
        path = project / name
        try:
            if not path.is_file():
                continue
            if path.stat().st_size > MAX_PACKAGING_BYTES:
                problems.append((name, f"larger than {MAX_PACKAGING_BYTES} bytes, not read"))
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            problems.append((name, f"cannot read: {exc.strerror or exc}"))
            continue
        try:
            references = reader(text)
        except _Unreadable as exc:
            problems.append((name, str(exc)))
            continue
        # Later files win, as pyproject.toml's [project] table wins over setup.py's arguments.
        for script, reference in references.items():
            parsed = _REFERENCE.match(reference)
            if parsed:
                scripts[script] = ConsoleScript(script, parsed.group(1), parsed.group(2).split(".")[0], path)
    return Packaging(scripts, tuple(problems))


class _Unreadable(Exception):
    """A packaging file that does not parse, or declares its entry points in a way not read as data."""


# -- the readers: each returns {script name: "module:function"} ----------------------------------------


def _pyproject(text: str) -> dict[str, str]:
    if "scripts" not in text:
        return {}
    tomllib = toml_module()
    try:
        data = parsed_toml(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise _Unreadable(f"invalid TOML: {exc}") from None
    tool = _table(data.get("tool"))
    poetry = _table(tool.get("poetry"))
    references = {
        name: value for name, value in _table(_table(data.get("project")).get("scripts")).items() if isinstance(value, str)
    }
    for name, value in _table(poetry.get("scripts")).items():
        if isinstance(value, str):
            references[name] = value
        elif isinstance(value, dict) and value.get("type", "console") == "console":
            target = value.get("reference") or value.get("callable")  # Poetry 2 / Poetry 1 table forms
            if isinstance(target, str):
                references[name] = target
    return {name: value for name, value in references.items() if isinstance(name, str)}


def _setup_cfg(text: str) -> dict[str, str]:
    import configparser  # only for a setup.cfg: importing it cost every run that reads launches 1 ms

    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise _Unreadable(f"cannot parse: {str(exc).splitlines()[0]}") from None
    references: dict[str, str] = {}
    if parser.has_option("options.entry_points", "console_scripts"):
        references = _ini_scripts(parser.get("options.entry_points", "console_scripts"))
    return references


def _ini_scripts(value: str) -> dict[str, str]:
    """`name = pkg.mod:func` lines (setup.cfg's console_scripts, or a list from setup.py)."""
    found: dict[str, str] = {}
    for line in value.splitlines():
        name, equals, reference = line.partition("=")
        if equals and name.strip() and not name.strip().startswith(("#", ";")):
            found[name.strip()] = reference.strip()
    return found


def _setup_py(text: str) -> dict[str, str]:
    if "entry_points" not in text:
        return {}
    try:
        module = setup_py_tree(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise _Unreadable(f"cannot parse: {exc}") from None
    literals = module_literals(module)
    references: dict[str, str] = {}
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and _callee(node.func) == "setup"):
            continue
        for keyword in node.keywords:
            if keyword.arg == "entry_points":
                references.update(_entry_points(literal(keyword.value, literals)))
    return references


def _entry_points(value: object) -> dict[str, str]:
    """setup(entry_points=...) as data: a dict whose console_scripts is a list or a string of lines,
    or the INI text setuptools also takes."""
    if isinstance(value, str):
        import configparser  # as in _setup_cfg

        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(value)
        except configparser.Error:
            return {}
        return dict(parser.items("console_scripts")) if parser.has_section("console_scripts") else {}
    if not isinstance(value, dict):
        return {}
    scripts = value.get("console_scripts")
    if isinstance(scripts, str):
        return _ini_scripts(scripts)
    if isinstance(scripts, (list, tuple)):
        return _ini_scripts("\n".join(item for item in scripts if isinstance(item, str)))
    return {}


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _table(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}
