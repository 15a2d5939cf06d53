"""Discover the files to check: walk the given paths, honour excludes and .gitignore files.

One walk finds the Python files to check and the files that may hold launch commands (shell
scripts, Makefiles, CI YAML, READMEs...), so a repository is walked once. A file named on the
command line is always checked, unless `force_exclude` (ruff's --force-exclude, for pre-commit,
which names every staged file) applies the configured excludes to it too. Directory symlinks are not followed (no loops); each real file is
checked once.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from placement_lint.notebook import SUFFIX as NOTEBOOK_SUFFIX
from placement_lint.settings import Settings

_GLOB = re.compile(r"[*?\[\]/!\\]")
CHECKED_SUFFIXES = (".py", NOTEBOOK_SUFFIX)


@dataclass(frozen=True)
class Discovered:
    files: list[Path]  # Python files and notebooks to check
    missing: list[Path] = field(default_factory=list)
    others: list[Path] = field(default_factory=list)  # other files the walk's `also` accepted
    walked: tuple[Path, ...] = ()  # the folders walked whole (resolved)
    unreadable: list[Path] = field(default_factory=list)  # folders that could not be listed, named non-files


def repository_root(start: Path) -> Path | None:
    """The folder holding `.git` above `start`, else the nearest with a pyproject.toml; None if neither."""
    folder = start if start.is_dir() else start.parent
    return _nearest(str(folder), ".git") or _nearest(str(folder), "pyproject.toml")


@functools.lru_cache(maxsize=8192)
def _nearest(folder: str, marker: str) -> Path | None:
    """Each folder is looked at once per marker, however many files below it ask."""
    folder = os.path.abspath(folder)
    if os.path.exists(os.path.join(folder, marker)):
        return Path(os.path.realpath(folder))
    parent = os.path.dirname(folder)
    return None if parent == folder else _nearest(parent, marker)


class _Ignores:
    def __init__(self, settings: Settings) -> None:
        self.root = settings.root.resolve()
        patterns = [*settings.exclude, *settings.extend_exclude]
        # Plain names (".venv", "build") are the common case: a set lookup, not a pattern match.
        self.excluded_names = {p.rstrip("/") for p in patterns if not _GLOB.search(p.rstrip("/"))}
        globs = [p for p in patterns if _GLOB.search(p.rstrip("/"))]
        self.exclude = pathspec.GitIgnoreSpec.from_lines(globs) if globs else None
        self.respect_gitignore = settings.respect_gitignore
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._chains: dict[Path, list[tuple[Path, pathspec.GitIgnoreSpec]]] = {}

    def _gitignore(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._gitignores:
            spec = None
            try:
                lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
                spec = pathspec.GitIgnoreSpec.from_lines(lines)
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

    @staticmethod
    def _matches(spec: pathspec.GitIgnoreSpec, path: Path, base: Path, is_dir: bool) -> bool:
        """Matched by a pattern on its own, not only because its folder matched: a folder named
        on the command line is walked even when excluded (ruff does the same without --force-exclude)."""
        relative = _relative(path, base)
        if relative is None:
            relative, parent = path.name, None
        else:
            parent = relative.rsplit("/", 1)[0] + "/" if "/" in relative else None
        if not spec.match_file(relative + ("/" if is_dir else "")):
            return False
        return parent is None or not spec.match_file(parent)

    def ignored(self, path: Path, is_dir: bool) -> bool:
        if path.name in self.excluded_names:
            return True
        if self.exclude is not None and self._matches(self.exclude, path, self.root, is_dir):
            return True
        if not self.respect_gitignore:
            return False
        return any(self._matches(spec, path, folder, is_dir) for folder, spec in self._chain(path.parent))

    def force_excluded(self, path: Path, is_dir: bool) -> bool:
        """Whether `exclude`/`extend-exclude` cover a path named on the command line: it, or a folder
        above it inside the project. Like ruff's --force-exclude, .gitignore files do not count here."""
        relative = _relative(Path(os.path.realpath(path.parent)) / path.name, self.root)
        if relative is None:  # outside the project: only the name can match
            parts, names = [path.name], [path.name]
        else:
            names = relative.split("/")
            parts = ["/".join(names[: i + 1]) for i in range(len(names))]
        for depth, (name, part) in enumerate(zip(names, parts, strict=True)):
            folder = is_dir or depth < len(parts) - 1
            if name in self.excluded_names:
                return True
            if self.exclude is not None and self.exclude.match_file(part + ("/" if folder else "")):
                return True
        return False


def _relative(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def discover(
    paths: list[Path], settings: Settings, also: Callable[[str], bool] | None = None, force_exclude: bool = False
) -> Discovered:
    """Python files and notebooks under `paths`; with `also`, the other files whose names it accepts as well."""
    ignores = _Ignores(settings)
    seen: set[tuple[int, int]] = set()
    files: list[Path] = []
    others: list[Path] = []
    missing: list[Path] = []
    walked: list[Path] = []
    unreadable: list[Path] = []

    def add(path: Path, status: os.stat_result) -> None:
        key = (status.st_dev, status.st_ino)
        if key not in seen:
            seen.add(key)
            checked = path.name.endswith(CHECKED_SUFFIXES)
            if checked:
                files.append(path)
            # A notebook is checked and may also launch scripts (`!accelerate launch train.py`).
            if not checked or (also is not None and also(path.name)):
                others.append(path)

    def wanted(name: str) -> bool:
        return name.endswith(CHECKED_SUFFIXES) or (also is not None and also(name))

    for given in paths:
        absolute = Path(os.path.abspath(given))
        try:
            status = absolute.stat()
        except OSError:
            missing.append(given)
            continue
        if force_exclude and ignores.force_excluded(absolute, stat.S_ISDIR(status.st_mode)):
            continue
        if stat.S_ISREG(status.st_mode):
            add(absolute, status)  # named explicitly: always checked (unless force_exclude)
        elif not stat.S_ISDIR(status.st_mode):
            unreadable.append(absolute)  # a FIFO or a device: never opened, so nothing can hang
        else:
            _walk(absolute, ignores, add, wanted, unreadable.append)
            walked.append(absolute.resolve())
    return Discovered(sorted(files), missing, sorted(others), tuple(walked), unreadable)


def repository_files(root: Path, settings: Settings, wanted: Callable[[str], bool]) -> list[Path]:
    """Every file under `root` whose name `wanted(name)` accepts, with the same excludes as Python files."""
    found: list[Path] = []
    _walk(root, _Ignores(settings), lambda path, _: found.append(path), wanted)
    return found


def _walk(
    top: Path,
    ignores: _Ignores,
    add: Callable[[Path, os.stat_result], None],
    wanted: Callable[[str], bool],
    unreadable: Callable[[Path], None] = lambda _: None,
) -> None:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            unreadable(folder)
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not ignores.ignored(path, True):
                        stack.append(path)
                    continue
                if not wanted(entry.name):
                    continue
                status = entry.stat(follow_symlinks=True)
            except OSError:
                continue  # a dangling symlink or a file that vanished
            if stat.S_ISREG(status.st_mode) and not ignores.ignored(path, False):
                add(path, status)


def force_excluded(path: Path, settings: Settings, is_dir: bool = False) -> bool:
    """For a path that need not exist (`--stdin-filename`): would --force-exclude skip it?"""
    return _Ignores(settings).force_excluded(Path(os.path.abspath(path)), is_dir)


def real_path(path: Path) -> Path:
    """`path.resolve()`, resolving each folder once (launch evidence is keyed by real paths)."""
    return _real_folder(str(path.parent)) / path.name if not path.is_symlink() else path.resolve()


@functools.lru_cache(maxsize=4096)
def _real_folder(folder: str) -> Path:
    return Path(os.path.realpath(folder))
