"""Discover the Python files to check: walk the given paths, honour excludes and .gitignore files.

A file named on the command line is always checked. Directory symlinks are not followed (no
loops); each real file is checked once.
"""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from placement_lint.settings import Settings


@dataclass(frozen=True)
class Discovered:
    files: list[Path]
    missing: list[Path] = field(default_factory=list)


@functools.lru_cache(maxsize=1024)
def repository_root(start: Path) -> Path:
    """The folder holding `.git` above `start`, else the nearest with a pyproject.toml, else `start`'s folder."""
    folder = start if start.is_dir() else start.parent
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    for candidate in (folder, *folder.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return folder


class _Ignores:
    def __init__(self, settings: Settings) -> None:
        self.root = settings.root.resolve()
        self.exclude = pathspec.GitIgnoreSpec.from_lines([*settings.exclude, *settings.extend_exclude])
        self.respect_gitignore = settings.respect_gitignore
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}

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

    def _excluded(self, spec: pathspec.GitIgnoreSpec, path: Path, base: Path, is_dir: bool) -> bool:
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
        if self._excluded(self.exclude, path, self.root, is_dir):
            return True
        if not self.respect_gitignore:
            return False
        top = self.root if _relative(path, self.root) is not None else repository_root(path.parent)
        folder = path.parent
        while True:
            spec = self._gitignore(folder)
            if spec is not None and self._excluded(spec, path, folder, is_dir):
                return True
            if folder == top or folder.parent == folder:
                return False
            folder = folder.parent


def _relative(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def discover(paths: list[Path], settings: Settings) -> Discovered:
    ignores = _Ignores(settings)
    seen: set[tuple[int, int]] = set()
    files: list[Path] = []
    missing: list[Path] = []

    def add(path: Path, status: os.stat_result) -> None:
        key = (status.st_dev, status.st_ino)
        if key not in seen:
            seen.add(key)
            files.append(path)

    for given in paths:
        absolute = Path(os.path.abspath(given))
        try:
            status = absolute.stat()
        except OSError:
            missing.append(given)
            continue
        if stat.S_ISREG(status.st_mode):
            add(absolute, status)  # named explicitly: always checked
        elif stat.S_ISDIR(status.st_mode):
            _walk(absolute, ignores, add)
    return Discovered(sorted(files), missing)


def repository_files(root: Path, settings: Settings, wanted) -> list[Path]:  # type: ignore[no-untyped-def]
    """Every file under `root` whose name `wanted(name)` accepts, with the same excludes as Python files."""
    found: list[Path] = []
    _walk(root, _Ignores(settings), lambda path, _: found.append(path), wanted)
    return found


def _walk(top: Path, ignores: _Ignores, add, wanted=lambda name: name.endswith(".py")) -> None:  # type: ignore[no-untyped-def]
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
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
