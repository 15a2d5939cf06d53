"""Which file of the repository a launch runs: a script path found from where the command runs (or
a folder above it, a nested project's root, the top), a `-m` module, or a console script the
repository declares."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.context.commands import Launch
from placement_lint.context.launch_files import CommandLine
from placement_lint.context.launches import RepoContext
from placement_lint.context.module_graph import ModuleGraph
from placement_lint.context.projects import ConsoleScript, Projects
from placement_lint.discover import real_path

if TYPE_CHECKING:
    from placement_lint.context.foreign_paths import ForeignPaths


def target_of(
    launch: Launch,
    command: CommandLine,
    root: Path,
    projects: Projects,
    display: Callable[[Path], str],
    graph: ModuleGraph,
    foreign: Callable[[], ForeignPaths] | None = None,
    notes: list[str] | None = None,
) -> tuple[Path, str] | None:
    """The repository file a launch runs (a script path, or a `-m package.module`), and, in a monorepo,
    where its path was found: from the folder the command runs in or the launch script's, else from the
    nearest project root above the launch script (and where its packaging puts packages), else from the
    top of the repository, else from a folder between the launch script and that top. A script path
    none of those hold may be written for another machine or tree: `foreign` gives the repository's
    files to match it against (written_elsewhere, documented_elsewhere); `notes` hears why an absolute
    path that names several of them was taken for none."""
    name = launch.target or launch.module
    project = projects.root_of(command.source.parent)
    outer: list[tuple[Path, str]] = [(root, "")]
    if project is not None and project != root:  # a project nested in the repository: say which one matched
        outer = [
            (project, f"{name} found from the project root {display(project)}"),
            (root, f"{name} found from the repository top"),
        ]
    moved = [(base, "") for base in _moved_from_the_top(command, root)]
    above = [
        (folder, f"{name} found from {display(folder)}, a folder above the launch script")
        for folder in folders_above(command, root, projects, name or "")
    ]
    candidates: list[tuple[Path, str]] = []
    if launch.target and launch.target.endswith(".py"):
        bases = [(command.cwd, ""), (command.source.parent, ""), *outer, *moved, *above]
        candidates = [(base / launch.target, said) for base, said in bases]
    elif launch.module:
        # Where `python -m` finds a project's packages once it is installed: its folder, its `src/`, and
        # the folders its packaging puts them in (a nested project's own `package_dir`).
        packages = [(folder, said) for top, said in outer for folder in graph.layout_of(top).folders]
        for base, said in [(command.cwd, ""), (command.source.parent, ""), *packages, *moved, *above]:
            found = graph.launched_module(launch.module, base)
            if found is not None:
                return found, said
        return None
    for candidate, said in candidates:
        if not os.path.isfile(candidate):  # one stat; most bases do not hold the script
            continue
        try:
            real = real_path(candidate)
        except (OSError, RuntimeError):
            continue
        if real.is_relative_to(root):
            return real, said
    if not (launch.target and launch.target.endswith(".py") and foreign is not None):
        return None
    if os.path.isabs(launch.target):
        if Path(launch.target).is_relative_to(root):
            return None  # a path of this checkout that is not here: no other machine's
        where = f"{display(command.source)}:{command.where}"
        return written_elsewhere(launch.target, where, foreign(), display, notes)
    if command.documented:
        return documented_elsewhere(launch.target, command.source, foreign(), display)
    return None


def written_elsewhere(
    target: str, where: str, foreign: ForeignPaths, display: Callable[[Path], str], notes: list[str] | None
) -> tuple[Path, str] | None:
    """The script an absolute path written for another machine names (`torchrun ${BASE_PATH}/finetune.py`
    with `BASE_PATH=${1-"/home/MiniLLM"}`): the file a Dockerfile's COPY puts there, else the only
    repository file ending in the path's longest tail some file ends in, as a config path of another
    machine is taken. Several files ending so name none, and `notes` hears which."""
    taken = foreign.find(target)
    if taken is not None:
        try:
            real = real_path(taken.path)
        except (OSError, RuntimeError):
            return None
        return real, f"{target} taken as {display(real)} ({taken.rule})"
    sharing = foreign.sharing_the_tail(target)
    if sharing and notes is not None:
        shown = ", ".join(sharing[:3]) + (f" and {len(sharing) - 3} more" if len(sharing) > 3 else "")
        note = f"{where}: {target} is taken as no file of the repository: {len(sharing)} end as it does ({shown})"
        if note not in notes:  # a script read again with the arguments a README gives says it once
            notes.append(note)
    return None


def documented_elsewhere(
    target: str, documented_in: Path, foreign: ForeignPaths, display: Callable[[Path], str]
) -> tuple[Path, str] | None:
    """The script a docstring's launch names by a relative path of another tree (TRL's
    `examples/scripts/sft_vlm.py` in a copy kept as `fine_tune/sft_vlm.py`): the only repository file
    ending in the path's longest tail that one ends in, when that is the module holding the docstring,
    or the tail holds a folder (a bare name matching some other script is too weak a sign). An
    absolute path is written_elsewhere's, in a docstring as anywhere."""
    taken = foreign.tail_of(target)
    if taken is None:
        return None
    try:
        real = real_path(taken.path)
        own = real == real_path(documented_in)
    except (OSError, RuntimeError):
        return None
    if not own and "/" not in taken.tail:
        return None
    whose = ", the module whose docstring names it" if own else ""
    return real, f"{target} taken as {display(real)} ({taken.rule}{whose})"


def folders_above(command: CommandLine, root: Path, projects: Projects, target: str) -> list[Path]:
    """The folders between a launch script and the top of the repository (or of its project), nearest
    first. `train/scripts/run_sft.sh` is written to be run as `bash scripts/run_sft.sh` from `train/`,
    and names `src/sft.py` from there; a script that `cd`s somewhere says where it runs itself. A
    `target` climbing out with `..` was written for one folder: from a folder above it would name a
    file by accident (Qwen's notebooks name `../../finetune.py`)."""
    if command.cwd != command.source.parent or ".." in Path(target).parts:
        return []
    top = projects.root_of(command.source.parent) or root
    folders: list[Path] = []
    for folder in command.source.parent.parents:
        if folder == top or not folder.is_relative_to(top):
            break
        folders.append(folder)
    return folders


def folder_above_holding(launch: Launch, command: CommandLine, target: Path, above: list[Path]) -> Path | None:
    """Of the folders `above` the launch script, the one its target (a script path or a `-m` module) was
    found from, if it was found there: not beside the script, nor from a project root or the top."""
    written = _written_paths(launch)
    if not written or not above or any(os.path.isfile(command.cwd / path) for path in written):
        return None
    for folder in above:
        for path in written:
            if os.path.isfile(folder / path):
                try:
                    return folder if (folder / path).resolve() == target else None
                except (OSError, RuntimeError):
                    return None
    return None


def _written_paths(launch: Launch) -> tuple[str, ...]:
    """The relative paths a launch's target may be at: its script path, or the files `-m pkg.mod` runs."""
    if launch.target:
        return (launch.target,)
    if launch.module and all(part.isidentifier() for part in launch.module.split(".")):
        module = launch.module.replace(".", "/")
        return (f"{module}.py", f"{module}/__main__.py")
    return ()


def _moved_from_the_top(command: CommandLine, root: Path) -> list[Path]:
    """Docs (and many scripts) are run from the top of the repository: a `cd examples` in
    docs/guide.md or scripts/run.sh moves to root/examples too."""
    if command.cwd == command.source.parent or not command.cwd.is_relative_to(command.source.parent):
        return []
    return [root / command.cwd.relative_to(command.source.parent)]


def console_script(
    launch: Launch,
    command: CommandLine,
    projects: Projects,
    graph: ModuleGraph,
    context: RepoContext,
    display: Callable[[Path], str],
) -> ConsoleScript | None:
    """The console script a launch runs by name, when the repository declares it and has its module."""
    assert launch.program is not None
    folders = (command.cwd, command.source.parent)
    script = projects.find(launch.program, *folders)
    problems: list[str] = []
    if script is None:  # a packaging file that could not be read may declare it: say so, guess nothing
        for project in projects.projects_of(*folders):
            problems += [f"{display(project / name)}: {reason}" for name, reason in projects.packaging(project).problems]
    elif projects.module_of(script, graph) is None:
        where = f"{display(command.source)}:{command.where}"
        problems.append(f"{where}: {script.describe(display(script.declared_in))}: no module {script.module} in the repository")
        script = None
    context.warnings += [problem for problem in problems if problem not in context.warnings]
    return script
