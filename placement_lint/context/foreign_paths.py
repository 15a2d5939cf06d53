"""A config or script path written for another machine (`/workspace/configs/ds_zero3.json` in a container,
`/scratch/me/project/configs/ds_zero3.json` on a cluster, `torchrun /home/me/project/finetune.py`), taken
as the repository file it names.

Two rules, in order: a Dockerfile of the repository copies a folder of it to where the path points
(`COPY . /workspace`, or `WORKDIR /workspace` then `COPY . .`); else the path's longest tail that ends
some file of the repository ends exactly one (two files with that tail: ambiguous, no file).
"""

from __future__ import annotations

import os
import posixpath
import shlex
from pathlib import Path, PurePosixPath

from placement_lint.git_index import tracked_paths
from placement_lint.records import NamedTuple

_MAX_LISTED = 200_000  # files listed when git's index cannot be read: a tree this large is not walked further
# A path through one of these is a tool's or a library's file (`~/.cache/huggingface/accelerate/default_config.yaml`),
# not a copy of the repository.
_NOT_A_PROJECT = {".cache", ".config", ".local", "site-packages", "dist-packages", "etc", "usr"}
_SKIPPED_FOLDERS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox"}


class Taken(NamedTuple):
    path: Path  # the repository file
    rule: str  # which rule matched, for `context`: "Dockerfile:3 COPY . /workspace", "the only file ending so"
    tail: str = ""  # by the second rule, the tail matched: `configs/ds_zero3.json`


class ForeignPaths:
    """Built once per repository, read lazily: only a launch that names such a path lists its files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: list[str] | None = None  # relative, `/`-separated
        self._copies: list[tuple[str, str, str]] | None = None  # (destination, source, rule)

    def find(self, name: str) -> Taken | None:
        written = _of_another_machine(name)
        if written is None:
            return None
        for destination, source, rule in self._dockerfile_copies():
            if name == destination or name.startswith(destination.rstrip("/") + "/"):
                relative = name[len(destination.rstrip("/")) :].lstrip("/")
                candidate = self.root / source / relative
                if os.path.isfile(candidate):
                    return Taken(candidate, rule)
        return self._tail_match(written.parts[1:])

    def tail_of(self, name: str) -> Taken | None:
        """A relative path written for another tree (`examples/scripts/sft_vlm.py` in a docstring copied
        into a repository that keeps the script in `fine_tune/`): the repository file its longest tail
        that some file ends with ends, when exactly one does."""
        parts = tuple(part for part in PurePosixPath(name).parts if part not in (".", ".."))
        return self._tail_match(parts) if parts and not PurePosixPath(name).is_absolute() else None

    def sharing_the_tail(self, name: str) -> list[str]:
        """The repository files (relative) that end in the longest tail of an absolute `name` some
        file ends in, when several do: why `find` took none of them, for the note that says so."""
        written = _of_another_machine(name)
        if written is None:
            return []
        _, ends = self._longest_tail(written.parts[1:])
        return ends if len(ends) > 1 else []

    def _tail_match(self, parts: tuple[str, ...]) -> Taken | None:
        tail, ends = self._longest_tail(parts)
        if len(ends) != 1:
            return None  # several files end so: which one the other machine had is not known
        return Taken(self.root.joinpath(*ends[0].split("/")), f"the only file of the repository ending in {tail}", tail)

    def _longest_tail(self, parts: tuple[str, ...]) -> tuple[str, list[str]]:
        """The longest tail of `parts` some repository file ends in, and the files ending in it."""
        files = self._listed()
        matching = [f for f in files if f == parts[-1] or f.endswith("/" + parts[-1])]
        if not matching:
            return "", []
        longest = 1
        for length in range(2, len(parts) + 1):  # the longest tail some file ends with
            tail = "/".join(parts[-length:])
            if any(f == tail or f.endswith("/" + tail) for f in matching):
                longest = length
            else:
                break
        tail = "/".join(parts[-longest:])
        return tail, [f for f in matching if f == tail or f.endswith("/" + tail)]

    def _listed(self) -> list[str]:
        if self._files is None:
            tracked = tracked_paths(self.root)
            self._files = tracked if tracked is not None else self._walked()
        return self._files

    def _walked(self) -> list[str]:
        found: list[str] = []
        for folder, folders, files in os.walk(self.root):
            folders[:] = sorted(f for f in folders if f not in _SKIPPED_FOLDERS)
            relative = os.path.relpath(folder, self.root).replace(os.sep, "/")
            found += [name if relative == "." else f"{relative}/{name}" for name in files]
            if len(found) > _MAX_LISTED:
                break
        return found

    def _dockerfile_copies(self) -> list[tuple[str, str, str]]:
        """(where in the image, which folder of the repository, the rule as said) for each `COPY`/`ADD`
        of a local folder in the repository's Dockerfiles; the build context is taken to be the
        repository's top."""
        if self._copies is not None:
            return self._copies
        self._copies = []
        for relative in self._listed():
            name = relative.rsplit("/", 1)[-1]
            if not (name.startswith(("Dockerfile", "Containerfile")) or name.endswith(".dockerfile")):
                continue
            try:
                text = (self.root / relative).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            self._copies += _copies_in(text, relative)
        self._copies.sort(key=lambda copy: -len(copy[0]))  # the deepest destination first
        return self._copies


def _of_another_machine(name: str) -> PurePosixPath | None:
    """An absolute path that may name a copy of the repository elsewhere; not a tool's or a library's file."""
    written = PurePosixPath(name)
    if not written.is_absolute() or len(written.parts) < 2 or _NOT_A_PROJECT.intersection(written.parts):
        return None
    return written


def _copies_in(text: str, shown: str) -> list[tuple[str, str, str]]:
    workdir = "/"
    copies: list[tuple[str, str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        instruction, _, rest = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "WORKDIR" and rest.strip():
            target = rest.strip().strip("\"'")
            workdir = posixpath.normpath(target if target.startswith("/") else f"{workdir}/{target}")
        elif instruction in ("COPY", "ADD"):
            try:
                words = [word for word in shlex.split(rest) if not word.startswith("--")]
            except ValueError:
                continue
            if len(words) != 2 or "$" in line or "://" in words[0]:
                continue
            source, destination = words[0].rstrip("/") or ".", words[1]
            rule = f"{shown}:{number} {line.strip()}"
            if not destination.startswith("/"):
                destination = posixpath.normpath(f"{workdir}/{destination}")
                rule += f" in WORKDIR {workdir}"
            if source.startswith("/") or ".." in source.split("/"):
                continue
            copies.append((destination, source, rule))
    return copies
