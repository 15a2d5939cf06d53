"""Find the command lines in the files that launch training: shell scripts, Makefiles, SLURM/PBS jobs,
Dockerfiles, CI/job YAML, Procfiles, and fenced code blocks in READMEs and docs.

Each command comes with the line it starts on and the folder it runs in (after any `cd`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from placement_lint.context.commands import expand
from placement_lint.context.launcher_names import DOCKER_NAMES, MAKE_NAMES, MARKDOWN_SUFFIXES, SHELL_SUFFIXES
from placement_lint.source import SourceError, is_notebook

MAX_LAUNCHER_BYTES = 1024 * 1024
# A launcher file is read only if it mentions one of these.
LAUNCH_TOKENS = (
    b"accelerate",
    b"torchrun",
    b"torch.distributed",
    b"deepspeed",
    b"srun",
    b"mpirun",
    b"mpiexec",
    b"python",
    b"trl ",
)
_YAML_KEYS = {"run", "script", "command", "commands", "cmd", "entrypoint", "before_script", "after_script"}
_FENCE_OPEN = re.compile(r"^(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)")
_QUOTE_OR_INDENT = re.compile(r"^[ \t>]*")
_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
_SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console", "zsh", "shell-session", "text", "sbatch"}
_ASSIGNMENT = re.compile(r"^(?:export\s+|local\s+|declare\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_MAKE_ASSIGNMENT = re.compile(r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*(?::=|::=|\?=|\+=|=)\s*(.*)$")


@dataclass(frozen=True)
class CommandLine:
    source: Path  # the file the command is written in
    line: int
    text: str  # with known variables expanded
    cwd: Path  # the folder it runs in
    env: tuple[tuple[str, str], ...] = ()  # variables the script exported before the command
    cell: int | None = None  # in a notebook, the cell (`line` is then the line in it)

    @property
    def where(self) -> str:
        return f"cell {self.cell}:{self.line}" if self.cell is not None else str(self.line)


def launcher_kind(path: Path, head: bytes) -> str | None:
    """Which extractor reads this file, or None when it cannot hold a launch command."""
    name = path.name
    suffix = path.suffix.lower()
    if is_notebook(name):
        return "notebook"
    if suffix in SHELL_SUFFIXES or head.startswith((b"#!/bin/bash", b"#!/bin/sh", b"#!/usr/bin/env bash", b"#!/usr/bin/env sh")):
        return "shell"
    if b"#SBATCH" in head or b"#PBS" in head:
        return "shell"
    if name in MAKE_NAMES or suffix == ".mk":
        return "make"
    if name.startswith(DOCKER_NAMES) or suffix == ".dockerfile":
        return "docker"
    if name == "Procfile":
        return "procfile"
    if suffix in (".yml", ".yaml"):
        return "yaml"
    if suffix in MARKDOWN_SUFFIXES and (name.upper().startswith("README") or "docs" in path.parts):
        return "markdown"
    return None


def commands_in(path: Path, text: str, kind: str) -> list[CommandLine]:
    if kind == "shell":
        return list(_shell(path, text, 1, path.parent, {}))
    if kind == "make":
        return list(_makefile(path, text))
    if kind == "docker":
        return list(_dockerfile(path, text))
    if kind == "procfile":
        return [
            CommandLine(path, number, line.split(":", 1)[1].strip(), path.parent)
            for number, line in enumerate(text.splitlines(), start=1)
            if ":" in line and not line.lstrip().startswith("#")
        ]
    if kind == "yaml":
        return list(_yaml(path, text))
    if kind == "markdown":
        return list(_markdown(path, text))
    if kind == "notebook":
        return list(_notebook(path, text))
    return []


def _logical_lines(text: str, first_line: int) -> Iterator[tuple[int, str]]:
    """Lines with `\\` continuations joined, each with the number of its first physical line."""
    buffer: list[str] = []
    start = first_line
    for number, raw in enumerate(text.splitlines(), start=first_line):
        line = raw.rstrip()
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer.append(line[:-1])
            continue
        buffer.append(line)
        yield start, _join(buffer)
        buffer = []
    if buffer:
        yield start, _join(buffer)


def _join(parts: list[str]) -> str:
    # Keep the first line's indentation: a Makefile recipe is known by its leading tab.
    return " ".join([parts[0].rstrip(), *(part.strip() for part in parts[1:])])


def _segments(line: str) -> list[str]:
    """Split a logical line on `&&`, `||`, `;` and `|` outside quotes, without its trailing comment."""
    out, current, quote = [], [], ""
    i = 0
    while i < len(line):
        char = line[i]
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            break  # a comment runs to the end of the line
        elif line.startswith(("&&", "||"), i):
            out.append("".join(current))
            current = []
            i += 1
        elif char in ";|&":
            out.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    out.append("".join(current))
    return [segment.strip() for segment in out if segment.strip()]


def _shell(path: Path, text: str, first_line: int, cwd: Path, variables: dict[str, str]) -> Iterator[CommandLine]:
    heredoc: str | None = None
    exported: dict[str, str] = {}
    for number, line in _logical_lines(text, first_line):
        stripped = line.strip()
        if heredoc is not None:  # the text of a here-document is data, not commands
            if stripped == heredoc:
                heredoc = None
            continue
        if not stripped or stripped.startswith("#"):
            continue
        opened = _HEREDOC.search(stripped)
        if opened:
            heredoc = opened.group(1)
        for segment in _segments(stripped):
            segment = segment.removeprefix("$ ").strip()
            assignment = _ASSIGNMENT.match(segment)
            if assignment and " " not in assignment.group(2).strip().strip("\"'"):
                variables[assignment.group(1)] = expand(assignment.group(2).strip().strip("\"'"), variables)
                if segment.startswith("export "):
                    exported[assignment.group(1)] = variables[assignment.group(1)]
                continue
            if segment.startswith("cd ") or segment == "cd":
                cwd = _change_directory(path, cwd, expand(segment[3:].strip().strip("\"'"), variables))
                continue
            yield CommandLine(path, number, expand(segment, variables), cwd, tuple(exported.items()))


def _change_directory(path: Path, cwd: Path, target: str) -> Path:
    if "dirname" in target:  # cd "$(dirname "$0")" and friends: the script's own folder
        return path.parent / target.split(")", 1)[1].lstrip("/") if ")/" in target else path.parent
    if not target or target == "~" or target.startswith("$"):
        return cwd
    return (cwd / target) if not target.startswith("/") else cwd


def _makefile(path: Path, text: str) -> Iterator[CommandLine]:
    variables: dict[str, str] = {}
    for number, line in _logical_lines(text, 1):
        if not line.startswith("\t"):
            assignment = _MAKE_ASSIGNMENT.match(line.strip())
            if assignment and ":" not in assignment.group(1):
                variables[assignment.group(1)] = expand(assignment.group(2).strip(), variables)
            continue
        recipe = line.strip().lstrip("@-+").strip()
        yield from _shell(path, recipe, number, path.parent, dict(variables))


def _dockerfile(path: Path, text: str) -> Iterator[CommandLine]:
    variables: dict[str, str] = {}
    for number, line in _logical_lines(text, 1):
        instruction, _, rest = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction in ("ENV", "ARG") and "=" in rest:
            for pair in rest.split():
                name, _, value = pair.partition("=")
                variables[name] = value.strip("\"'")
        elif instruction in ("CMD", "ENTRYPOINT", "RUN"):
            rest = rest.strip()
            if rest.startswith("["):
                try:
                    rest = " ".join(json.loads(rest))
                except (ValueError, TypeError):
                    continue
            yield from _shell(path, rest, number, path.parent, dict(variables))


_YAML_COMMAND_KEY = re.compile(rf"^\s*-?\s*({'|'.join(sorted(_YAML_KEYS))})\s*:", re.MULTILINE)


def _yaml(path: Path, text: str) -> Iterator[CommandLine]:
    if not _YAML_COMMAND_KEY.search(text):
        return  # a config, not a job: nothing runs here
    import yaml

    try:
        documents = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except Exception:  # not our job to validate every YAML file; a non-parsing one holds no commands
        return
    budget = [_YAML_NODE_BUDGET]
    for document in documents:
        for command in _yaml_commands(document, 0, budget):
            line = _line_of(text, command.splitlines()[0] if command.strip() else command)
            yield from _shell(path, command, line, path.parent, {})


_YAML_NODE_BUDGET = 50_000  # YAML aliases can make a small file a huge (or endless) tree: stop walking


def _yaml_commands(node: object, depth: int, budget: list[int]) -> Iterator[str]:
    budget[0] -= 1
    if depth > 30 or budget[0] < 0:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _YAML_KEYS:
                if isinstance(value, str):
                    yield value
                elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                    # ["torchrun", "--nproc_per_node", "8", "train.py"] is one command in argv form
                    if all(" " not in v for v in value) and not any(
                        v.startswith(("python", "torchrun", "accelerate", "deepspeed")) for v in value[1:]
                    ):
                        yield " ".join(value)
                    else:
                        yield from value
            else:
                yield from _yaml_commands(value, depth + 1, budget)
    elif isinstance(node, list):
        for item in node:
            yield from _yaml_commands(item, depth + 1, budget)


def _line_of(text: str, needle: str) -> int:
    index = text.find(needle.strip()) if needle.strip() else -1
    return text.count("\n", 0, index) + 1 if index >= 0 else 1


def _markdown(path: Path, text: str) -> Iterator[CommandLine]:
    """Fenced blocks of shell (or no language): ``` or ~~~ of any length, indented in a list or quoted."""
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        prefix = _QUOTE_OR_INDENT.match(lines[number]).group()  # type: ignore[union-attr]
        opening = _FENCE_OPEN.match(lines[number][len(prefix) :])
        number += 1
        if opening is None:
            continue
        fence, language = opening.group(1), opening.group(2).lower()
        body: list[str] = []
        first = number + 1
        while number < len(lines):
            line = lines[number]
            inner = line[len(_QUOTE_OR_INDENT.match(line).group()) :]  # type: ignore[union-attr]
            number += 1
            if inner.startswith(fence[0] * len(fence)) and not inner.strip(fence[0]).strip():
                break
            body.append(line[len(prefix) :] if line.startswith(prefix) else inner)
        if language in _SHELL_LANGUAGES:
            yield from _shell(path, "\n".join(body), first, path.parent, {})


def _notebook(path: Path, text: str) -> Iterator[CommandLine]:
    """Shell escapes (`!accelerate launch train.py`, `%sx ...`), `%%bash` cells, and `%cd`, which
    moves every later command; a `!cd` runs in its own shell and moves nothing after it."""
    from placement_lint.notebook import read_notebook  # a tree without notebooks never imports it

    try:
        commands = read_notebook(text.encode("utf-8", "surrogatepass")).shell_commands()
    except SourceError:
        return  # the notebook's own check names the problem
    cwd = path.parent
    for command in commands:
        if command.kind == "cd":
            cwd = _change_directory(path, cwd, command.text)
            continue
        for line in _shell(path, command.text, command.row, cwd, {}):
            yield replace(line, cell=command.cell)
