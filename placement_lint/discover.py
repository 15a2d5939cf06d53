"""Discover the files to check: walk the given paths, honour excludes and .gitignore files.

One walk finds the Python files to check and the files that may hold launch commands (shell
scripts, Makefiles, CI YAML, READMEs...), so a repository is walked once. A file named on the
command line is always checked, unless `force_exclude` (ruff's --force-exclude, for pre-commit,
which names every staged file) applies the configured excludes to it too. Directory symlinks are not followed (no loops); each real file is
checked once.
"""

from __future__ import annotations

import functools
import operator
import os
import stat
from collections.abc import Callable, Collection, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.settings import DEFAULT_EXCLUDE, Settings, is_glob
from placement_lint.source import NOTEBOOK_SUFFIX

if TYPE_CHECKING:
    import pathspec

_Chain = tuple[tuple[str, "pathspec.GitIgnoreSpec"], ...]  # the .gitignore files that apply, nearest first
CHECKED_SUFFIXES = (".py", NOTEBOOK_SUFFIX)
# What a file found on a walk is for (both, for a notebook): checked, or read for launch commands.
CHECKED, LAUNCHER = 1, 2


class Discovered:
    """What the walk found (a plain class: creating a dataclass costs every run about 1 ms)."""

    def __init__(
        self,
        names: list[str],
        missing: list[Path] | None = None,
        others: list[str] | None = None,
        walked: tuple[Path, ...] = (),
        unreadable: list[Path] | None = None,
        statuses: dict[str, os.stat_result] | None = None,
        real_names: dict[str, str] | None = None,
        folders: frozenset[str] = frozenset(),
    ) -> None:
        # The Python files and notebooks to check, as absolute paths in text: a warm run over thousands
        # of files looks each up by name, and making a Path of each cost more than the walk itself.
        self.names = names
        self.missing: list[Path] = missing if missing is not None else []
        # Other files the walk's `also` accepted, as `names`.
        self.others: list[str] = others if others is not None else []
        self.walked = walked  # the folders walked whole (resolved)
        # Folders that could not be listed, and named paths that are not files.
        self.unreadable: list[Path] = unreadable if unreadable is not None else []
        # Of `names` and `others`: their stat results as the walk saw them, and their resolved names
        # (as launch evidence is keyed).
        self.statuses: dict[str, os.stat_result] = statuses if statuses is not None else {}
        self.real_names: dict[str, str] = real_names if real_names is not None else {}
        self.folders = folders  # the folders that hold `names`: thousands of files, few folders
        # Each folder the walk listed: its resolved path and its repository's root (as repository_root
        # finds it, None outside any), as text: the walk worked them out from the listings it holds.
        self.roots: dict[str, tuple[str, str | None]] = {}
        # Files named on the command line that are not checked but may launch or configure Python files
        # (a launch script, a config, a doc), when the walk looked for launch files: the run checks those.
        self.named_inputs: list[str] = []
        # Python files the walk met that are not checked (`exclude` leaves them out) but may still start
        # a launcher (python_launch_files), as a walk for launch files meets them; when it looked for those.
        self.python_launch_only: list[str] = []

    @cached_property
    def files(self) -> list[Path]:
        return [Path(name) for name in self.names]

    def resolved(self, name: str) -> str:
        """A file's resolved name, as the walk saw it (or worked out now, for a Discovered built by hand)."""
        return self.real_names.get(name) or real_name(name)


def gitignore_spec(lines: list[str]) -> pathspec.GitIgnoreSpec:
    """Patterns with .gitignore's rules. pathspec is imported here, when there are some: a run
    over a tree without .gitignore files or glob excludes does not pay for its import."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


# Without a .git, what marks a project's top: packaging, requirements or environment files (a downloaded
# archive of a repository has no .git, and often no pyproject.toml: only a requirements.txt).
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")


def repository_root(start: Path) -> Path | None:
    """The top of the repository holding `start`: the nearest folder above with a `.git`, else the
    outermost one holding a project marker (PROJECT_MARKERS, requirements*.txt), so that a file or
    folder checked alone finds the same root as a check from the top, and a project nested in it
    belongs to it. None if neither. The search stops below the home folder, the temporary folder and
    the filesystem root: a stray marker there must not make a run read all of it."""
    folder = start if start.is_dir() else start.parent
    real = _real_folder(os.path.abspath(folder))  # a linked folder's repository is its target's
    found = _nearest(real, ".git") or _outermost_project(real)
    return None if found is None else Path(found)


@functools.lru_cache(maxsize=8192)
def _nearest(folder: str, marker: str) -> str | None:
    """Each (resolved) folder is looked at once per marker, however many files below it ask."""
    if folder in _shared_folders():
        return None
    if marker in _names(folder):
        return folder
    parent = os.path.dirname(folder)
    return None if parent == folder else _nearest(parent, marker)


@functools.lru_cache(maxsize=8192)
def _outermost_project(folder: str) -> str | None:
    if folder in _shared_folders():
        return None
    parent = os.path.dirname(folder)
    above = None if parent == folder else _outermost_project(parent)
    return above or (folder if _holds_project_marker(folder, _names(folder)) else None)


def forget_listings() -> None:
    """What the folders held when a run looked: a process that runs again (the API, the editor server,
    tests) must see a `.git` or a marker added since, as a new process would."""
    _nearest.cache_clear()
    _outermost_project.cache_clear()
    _names.cache_clear()
    _real_folder.cache_clear()


def _holds_project_marker(folder: str, names: Collection[str]) -> bool:
    if any(os.path.isfile(os.path.join(folder, name)) for name in _PROJECT_MARKER_NAMES.intersection(names)):
        return True
    # Asked of every folder a walk lists: one search of all the names joined, before a look at each.
    return "requirements" in "\0".join(names) and any(name.startswith("requirements") and name.endswith(".txt") for name in names)


_PROJECT_MARKER_NAMES = frozenset(PROJECT_MARKERS)


@functools.lru_cache(maxsize=8192)
def _names(folder: str) -> frozenset[str]:
    """A folder's entries, listed once for every marker asked of it (one call, not one per marker)."""
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return frozenset()


class _Tops:
    """What `repository_root` would find from a folder the walk lists: the nearest folder with a
    `.git` and the outermost with a project marker, at or above it (resolved paths as text). A plain
    class: a named tuple's class costs every run its creation."""

    __slots__ = ("git", "project")

    def __init__(self, git: str | None, project: str | None) -> None:
        self.git = git
        self.project = project

    @classmethod
    def above(cls, real: str) -> _Tops:
        """For the top of a walk: from the folders above it, looked at as `repository_root` does."""
        parent = os.path.dirname(real)
        if parent == real:
            return _NO_TOPS
        return cls(_nearest(parent, ".git"), _outermost_project(parent))

    def below(self, real: str, folder: str, names: Collection[str]) -> _Tops:
        """For a folder (resolved `real`, listed as `folder`) whose parent's are these: the walk
        already holds its listing, so no folder is listed a second time."""
        if real in _shared_folders():
            return _NO_TOPS
        git = real if ".git" in names else self.git
        # The outermost marker wins: below one, the folder's own need not be looked for.
        project = self.project or (real if _holds_project_marker(folder, names) else None)
        return self if git is self.git and project is self.project else _Tops(git, project)

    @property
    def root(self) -> str | None:
        return self.git or self.project


_NO_TOPS = _Tops(None, None)


def is_shared_folder(folder: str) -> bool:
    """Whether a resolved folder is one that holds many unrelated projects (see _shared_folders)."""
    return folder in _shared_folders()


@functools.cache
def _shared_folders() -> frozenset[str]:
    """Folders that hold many unrelated projects, never a repository's top: the home and temporary
    folders (and the filesystem root, where every walk up ends)."""
    found = {os.path.sep}
    for folder in (os.path.expanduser("~"), os.environ.get("TMPDIR"), "/tmp", "/var/tmp"):
        if folder and folder != "~":
            found.add(os.path.realpath(folder))
    return frozenset(found)


class _Ignores:
    def __init__(self, settings: Settings) -> None:
        self.root = settings.root.resolve()
        self._root = str(self.root)
        patterns = [*settings.exclude, *settings.extend_exclude]
        # Plain names (".venv", "build") are the common case: a set lookup, not a pattern match.
        self.excluded_names = {p.rstrip("/") for p in patterns if not is_glob(p)}
        globs = [p for p in patterns if is_glob(p)]
        self.exclude = gitignore_spec(globs) if globs else None
        # What launch files are looked for in: not where `exclude` says (it decides what is reported,
        # not what launches), but where neither DEFAULT_EXCLUDE nor `launch-exclude` does.
        launch_patterns = [*DEFAULT_EXCLUDE, *settings.launch_exclude]
        self.launch_excluded_names = {p.rstrip("/") for p in launch_patterns if not is_glob(p)}
        launch_globs = [p for p in launch_patterns if is_glob(p)]
        self.launch_exclude = gitignore_spec(launch_globs) if launch_globs else None
        self.respect_gitignore = settings.respect_gitignore
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._chains: dict[Path, list[tuple[Path, pathspec.GitIgnoreSpec]]] = {}

    def _gitignore(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._gitignores:
            spec = None
            try:
                lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
                spec = gitignore_spec(lines)
            except OSError:
                pass
            self._gitignores[folder] = spec
        return self._gitignores[folder]

    def _chain(self, folder: Path) -> list[tuple[Path, pathspec.GitIgnoreSpec]]:
        """The .gitignore files that apply in `folder`: its own and its parents' up to the repository."""
        if folder not in self._chains:
            top = self.root if _relative(folder, self.root) is not None else repository_root(folder)
            own = self._gitignore(folder)
            above = [] if folder == top or top is None or folder.parent == folder else self._chain(folder.parent)
            self._chains[folder] = ([(folder, own)] if own is not None else []) + above
        return self._chains[folder]

    def chain_of(self, folder: Path) -> _Chain:
        """The .gitignore files that apply in `folder`, as (folder, spec) with folders as strings."""
        return tuple((str(base), spec) for base, spec in self._chain(folder)) if self.respect_gitignore else ()

    def chain_starts_at(self, folder: str, names: set[str]) -> bool:
        """Where the .gitignore files above stop applying, as in `_chain`: at the project root, and
        outside it at a repository's root (a nested repository is not ignored by its parent's)."""
        if folder == self._root:
            return True
        inside = folder.startswith(self._root if self._root.endswith(os.sep) else self._root + os.sep)
        return not inside and ".git" in names

    def gitignore_at(self, folder: str) -> pathspec.GitIgnoreSpec | None:
        return self._gitignore(Path(folder))

    def ignored(self, path: str, name: str, is_dir: bool, chain: _Chain) -> bool:
        """For a path met on a walk (absolute, as a string), in a folder where `chain` applies: not
        checked (`exclude`, `extend-exclude`, .gitignore files)."""
        return self.excluded(path, name, is_dir) or self.gitignored(path, name, is_dir, chain)

    def launch_ignored(self, path: str, name: str, is_dir: bool, chain: _Chain) -> bool:
        """As `ignored`, for launch files: DEFAULT_EXCLUDE, `launch-exclude` and .gitignore files."""
        return self.launch_excluded(path, name, is_dir) or self.gitignored(path, name, is_dir, chain)

    def excluded(self, path: str, name: str, is_dir: bool) -> bool:
        """By `exclude` and `extend-exclude`."""
        if name in self.excluded_names:
            return True
        return self.exclude is not None and _matches_at(self.exclude, path, name, self._root, is_dir)

    def launch_excluded(self, path: str, name: str, is_dir: bool) -> bool:
        """By DEFAULT_EXCLUDE and `launch-exclude`."""
        if name in self.launch_excluded_names:
            return True
        return self.launch_exclude is not None and _matches_at(self.launch_exclude, path, name, self._root, is_dir)

    @staticmethod
    def gitignored(path: str, name: str, is_dir: bool, chain: _Chain) -> bool:
        return any(_matches_at(spec, path, name, base, is_dir) for base, spec in chain)

    def launch_ignored_path(self, path: Path, is_dir: bool) -> bool:
        """Whether a path named on the command line (absolute), or a folder above it in its repository,
        is one whose launch files do not count (`launch_ignored`): naming a folder or file gets it
        checked, but does not change what the repository launches."""
        top = self.root if _relative(path, self.root) is not None else repository_root(path)
        current, folder = path, is_dir
        while True:
            parent = current.parent
            if parent == current or (top is not None and current == top):
                return False
            if self.launch_ignored(str(current), current.name, folder, self.chain_of(parent)):
                return True
            if top is None:
                return False  # outside any project: only the path's own name counts
            current, folder = parent, True

    def force_excluded(self, path: Path, is_dir: bool, launch: bool = False) -> bool:
        """Whether `exclude`/`extend-exclude` (with `launch`: DEFAULT_EXCLUDE and `launch-exclude`)
        cover a path named on the command line: it, or a folder above it inside the project. Like
        ruff's --force-exclude, .gitignore files do not count here."""
        excluded_names, spec = (
            (self.launch_excluded_names, self.launch_exclude) if launch else (self.excluded_names, self.exclude)
        )
        relative = _relative(Path(os.path.realpath(path.parent)) / path.name, self.root)
        if relative is None:  # outside the project: only the name can match
            parts, names = [path.name], [path.name]
        else:
            names = relative.split("/")
            parts = ["/".join(names[: i + 1]) for i in range(len(names))]
        for depth, (name, part) in enumerate(zip(names, parts, strict=True)):
            folder = is_dir or depth < len(parts) - 1
            if name in excluded_names:
                return True
            if spec is not None and spec.match_file(part + ("/" if folder else "")):
                return True
        return False


def _matches_at(spec: pathspec.GitIgnoreSpec, path: str, name: str, base: str, is_dir: bool) -> bool:
    """Matched by a pattern on its own, not only because its folder matched: a folder named
    on the command line is walked even when excluded (ruff does the same without --force-exclude)."""
    prefix = base if base.endswith(os.sep) else base + os.sep
    if path.startswith(prefix):
        relative = path[len(prefix) :].replace(os.sep, "/")
        parent = relative.rsplit("/", 1)[0] + "/" if "/" in relative else None
    else:
        relative, parent = name, None
    if not spec.match_file(relative + ("/" if is_dir else "")):
        return False
    return parent is None or not spec.match_file(parent)


def _relative(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def discover(
    paths: list[Path],
    settings: Settings,
    also: Callable[[str], bool] | None = None,
    force_exclude: bool = False,
    counted: Callable[[int], None] | None = None,
) -> Discovered:
    """Python files and notebooks under `paths`; with `also`, the other files whose names it accepts as
    well. `counted(n)` hears how many files were found so far, every few hundred (a progress bar)."""
    ignores = _Ignores(settings)
    # Several paths to one file (links) check it once: under the path given first on the command line,
    # and within one walk under the first in sorted order, whatever order the folders list in.
    seen: dict[tuple[int, int], tuple[int, str]] = {}  # a file's (device, inode): the given path's index, its name
    dropped: set[str] = set()
    origin = 0  # the index of the given path being added
    names: list[str] = []
    others: list[str] = []
    missing: list[Path] = []
    walked: list[Path] = []
    unreadable: list[Path] = []
    statuses: dict[str, os.stat_result] = {}
    real_names: dict[str, str] = {}
    folders: set[str] = set()
    roots: dict[str, tuple[str, str | None]] = {}
    named_inputs: list[str] = []
    python_launch_only: list[str] = []

    def add(path: str, name: str, folder: str, status: os.stat_result, real: str, role: int = CHECKED | LAUNCHER) -> None:
        key = (status.st_dev, status.st_ino)
        earlier = seen.get(key)
        if earlier is not None:
            if earlier[0] != origin or earlier[1] < path:
                return
            dropped.add(earlier[1])  # rare: a link met before its target in sorted order
            del statuses[earlier[1]], real_names[earlier[1]]
        seen[key] = (origin, path)
        real_names[path] = real
        statuses[path] = status
        if counted is not None and not len(statuses) % 512:
            counted(len(statuses))
        if name.endswith(".py"):  # by far the most files: one question each
            if role & CHECKED:
                names.append(path)
                folders.add(folder)
            else:  # excluded, yet it may start a launcher
                python_launch_only.append(path)
        elif name.endswith(NOTEBOOK_SUFFIX):
            if role & CHECKED:
                names.append(path)
                folders.add(folder)
            if role & LAUNCHER and also is not None and also(name):  # it may launch scripts (`!accelerate launch train.py`)
                others.append(path)
        elif role & LAUNCHER:
            others.append(path)

    def wanted(name: str) -> bool:
        return name.endswith(CHECKED_SUFFIXES) or (also is not None and also(name))

    for index, given in enumerate(paths):
        origin = index
        absolute = Path(os.path.abspath(given))
        try:
            status = absolute.stat()
        except OSError:
            missing.append(given)
            continue
        regular = stat.S_ISREG(status.st_mode)
        if regular and not absolute.name.endswith(CHECKED_SUFFIXES):
            # A launch script, config or doc: not checked itself, so `exclude` does not apply to it (with
            # or without force_exclude); the run checks the Python files it launches or configures.
            if also is not None and not ignores.launch_ignored_path(absolute, False):
                named_inputs.append(str(absolute))
                if also(absolute.name):
                    add(str(absolute), absolute.name, str(absolute.parent), status, real_name(absolute), LAUNCHER)
            continue
        if force_exclude and ignores.force_excluded(absolute, stat.S_ISDIR(status.st_mode)):
            continue
        # A Python file launches nothing: what .gitignore says of it is not worth reading for that.
        launches = (
            also is not None and not absolute.name.endswith(".py") and not ignores.launch_ignored_path(absolute, not regular)
        )
        if regular:
            # Named explicitly: always checked (unless force_exclude).
            add(str(absolute), absolute.name, str(absolute.parent), status, real_name(absolute), CHECKED | LAUNCHER * launches)
        elif not stat.S_ISDIR(status.st_mode):
            unreadable.append(absolute)  # a FIFO or a device: never opened, so nothing can hang
        else:
            unlisted: list[Path] = []
            _walk(absolute, ignores, add, wanted, unlisted.append, roots, launches=launches)
            unreadable += sorted(unlisted)
            walked.append(absolute.resolve())
    if dropped:
        names = [name for name in names if name not in dropped]
        others = [name for name in others if name not in dropped]
        python_launch_only = [name for name in python_launch_only if name not in dropped]
        folders = {os.path.dirname(name) for name in names}
    # Sorted once, by their text: as fast as a string sort, where comparing Paths part by part is not.
    names.sort()
    others.sort()
    found = Discovered(names, missing, others, tuple(walked), unreadable, statuses, real_names, frozenset(folders))
    found.roots = roots
    found.named_inputs = named_inputs
    found.python_launch_only = sorted(python_launch_only)
    return found


def excluded_by_settings(settings: Settings) -> Callable[[Path], bool]:
    """Whether the configured `exclude`/`extend-exclude` cover a file (not .gitignore files)."""
    ignores = _Ignores(settings)
    return lambda path: ignores.force_excluded(path, False)


def launch_excluded_by_settings(settings: Settings) -> Callable[[Path], bool]:
    """Whether DEFAULT_EXCLUDE or the configured `launch-exclude` cover a launch file (not .gitignore files)."""
    ignores = _Ignores(settings)
    return lambda path: ignores.force_excluded(path, False, launch=True)


def launch_files(
    root: Path,
    settings: Settings,
    wanted: Callable[[str], bool],
    listed: list[str] | None = None,
    python: bool = False,
) -> list[Path]:
    """Every launch file under `root` whose name `wanted(name)` accepts, in the order of a walk that lists
    each folder sorted (launch evidence is gathered in this order). Folders `exclude` leaves out are
    looked in too: they are not reported on, but what they launch still runs. With `listed`, the
    folders the walk listed are added to it. With `python`, Python files count as launch files (the
    scripts that may start a launcher: python_launch_files)."""
    found: list[Path] = []
    _walk(
        root,
        _Ignores(settings),
        lambda path, *_: found.append(Path(path)),
        wanted,
        listed=_sorted_listing,
        checks=False,
        entered=listed.append if listed is not None else None,
        python_launchers=python,
    )
    return found


def _walk(
    top: Path,
    ignores: _Ignores,
    add: Callable[[str, str, str, os.stat_result, str, int], None],
    wanted: Callable[[str], bool],
    unreadable: Callable[[Path], None] = lambda _: None,
    roots: dict[str, tuple[str, str | None]] | None = None,
    listed: Callable[[Iterator[os.DirEntry[str]]], list[os.DirEntry[str]]] = list,
    checks: bool = True,
    launches: bool = True,
    entered: Callable[[str], None] | None = None,
    python_launchers: bool = False,
) -> None:
    """Calls `add(path, name, folder, status, resolved path, role)` for each wanted file, paths as
    text, in the order the folders list (`listed` may sort each listing). `role`: CHECKED for a Python
    file or notebook no `exclude` or .gitignore leaves out (with `checks`), LAUNCHER for any other
    (and a notebook) that DEFAULT_EXCLUDE, `launch-exclude` and .gitignore leave in (with `launches`):
    a folder excluded from the checks is still walked for launch files. With `roots`, records each
    folder listed as `roots[folder] = (resolved folder, repository_root's answer)`, from the listings
    the walk already holds; `entered(folder)` hears of each folder listed. With `python_launchers`, a
    Python file is a launch file as any other (a script that starts `torchrun` with subprocess), not
    a file to check."""
    # Paths stay strings until a file is wanted: a Path per directory entry was half the walk's time.
    # The top's own .gitignore joins its chain below, as every folder's does when it is listed.
    inherited = tuple(item for item in ignores.chain_of(top) if item[0] != str(top))
    excluded_names = ignores.excluded_names
    is_regular = stat.S_ISREG
    start = str(top)
    real_start = _real_folder(start)
    # The folders below are not links (links to folders are not followed): each one's resolved path
    # is its parent's and its name.
    launch_excluded_names = ignores.launch_excluded_names
    stack: list[tuple[str, _Chain, str, _Tops, bool, bool]] = [
        (start, inherited, real_start, _Tops.above(real_start) if roots is not None else _NO_TOPS, checks, launches)
    ]
    while stack:
        folder, chain, real, tops, checks, launches = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = listed(listing)
        except OSError:
            unreadable(Path(folder))
            continue
        if entered is not None:
            entered(folder)
        if ignores.respect_gitignore or roots is not None:
            names = {entry.name for entry in entries}
            if roots is not None:
                tops = tops.below(real, folder, names)
                roots[folder] = (real, tops.root)
            if ignores.respect_gitignore:
                if ignores.chain_starts_at(folder, names):
                    chain = ()
                spec = ignores.gitignore_at(folder) if ".gitignore" in names else None
                if spec is not None:
                    chain = ((folder, spec), *chain)
        own = real == folder  # most folders are their own resolved path: their files' names need no second string
        # Where no pattern applies, only a name can exclude a file: asked inline, for thousands of files.
        patterns = bool(chain) or ignores.exclude is not None
        launch_patterns = bool(chain) or ignores.launch_exclude is not None
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    path = entry.path
                    checked = checks and not ignores.excluded(path, name, True)
                    launched = launches and not ignores.launch_excluded(path, name, True)
                    if (checked or launched) and chain and ignores.gitignored(path, name, True, chain):
                        continue  # .gitignore rules out both: its patterns are matched once
                    if checked or launched:
                        stack.append((path, chain, path if own else os.path.join(real, name), tops, checked, launched))
                    continue
                if not wanted(name):
                    continue
                status = entry.stat(follow_symlinks=True)
            except OSError:
                continue  # a dangling symlink or a file that vanished
            if not is_regular(status.st_mode):
                continue
            path = entry.path
            if name.endswith(".py") and not python_launchers:  # by far the most files: one question each
                role = CHECKED
                if not checks or name in excluded_names or (patterns and ignores.ignored(path, name, False, chain)):
                    # Left out of the checks: still a launch file where a walk for launch files meets
                    # it (a launcher script in an excluded folder), asked of these few only.
                    if not (
                        launches
                        and name not in launch_excluded_names
                        and not (launch_patterns and ignores.launch_ignored(path, name, False, chain))
                    ):
                        continue
                    role = LAUNCHER
            else:
                role = (
                    CHECKED
                    if checks
                    and name.endswith(NOTEBOOK_SUFFIX)
                    and name not in excluded_names
                    and not (patterns and ignores.ignored(path, name, False, chain))
                    else 0
                )
                if (
                    launches
                    and name not in launch_excluded_names
                    and not (launch_patterns and ignores.launch_ignored(path, name, False, chain))
                ):
                    role |= LAUNCHER
                if not role:
                    continue
            if entry.is_symlink():
                add(path, name, folder, status, os.path.realpath(path), role)
            else:
                add(path, name, folder, status, path if own else os.path.join(real, name), role)


def _sorted_listing(listing: Iterator[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
    return sorted(listing, key=_NAME)


_NAME = operator.attrgetter("name")  # a directory entry's; sorts a listing without a Python call per entry


def force_excluded(path: Path, settings: Settings, is_dir: bool = False) -> bool:
    """For a path that need not exist (`--stdin-filename`): would --force-exclude skip it?"""
    return _Ignores(settings).force_excluded(Path(os.path.abspath(path)), is_dir)


def real_path(path: str | os.PathLike[str]) -> Path:
    """`path.resolve()`, resolving each folder once (launch evidence is keyed by real paths): an
    `lstat` of the file, not one of every part of its path (a monorepo's 6,000 launch targets and
    configs took 0.25 s of `realpath`)."""
    return Path(real_name(path))


def real_name(path: str | os.PathLike[str]) -> str:
    """`real_path` as a string, for lookups by the thousand. A path through `..` is resolved whole, as
    the kernel walks it (across a link, `..` is the link target's parent, not the lexical one)."""
    name = os.fspath(path)
    if ".." in name or os.path.islink(name):
        return os.path.realpath(name)
    folder, base = os.path.split(os.path.abspath(name))
    return os.path.join(_real_folder(folder), base)


def real_folder(folder: Path) -> Path:
    """`folder.resolve()`, from the folders above it already resolved: one lstat, not one per part."""
    return Path(_real_folder(os.path.abspath(folder)))


@functools.lru_cache(maxsize=16384)
def _real_folder(folder: str) -> str:
    parent, name = os.path.split(folder)
    if not name or parent == folder or os.path.islink(folder):
        return os.path.realpath(folder)
    return os.path.join(_real_folder(parent), name)
