"""`--changed-since REF`: the files to check when only part of a repository changed.

A Python file is checked again when it changed, or when its launch context may have: a launcher
that runs it (or runs a script that imports it) changed, a file on that chain changed, or a config
changed that the launcher or the file names, directly or through another config (an accelerate
YAML naming a DeepSpeed JSON). Names are matched as text, so a doubt costs a check, never a miss.
Deleted launchers are not followed: the scripts they ran can only lose launch evidence.

This is the one place placement-lint starts a process: `git`, with a fixed argument list, no shell,
and the ref as one argument that cannot be read as an option.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from placement_lint.context.configs import MAX_CONFIG_BYTES
from placement_lint.context.launches import RepoContext, stored_text
from placement_lint.discover import real_path

CONFIG_SUFFIXES = frozenset({".json", ".yaml", ".yml", ".toml", ".cfg", ".ini"})
_GIT_TIMEOUT = 120


class GitError(Exception):
    """git is missing, the folder is not in a repository, or the ref is unknown: a usage error."""


def validate_ref(ref: str) -> str:
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n\r"):
        raise GitError(f"invalid git ref {ref!r}: give a branch, tag or commit (it may not start with '-')")
    return ref


def changed_since(ref: str, folders: Iterable[Path]) -> set[Path]:
    """Every file changed since `ref` in the repositories holding `folders`: what `git diff --name-only
    REF` lists (committed, staged and unstaged changes, deletions included) plus untracked files."""
    validate_ref(ref)
    roots = {_toplevel(folder) for folder in folders}
    changed: set[Path] = set()
    for root in sorted(roots):
        if _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", allowed=(0, 1)).returncode:
            raise GitError(f"unknown git ref {ref!r} in {root}")
        listed = _git(root, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", ref, "--")
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
        for output in (listed.stdout, untracked.stdout):
            changed.update(root / os.fsdecode(name) for name in output.split(b"\0") if name)
    return changed


def _toplevel(folder: Path) -> Path:
    completed = _git(folder, "rev-parse", "--show-toplevel", allowed=(0, 128))
    if completed.returncode:
        raise GitError(f"{folder} is not in a git repository (--changed-since needs one)")
    return Path(os.fsdecode(completed.stdout.rstrip(b"\r\n"))).resolve()


def _git(folder: Path, *args: str, allowed: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
    # The repository's own config can name programs git would run (fsmonitor hooks): not for a linter.
    command = ["git", "-c", "core.fsmonitor=false", "-C", str(folder), *args]
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        completed = subprocess.run(
            command, capture_output=True, stdin=subprocess.DEVNULL, env=environment, timeout=_GIT_TIMEOUT, check=False
        )
    except FileNotFoundError:
        raise GitError("git is not installed (--changed-since needs it)") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"cannot run git: {exc}") from None
    if completed.returncode not in allowed:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed in {folder}: {message[-1] if message else f'exit {completed.returncode}'}")
    return completed


def affected(files: list[Path], repos: list[RepoContext], changed: set[Path], cwd: Path) -> tuple[list[Path], int]:
    """The files to check, and how many of them are there only for their launch context."""
    changed = {Path(os.path.abspath(p)) for p in changed}
    # A launcher is followed by path (below); names only for configs, which are named, not run.
    mentions = _Mentions({os.fsencode(p.name) for p in changed if p.suffix.lower() in CONFIG_SUFFIXES})
    _add_config_names(mentions, repos)
    base = cwd.resolve()
    reals: dict[str, Path] = {}

    def real(display: str) -> Path:
        if display not in reals:  # a repository's evidence names its few launchers thousands of times
            reals[display] = Path(os.path.abspath(base / display))
        return reals[display]

    # Evidence names launchers and chain links by path: a stored entry whose text does not hold a
    # changed file's name cannot name the file, and one whose text holds its path as a string does
    # (as a launcher or a chain link, or next to one: a doubt costs a check). Only the rest are decoded.
    stored = None if mentions.names else _as_stored(changed, base)
    relaunched: set[Path] = set()
    for repo in repos:
        by_file = repo.by_file
        for path in by_file:
            text = stored_text(by_file, path) if stored is not None else None
            if text is not None:
                quoted_paths, names = stored  # type: ignore[misc]
                if any(quoted in text for quoted in quoted_paths):
                    relaunched.add(path)
                    continue
                if not any(name in text for name in names):
                    continue
            for item in by_file[path]:  # a repository's evidence is all launches and imports, never in-file
                launcher = real(item.path)
                if launcher in changed or any(real(link) in changed for link in item.chain) or mentions(launcher):
                    relaunched.add(path)
                    break
    chosen: list[Path] = []
    context_only = 0
    for path in files:
        resolved = real_path(path)
        if resolved in changed:
            chosen.append(path)
        elif resolved in relaunched or mentions(path):
            chosen.append(path)
            context_only += 1
    return chosen, context_only


def _as_stored(changed: set[Path], base: Path) -> tuple[list[bytes], list[bytes]] | None:
    """The changed files' paths as evidence stores them (JSON strings of their display paths), and
    their names; None when JSON may escape them (then every entry is decoded)."""
    inside = os.path.join(str(base), "")
    # As results.display_path writes them (evidence names paths relative to the working folder).
    paths = [str(p)[len(inside) :].replace(os.sep, "/") if str(p).startswith(inside) else str(p) for p in changed]
    if not all(path.isascii() and path.isprintable() and '"' not in path and "\\" not in path for path in paths):
        return None
    return [f'"{path}"'.encode() for path in paths], [p.name.encode() for p in changed]


def names_a_config(paths: Iterable[str | Path]) -> bool:
    """Is one of `paths` a config (which any file may name, so every file is a candidate)?"""
    return any(os.path.splitext(path)[1].lower() in CONFIG_SUFFIXES for path in paths)


def _add_config_names(mentions: _Mentions, repos: list[RepoContext]) -> None:
    """A config that names a changed file changes too, for whoever names it (an accelerate YAML
    naming a changed DeepSpeed JSON): add its name."""
    if not mentions.names:
        return
    configs = {p for repo in repos for p in repo.inputs if p.suffix.lower() in CONFIG_SUFFIXES}
    for _ in range(3):  # configs rarely nest deeper than that
        more = {os.fsencode(p.name) for p in configs if os.fsencode(p.name) not in mentions.names and mentions(p)}
        if not more:
            return
        mentions.names |= more


class _Mentions:
    """Does a file's text name any of `names` (changed files' names)? Each file is read once."""

    def __init__(self, names: set[bytes]) -> None:
        self.names = names
        self._texts: dict[Path, bytes] = {}

    def __call__(self, path: Path) -> bool:
        if not self.names:
            return False
        if path not in self._texts:
            try:
                with open(path, "rb") as handle:
                    self._texts[path] = handle.read(MAX_CONFIG_BYTES)  # as for configs: anything bigger is data
            except OSError:
                self._texts[path] = b""
        text = self._texts[path]
        return any(name in text for name in self.names)
