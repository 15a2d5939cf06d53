"""Find the command lines in the files that launch training: shell scripts, Makefiles, SLURM/PBS jobs,
Dockerfiles, CI/job YAML, Procfiles, notebooks, and the code blocks of Markdown, MDX and reStructuredText
documentation anywhere in the repository.

Each command comes with the line it starts on and the folder it runs in (after any `cd`).
"""

from __future__ import annotations

import ast
import bisect
import heapq
import json
import os
import re
import shlex
from collections.abc import Generator, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.context.commands import expand, parse_command, split
from placement_lint.context.launcher_names import (
    DOCKER_NAMES,
    MAKE_NAMES,
    MARKDOWN_SUFFIXES,
    RST_SUFFIXES,
    SHELL_SUFFIXES,
    may_start_a_launcher,
    module_docstring,
)
from placement_lint.context.shell_options import run_option_loop
from placement_lint.discover import real_path
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.source import SourceError, is_notebook

if TYPE_CHECKING:
    from placement_lint.notebook import Notebook

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
    b".sh ",  # a script run with arguments (`bash scripts/launch.sh 4 3`): read with them
)
# A shell script that names no launcher may still source the script that holds its launch command.
_SOURCES_A_SCRIPT = LazyPattern(rb"(?:^|[;&|(])[ \t]*(?:source|\.)[ \t]+[^\s;&|]", re.MULTILINE)
_YAML_KEYS = {"run", "script", "command", "commands", "cmd", "entrypoint", "before_script", "after_script", "args"}
_LAUNCH_WORDS = tuple(token.decode() for token in LAUNCH_TOKENS)
# Documentation kinds: their code blocks hold commands only where a block is shell.
DOC_KINDS = ("markdown", "rst")
# A doc can hold a command only in a code block: a fence or an indented block, or an rst directive or literal block.
DOC_CODE_MARKERS = (b"```", b"~~~", b"::", b"\n    ")  # the last: a Markdown indented code block
_FENCE_OPEN = LazyPattern(r"^(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)")
_QUOTE_OR_INDENT = LazyPattern(r"^[ \t>]*")
_HEREDOC = LazyPattern(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
_SHELL_LANGUAGES = {
    "", "bash", "sh", "shell", "console", "zsh", "shell-session", "shellsession", "sh-session", "terminal",
    "text", "txt", "plaintext", "plain", "none", "sbatch", "slurm",
}  # fmt: skip
_SCRIPT_LANGUAGES = {"bash", "sh", "shell", "zsh", "sbatch", "slurm"}  # the others may show output too
# First words no Python statement starts with: a block labelled otherwise (```python, an rst `::` block)
# that opens with one of them, or with a launch, is shell under the wrong label.
_SHELL_ONLY_WORDS = {
    "cd", "pip", "pip3", "export", "git", "conda", "source", "bash", "sh", "sbatch", "mkdir", "wget", "uv",
    "huggingface-cli", "nvidia-smi",
}  # fmt: skip
_PROMPT = LazyPattern(r"^\s*(?:\([\w.-]+\)\s*)?(?:[\w.-]+@[\w.-]+(?::[^\s$]*)?)?[$%]\s+")  # `$ `, `(venv) $ `, `me@box:~$ `
_REPL = LazyPattern(r"^\s*(?:>>>|\.\.\.)(?:\s|$)")  # a Python prompt in a console session
_BARE_ASSIGNMENT = LazyPattern(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S*$")  # `NPROC=8`, never `n = 8`
_SHELL_CELL = LazyPattern(r"^\s*%%(?:bash|sh)\b")
_ASSIGNMENT = LazyPattern(r"^(?:export\s+|local\s+|declare\s+(?:-a\s+)?)?([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.DOTALL)
_OPEN_ASSIGNMENT = LazyPattern(r"^\s*(?:export\s+|local\s+|declare\s+(?:-a\s+)?)?[A-Za-z_][A-Za-z0-9_]*\+?=([\"'(])")
_ARRAY_USE = LazyPattern(r"\"?\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}\"?")
_SHELL_C = LazyPattern(r"(?:^|\s)(?:\S*/)?(?:ba|z|da)?sh\s+-[a-z]*c[a-z]*\s+(['\"])(.*)\1$", re.DOTALL)
# Redirections after a command (`2>&1`, `> log.txt`, `>>out`, `&> log`, `2>/dev/null`), and the `2>` a
# segment keeps of `2>&1` (its `&` splits segments): not words of the command.
_REDIRECTIONS = LazyPattern(r"(?:\s+(?:\d+|&)?(?:>>?|<)(?:&(?:\d+|-))?(?:\s*[^\s'\"<>&|;]+)?)+\s*$")
# `if`, `then`, `elif`, `else` and `fi` as the first word of a segment (`if [ -n "$X" ]; then CMD=a; fi`).
_BRANCH_WORD = LazyPattern(r"^(if|then|elif|else|fi)(?:\s+(.*))?$", re.DOTALL)
_EVAL = LazyPattern(r"^eval\s+(.*)$", re.DOTALL)
_WRAPPERS = ("srun", "mpirun", "mpiexec", "horovodrun", "env", "nohup", "time", "exec")
_MAX_JOINED_LINES = 100  # an unclosed quote in an assignment takes at most this many lines with it
_MAKE_ASSIGNMENT = LazyPattern(r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*(?::=|::=|\?=|\+=|=)\s*(.*)$")


class CommandLine(NamedTuple):  # a named tuple: a frozen dataclass's class costs every run 0.7 ms
    source: Path  # the file the command is written in
    line: int
    text: str  # with known variables expanded
    cwd: Path  # the folder it runs in
    env: tuple[tuple[str, str], ...] = ()  # variables the script exported before the command
    cell: int | None = None  # in a notebook, the cell (`line` is then the line in it)
    documented: bool = False  # in a Python module's docstring: its paths may be another tree's

    @property
    def where(self) -> str:
        return f"cell {self.cell}:{self.line}" if self.cell is not None else str(self.line)


def may_launch(raw: bytes, kind: str) -> bool:
    """Whether a launch file of `kind` may hold a launch command: it mentions a launcher, or it is a
    shell script that sources another (which may define the command it runs)."""
    return any(token in raw for token in LAUNCH_TOKENS) or (kind == "shell" and _SOURCES_A_SCRIPT.search(raw) is not None)


def launcher_kind(path: Path, head: bytes) -> str | None:
    """Which extractor reads this file, or None when it cannot hold a launch command."""
    name = path.name
    suffix = path.suffix.lower()
    if is_notebook(name):
        return "notebook"
    if suffix == ".py":  # read only when python_launches found it may start a launcher
        return "python"
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
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in RST_SUFFIXES:
        return "rst"
    return None


def commands_in(
    path: Path,
    text: str,
    kind: str,
    problems: list[str] | None = None,
    sourced: SourcedFiles | None = None,
    also_read: list[Path] | None = None,
) -> list[CommandLine]:
    """The commands of a file of `kind`; what could not be read well is added to `problems`. `sourced`:
    the repository's scripts a `source` line may read (none without it). The other files whose text
    went into the commands are added to `also_read` (a cache may take a launch file's commands as
    unchanged by its own text only when no other file's went into them)."""
    token, noted = _SOURCED.set(sourced), _ALSO_READ.set(also_read)
    try:
        return _commands_of_kind(path, text, kind, problems)
    finally:
        _SOURCED.reset(token)
        _ALSO_READ.reset(noted)


def _commands_of_kind(path: Path, text: str, kind: str, problems: list[str] | None) -> list[CommandLine]:
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
        return list(_yaml(path, text, [] if problems is None else problems))
    if kind == "markdown":
        return list(_markdown(path, text))
    if kind == "rst":
        return list(_rst(path, text))
    if kind == "notebook":
        return list(_notebook(path, text))
    if kind == "python":
        return list(_python(path, text))
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


_SEGMENT_MARKS = LazyPattern(r"[;&|#'\"]")


def _segments(line: str) -> list[str]:
    """Split a logical line on `&&`, `||`, `;` and `|` outside quotes, without its trailing comment."""
    if not _SEGMENT_MARKS.search(line):  # most lines: one command, nothing to scan for
        return [line.strip()] if line.strip() else []
    out: list[str] = []
    current: list[str] = []
    for token in _SEGMENT_TOKENS.finditer(line):
        text = token.group()
        if text == "#":
            at = token.start()
            if at == 0 or line[at - 1].isspace():
                break  # a comment runs to the end of the line
            current.append(text)
        elif text in _SEPARATORS:
            out.append("".join(current))
            current = []
        else:
            current.append(text)
    out.append("".join(current))
    return [segment.strip() for segment in out if segment.strip()]


# A quoted run (an unclosed quote runs to the end), a separator, a `#`, or a run of anything else: a
# regular expression's pieces, not a Python step per character (a tenth of reading a long script).
_SEGMENT_TOKENS = LazyPattern(r"""'[^']*'?|"[^"]*"?|&&|\|\||[;&|]|#|[^;&|#'"]+""")
_SEPARATORS = frozenset(("&&", "||", ";", "&", "|"))


def _shell(
    path: Path,
    text: str,
    first_line: int,
    cwd: Path,
    variables: dict[str, str],
    functions: _Functions | None = None,
    depth: int = 0,
    exported: dict[str, str] | None = None,
) -> Generator[CommandLine, None, Path]:
    """The commands of a shell text, and (returned) the folder it ends in. `functions`: the file's
    shell functions met so far; a call runs the body with its words as the positional parameters
    (`depth`: calls within calls). `exported`: what the shell exported so far, shared with the
    caller (a sourced script exports into the shell that sources it)."""
    heredoc: str | None = None
    exported = {} if exported is None else exported
    branches = _Branches()
    environment: tuple[tuple[str, str], ...] | None = ()  # `exported` as the commands carry it, shared until it changes
    whole_file = functions is None  # not a function's body, nor a `bash -c` script in the file
    functions = _Functions() if functions is None else functions
    pending = _Pending(_unrolled(_without_functions(_statements(text, first_line), functions.bodies)))
    for number, line in pending:
        stripped = line.strip()
        if heredoc is not None:  # the text of a here-document is data, not commands
            if stripped == heredoc:
                heredoc = None
            continue
        if stripped.startswith("#SBATCH"):
            _allocation(stripped, variables)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        case = _CASE.match(stripped)
        if case is not None:
            block = _case_block(pending)
            chosen = _case_branch(expand(case.group(1), variables).strip("\"'"), block)
            pending.push(block if chosen is None else chosen)  # a word known only at run time: every line, as written
            continue
        opened = _HEREDOC.search(stripped)
        if opened:
            heredoc = opened.group(1)
        folder = _folder_assignment(stripped, path, cwd)
        if folder is not None:
            variables[folder[0]] = folder[1]
            continue
        for segment in _segments(stripped):
            segment = segment.removeprefix("$ ").strip()
            branch = _BRANCH_WORD.match(segment) if segment[:1] in "eift" else None
            if branch is not None:
                if branches.follow(branch.group(1), variables, exported, branch.group(2) or ""):
                    environment = None
                segment = (branch.group(2) or "").strip() if branch.group(1) in ("then", "else") else ""
                if not segment:
                    continue
            if _assign(segment, variables, exported):
                environment = None
                continue
            if segment.startswith("cd ") or segment == "cd":
                cwd = _change_directory(path, cwd, expand(segment[3:].strip().strip("\"'"), variables))
                continue
            segment = _SCRIPT_DIRNAME.sub(lambda _: str(path.parent), segment)
            command = expand(_ARRAY_USE.sub(lambda use: variables.get(use.group(1), use.group(0)), segment), variables)
            inner = _inner_script(command)
            if inner is not None:
                wrapper, script = inner
                if _ONE_TASK in variables and wrapper.startswith("srun"):
                    wrapper = _one_task_srun(wrapper, split(wrapper))
                for line in _shell(path, script, number, cwd, dict(variables), functions, depth):
                    if exported:  # the shell it starts inherits what this one exported
                        line = line._replace(env=tuple({**exported, **dict(line.env)}.items()))
                    yield line._replace(text=f"{wrapper} {line.text}") if wrapper else line
                continue
            words = split(command)
            if words[:1] == ["source"] or words[:1] == ["."]:
                # It runs in this shell: what it sets is set here. Its own commands are its file's.
                if _source(path, words[1:], cwd, variables, exported):
                    environment = None
                continue
            body = functions.bodies.get(words[0]) if words else None
            if body is not None:
                functions.called.add(words[0])
                if depth < _MAX_CALL_DEPTH and functions.budget >= len(body):
                    functions.budget -= len(body)
                    # What the body launches, said at the call, which names the script.
                    for line in _call(path, body, words[1:], cwd, variables, functions, depth):
                        yield line._replace(line=number)
                continue
            called = _called_script(words, cwd, path) if _CALLED not in variables else None
            if called is not None:
                # What a script run with arguments launches (`bash scripts/launch.sh 4 3` in a README), said
                # at the call, as a shell function's: the script's own reading takes its defaults.
                for line in _run_script(*called, cwd, exported):
                    yield line._replace(source=path, line=number, env=tuple({**exported, **dict(line.env)}.items()))
            if _ONE_TASK in variables and words and words[0] == "srun":
                command = _one_task_srun(command, words)
            if environment is None:
                environment = tuple(exported.items())
            yield CommandLine(path, number, command, cwd, environment)
    if whole_file:  # a function this file never calls (another script may source it): read as written
        for name, body in functions.bodies.items():
            if name not in functions.called:
                yield from _shell(path, "\n".join(line for _, line in body), body[0][0] if body else 0, cwd, dict(variables))
    return cwd


class SourcedFiles:
    """The scripts a repository's launch files `source` (or `.`): repository files of at most
    MAX_LAUNCHER_BYTES, each read from disk once a run, whichever scripts source it. `read`: the
    files looked at (those looked for and missing too), which a cached context depends on."""

    def __init__(self, root: Path) -> None:
        self.root = root  # resolved
        self.read: list[Path] = []
        self.reading: list[Path] = []  # the scripts being sourced, the innermost last
        self.budget = _MAX_SOURCED_LINES  # lines all `source` lines of the run may still read
        self._texts: dict[Path, str | None] = {}
        # What sourcing a script changed, by the script, the folder and the values of the names its text
        # holds (no other variable can change what it does): a script that sources the same file in
        # each pass of a loop over other variables (open-instruct, 48 times) reads it once.
        self.effects: dict[tuple[object, ...], tuple[_Changes, _Changes]] = {}
        self._names: dict[Path, tuple[str, ...]] = {}

    def find(self, name: str, cwd: Path, script: Path) -> Path | None:
        """The repository file `source NAME` reads in `script` run from `cwd`: from `cwd`, else from
        the script's folder or a folder above it in the repository (a script is often written to be
        run from the top: `source scripts/train/base_args.sh`)."""
        if not name or "$" in name or "`" in name or name.startswith("~"):
            return None
        if os.path.isabs(name):
            options = [Path(name)]
        else:
            folders = [cwd, script.parent, *(folder for folder in script.parent.parents if folder.is_relative_to(self.root))]
            options = [folder / name for folder in dict.fromkeys(folders)]
        for option in options:
            if not os.path.isfile(option):
                continue
            try:
                real = real_path(option)
            except (OSError, RuntimeError):
                continue
            return real if real.is_relative_to(self.root) else None
        # Not there yet: creating it where the script looks first must refresh a cached context.
        self.read += [option for option in options[:2] if option.parent.is_relative_to(self.root)]
        return None

    def text(self, path: Path) -> str | None:
        if path not in self._texts:
            self.read.append(path)
            self._texts[path] = _small_text(path)
        return self._texts[path]

    def names(self, path: Path, text: str) -> tuple[str, ...]:
        """The words of a sourced script that may name a variable, and the variables that are not
        a script's own (its arguments, the `#SBATCH` allocation)."""
        if path not in self._names:
            self._names[path] = tuple(sorted(set(_NAME.findall(text)) | {"@", "#", *"0123456789"}))
        return self._names[path]


# (values set, names unset) by a sourced script
_Changes = tuple[tuple[tuple[str, str], ...], tuple[str, ...]]
_NAME = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*")


def _changes(before: dict[str, str], after: dict[str, str]) -> _Changes:
    return tuple((name, value) for name, value in after.items() if before.get(name) != value), tuple(
        name for name in before if name not in after
    )


def _apply(changes: _Changes, values: dict[str, str]) -> None:
    values.update(changes[0])
    for name in changes[1]:
        values.pop(name, None)


def _small_bytes(path: Path) -> bytes | None:
    """A repository script's bytes, or None when it is larger than a launch file may be or unreadable."""
    try:
        if path.stat().st_size > MAX_LAUNCHER_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _small_text(path: Path) -> str | None:
    raw = _small_bytes(path)
    return None if raw is None or b"\0" in raw else raw.decode("utf-8", errors="replace")


_SOURCED: ContextVar[SourcedFiles | None] = ContextVar("sourced", default=None)  # set by commands_in
# Set by commands_in too: the other files whose text goes into the commands of the file being read
# (a script it runs with arguments, a script it sources).
_ALSO_READ: ContextVar[list[Path] | None] = ContextVar("also_read", default=None)


def _note_read(path: Path) -> None:
    noted = _ALSO_READ.get()
    if noted is not None:
        noted.append(path)


_MAX_SOURCED_LINES = 200_000
_MAX_SOURCE_DEPTH = 8
_MAX_SOURCED_EFFECTS = 4096


def _source(path: Path, words: list[str], cwd: Path, variables: dict[str, str], exported: dict[str, str]) -> bool:
    """`source FILE` / `. FILE` in `path`, run from `cwd`: the variables and exports the repository
    script sets, set in `variables` and `exported` as it sets them. True when it was read. A script
    being sourced already (one that sources itself, two that source each other) is not read again."""
    sourced = _SOURCED.get()
    if sourced is None or not words or len(sourced.reading) >= _MAX_SOURCE_DEPTH:
        return False
    _note_read(Path(words[0]))  # found or not: what the file runs depends on another file
    script = sourced.find(words[0], cwd, path)
    if script is None or script == path or script in sourced.reading:
        return False
    text = sourced.text(script)
    lines = text.count("\n") + 1 if text is not None else 0
    if text is None or lines > sourced.budget:
        return False
    names = sourced.names(script, text)
    key = (
        script,
        cwd,
        tuple(sourced.reading),
        tuple((variables.get(name), exported.get(name)) for name in names),
        tuple(item for item in variables.items() if item[0][:1] == "#"),  # the allocation, `_CALLED`
    )
    if key in sourced.effects:
        changed, changed_exported = sourced.effects[key]
        _apply(changed, variables)
        _apply(changed_exported, exported)
        return True
    before, before_exported = dict(variables), dict(exported)
    sourced.budget -= lines
    followed = _CALLED not in variables
    variables[_CALLED] = ""  # only what it sets counts: the scripts it runs are not followed
    sourced.reading.append(script)
    try:
        for _ in _shell(script, text, 1, cwd, variables, _Functions(), exported=exported):
            pass  # its commands are read as its own file's
    finally:
        sourced.reading.pop()
        if followed:
            variables.pop(_CALLED, None)
    if len(sourced.effects) < _MAX_SOURCED_EFFECTS:
        sourced.effects[key] = (_changes(before, variables), _changes(before_exported, exported))
    return True


# The SLURM allocation of a batch script, where its `#SBATCH` lines give it one task in all: kept among
# the shell variables under a name no shell variable can have, so called functions see it too.
_ONE_TASK = "#SBATCH one task"
_SBATCH_TASKS = LazyPattern(r"^#SBATCH\s+(--ntasks|--ntasks-per-node|--nodes|-n|-N)(?:=|\s+)(\S+)")
_SRUN_TASK_OPTIONS = ("-n", "--ntasks", "--ntasks-per-node", "-N", "--nodes")


def _allocation(directive: str, variables: dict[str, str]) -> None:
    """Record an `#SBATCH` task count: one task in all (`--ntasks=1`, or one task per node on one node,
    SLURM's default node count) makes every `srun` of the script that sets no count of its own start
    one process."""
    found = _SBATCH_TASKS.match(directive)
    if found is None:
        return
    name = {"-n": "--ntasks", "-N": "--nodes"}.get(found.group(1), found.group(1))
    variables[f"#SBATCH {name}"] = found.group(2)
    ntasks, per_node, nodes = (variables.get(f"#SBATCH {key}") for key in ("--ntasks", "--ntasks-per-node", "--nodes"))
    # SLURM allocates one node unless told more (by --nodes, or a task count that needs more): one task
    # per node with no node count is one task.
    one = ntasks == "1" or (ntasks is None and per_node == "1" and nodes in (None, "1"))
    if one:
        variables[_ONE_TASK] = ""
    else:
        variables.pop(_ONE_TASK, None)


def _one_task_srun(command: str, words: list[str]) -> str:
    """`srun python train.py` in a batch script of one task: srun starts that one task."""
    if any(word.split("=", 1)[0] in _SRUN_TASK_OPTIONS or word[:2] in ("-n", "-N") for word in words[1:]):
        return command  # srun says itself how many
    return command.replace("srun", "srun --ntasks=1", 1)


_CALLED = "#called script"  # among a called script's variables: the scripts it runs are not followed
_SHELLS = ("bash", "sh", "zsh")
_SHIFTS = LazyPattern(rb"(?:^|[\s;&|(])(?:shift|getopts)\b")


def _called_script(words: list[str], cwd: Path, path: Path) -> tuple[Path, list[str]] | None:
    """`bash scripts/run.sh 4 3` / `./run.sh 4 3`: the repository script run, and its arguments; None
    for any other command, a script run without arguments (read on its own, it takes the same
    defaults), or one that is not a file beside `cwd` or the calling file."""
    if not words:
        return None
    if words[0].rsplit("/", 1)[-1] in _SHELLS:
        at = 1
        while at < len(words) and words[at].startswith("-"):  # `bash -x run.sh`; `bash -c` is read elsewhere
            if "c" in words[at]:
                return None
            at += 1
        if at >= len(words):
            return None
        name, arguments = words[at], words[at + 1 :]
    elif words[0].endswith(".sh") and "/" in words[0]:
        name, arguments = words[0], words[1:]
    else:
        return None
    if not arguments or not name.endswith((".sh", ".bash")) or name.startswith(("/", "$", "~")) or "$" in name:
        return None
    for folder in dict.fromkeys((cwd, path.parent)):
        script = folder / name
        if os.path.isfile(script) and script != path:
            return script, arguments
    return None


def _run_script(script: Path, arguments: list[str], cwd: Path, exported: dict[str, str]) -> Iterator[CommandLine]:
    """The commands of a repository script run with `arguments` from `cwd`; what the caller exported is
    set in it."""
    raw = _small_bytes(script)
    if raw is None:
        return
    _note_read(script)
    if b"\0" in raw:
        return
    text = raw.decode("utf-8", errors="replace")
    if _SHIFTS.search(raw):
        # `shift` / `getopts` move the positional parameters: `$1` is not the first argument throughout.
        # An option loop (`while ...; do case "$1" in --zero) ZERO="$2"; shift 2 ;;`) is stepped
        # through for the words given; any other use leaves the script unread.
        ran = run_option_loop(text, arguments)
        if ran is None:
            return
        text, arguments = ran.text, ran.positional
    inside = {**exported, _CALLED: "", "@": " ".join(shlex.quote(word) for word in arguments)}
    inside.update({str(index): word for index, word in enumerate(arguments[:9], start=1)})
    yield from _shell(script, text, 1, cwd, inside)


# `[ -z "$X" ]`, `[[ -z ${X} ]]`, `[ "$X" == "" ]`: the test of a default, `if [ -z "$N" ]; then N=8; fi`
# being `N=${N:-8}`.
_UNSET_TEST = LazyPattern(
    r"""^\[\[?\s+(?:-z\s+"?\$\{?([A-Za-z_]\w*)\}?"?|"?\$\{?([A-Za-z_]\w*)\}?"?\s*==?\s*(?:""|''))\s+\]\]?$"""
)


class _IfBlock:
    """One `if` being read: the variables it started with, and those each way through it ended with so far.
    `defaulted`: the variable its condition tests for being unset, when nothing set it before."""

    def __init__(self, variables: dict[str, str], exported: dict[str, str], condition: str) -> None:
        self.before = (dict(variables), dict(exported))
        self.ways: list[tuple[dict[str, str], dict[str, str]]] = []
        self.has_else = False
        unset = _UNSET_TEST.match(condition.strip())
        tested = (unset.group(1) or unset.group(2)) if unset is not None else None
        value = variables.get(tested, "") if tested is not None else ""
        # Unset, or set to what is known only at run time (`X=$1`): the branch gives its default.
        self.defaulted = tested if tested is not None and (tested not in variables or "$" in value) else None
        # Tested for being unset, with a value set before: the first branch is not taken.
        self.untaken = tested is not None and value != "" and "$" not in value
        self.elif_seen = False
        # Per `if` and `elif` so far, whether its test holds, when the script's own values decide it.
        self.truths: list[bool | None] = [shell_test_holds(condition, variables)]

    def taken(self) -> int | None:
        """The branch every run takes (its number among the ways; the one past the block when no test
        holds and there is no `else`), when the tests before it are all decided."""
        for number, truth in enumerate(self.truths):
            if truth is None:
                return None
            if truth:
                return number
        return len(self.truths)  # the `else`, or the way past the block


# `[ A = B ]`, `[[ A == B ]]`, `test A != B`, `[ -z A ]`, `[ -n A ]`, `[ A ]`: a test of the script's own values.
_TEST = LazyPattern(r"^(?:\[\[\s+(.*?)\s+\]\]|\[\s+(.*?)\s+\]|test\s+(.*?))$", re.DOTALL)


def shell_test_holds(condition: str, variables: dict[str, str]) -> bool | None:
    """Whether a shell `if` test holds, when it compares strings the script itself set
    (`lora=false` above `if [ $lora = true ]`); None when any word is known only at run time."""
    test = _TEST.match(expand(condition.strip(), variables))
    if test is None:
        return None
    words = split(next(group for group in test.groups() if group is not None))
    if any("$" in word or "`" in word or word in ("-a", "-o", "&&", "||", "!") for word in words):
        return None
    if len(words) == 3 and words[1] in ("=", "==", "!="):
        return (words[0] == words[2]) is (words[1] != "!=")
    if len(words) == 2 and words[0] in ("-z", "-n"):
        return (words[1] == "") is (words[0] == "-z")
    if len(words) == 1:
        return words[0] != ""
    return None


class _Branches:
    """The `if` blocks being read. Each branch is read in turn from the variables the `if` started with;
    after its `fi`, a variable keeps a value only if every way through the block leaves it the same
    (no `else`: the way past it too), else it is unknown, as a value computed at run time is."""

    def __init__(self) -> None:
        self._open: list[_IfBlock] = []

    def follow(self, word: str, variables: dict[str, str], exported: dict[str, str], condition: str = "") -> bool:
        """Take the keyword `word` (of `if` and `elif`, with its `condition`) into account; True when
        the variables changed."""
        if word == "if":
            self._open.append(_IfBlock(variables, exported, condition))
            return False
        if not self._open or word == "then":
            return False
        block = self._open[-1]
        block.ways.append((dict(variables), dict(exported)))
        if word in ("elif", "else"):
            block.has_else = block.has_else or word == "else"
            block.elif_seen = block.elif_seen or word == "elif"
            if word == "elif":
                block.truths.append(shell_test_holds(condition, block.before[0]))
            _replace(variables, block.before[0])
            _replace(exported, block.before[1])
            return True
        self._open.pop()  # `fi`
        taken = block.taken()
        if taken is not None:  # the script's own values decide every test before the branch taken
            way = block.ways[taken] if taken < len(block.ways) else block.before
            _replace(variables, way[0])
            _replace(exported, way[1])
            return True
        if block.untaken and not block.elif_seen:  # the way past the first branch: its `else`, or nothing
            taken = block.ways[1] if block.has_else else block.before
            _replace(variables, taken[0])
            _replace(exported, taken[1])
            return True
        default = block.defaulted
        if default is not None and len(block.ways) == 1 and not block.has_else and default in block.ways[0][0]:
            # Set only where it was unset: its value from here is the default, as `${N:-8}` gives it.
            before, before_exported = dict(block.before[0]), dict(block.before[1])
            before[default] = block.ways[0][0][default]
            if default in block.ways[0][1]:
                before_exported[default] = block.ways[0][1][default]
            block.before = (before, before_exported)
        if not block.has_else:
            block.ways.append(block.before)
        _replace(variables, _agreed([way[0] for way in block.ways]))
        _replace(exported, _agreed([way[1] for way in block.ways]))
        return True


def _replace(mapping: dict[str, str], values: dict[str, str]) -> None:
    if mapping != values:
        mapping.clear()
        mapping.update(values)


def _agreed(ways: list[dict[str, str]]) -> dict[str, str]:
    """The variables every way leaves with the same value."""
    first, *others = ways
    return {name: value for name, value in first.items() if all(other.get(name) == value for other in others)}


class _Pending:
    """Statements to read, where some read ahead (a `case` block) can be put back in front."""

    def __init__(self, statements: Iterator[tuple[int, str]]) -> None:
        self._statements = statements
        self._front: list[tuple[int, str]] = []

    def __iter__(self) -> _Pending:
        return self

    def __next__(self) -> tuple[int, str]:
        return self._front.pop() if self._front else next(self._statements)

    def push(self, statements: list[tuple[int, str]]) -> None:
        self._front.extend(reversed(statements))


_CASE = LazyPattern(r"^case\s+(\S+)\s+in\s*(?:#.*)?$")
_CASE_PATTERN = LazyPattern(r"^\(?\s*([^()]*?)\s*\)\s*(.*)$", re.DOTALL)
_BRANCH_END = (";;", ";&", ";;&")
_MAX_CASE_LINES = 500


def _case_block(pending: _Pending) -> list[tuple[int, str]]:
    """The statements of a `case` up to its `esac` (nested ones included), the `esac` too."""
    block: list[tuple[int, str]] = []
    depth = 1
    for number, line in pending:
        block.append((number, line))
        words = line.strip().split()
        if words[:1] == ["case"] and words[-1:] == ["in"]:
            depth += 1
        elif words[:1] == ["esac"] or words[-1:] == ["esac"]:
            depth -= 1
            if depth == 0:
                break
        if len(block) > _MAX_CASE_LINES:
            break
    return block


def _case_branch(word: str, block: list[tuple[int, str]]) -> list[tuple[int, str]] | None:
    """The statements of the branch of a `case` block that `word` takes (none when no pattern matches
    it); None when the word is known only at run time, or the block is not one this reads."""
    if not word or "$" in word or "`" in word or not block or block[-1][1].strip() != "esac":
        return None
    from fnmatch import fnmatchcase

    branch: list[tuple[int, str]] | None = None  # the statements of the branch being read
    taken = False  # the word matches its pattern: the first such branch is the one run
    depth = 0
    for number, line in block[:-1]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if branch is None:  # a pattern comes next
            opening = _CASE_PATTERN.match(stripped)
            if opening is None:
                return None
            patterns = [pattern.strip().strip("\"'") for pattern in opening.group(1).split("|")]
            branch = []
            taken = any(fnmatchcase(word, pattern) for pattern in patterns)
            stripped = opening.group(2).strip()
            if not stripped:
                continue
        words = stripped.split()
        if words[:1] == ["case"]:
            depth += 1
        elif words[:1] == ["esac"] or words[-1:] == ["esac"]:
            depth -= 1
        ends = depth == 0 and stripped.endswith(_BRANCH_END)
        body = stripped.rstrip(";&").rstrip() if ends else stripped
        if body:
            branch.append((number, body))
        if ends:
            if taken:
                return branch
            branch = None
    if taken and branch is not None:
        return branch
    return []


class _Functions:
    """A shell file's functions: their bodies by name, the ones called, and how many statements calls
    may still run (functions that call each other ten times over end)."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[tuple[int, str]]] = {}
        self.called: set[str] = set()
        self.budget = _MAX_CALLED_STATEMENTS


_FUNCTION = LazyPattern(r"^(?:function\s+([A-Za-z_][\w:.-]*)\s*(?:\(\s*\))?|([A-Za-z_][\w:.-]*)\s*\(\s*\))\s*(\{.*)?$", re.DOTALL)
_MAX_CALL_DEPTH = 8
_MAX_CALLED_STATEMENTS = 2000
_MAX_FUNCTION_BODY = 200


def _without_functions(
    statements: Iterator[tuple[int, str]], functions: dict[str, list[tuple[int, str]]]
) -> Iterator[tuple[int, str]]:
    """The statements outside function definitions; each definition's body is put in `functions`
    (`name() {`, `function name {`, the brace on the next line, or all of it on one line)."""
    pending = iter(statements)
    for number, line in pending:
        defined = _FUNCTION.match(line.strip())
        if defined is None:
            yield number, line
            continue
        name, opening = defined.group(1) or defined.group(2), defined.group(3)
        if opening is None:  # the brace on a line of its own
            following = next(pending, None)
            if following is None or not following[1].strip().startswith("{"):
                yield number, line
                if following is not None:
                    yield following
                continue
            number, opening = following[0], following[1].strip()
        functions[name] = _function_body(number, opening[1:], pending)


def _function_body(number: int, rest: str, pending: Iterator[tuple[int, str]]) -> list[tuple[int, str]]:
    """The statements up to the `}` that closes a function (`rest`: what follows its `{`)."""
    body: list[tuple[int, str]] = []
    depth = 1
    line: str | None = rest
    while line is not None and len(body) <= _MAX_FUNCTION_BODY:
        words = [word.rstrip(";") for word in line.split()]
        depth += words.count("{") - words.count("}")
        if depth <= 0:
            kept = line.strip()
            body.append((number, kept[: kept.rfind("}")].rstrip().rstrip(";")))
            return body
        body.append((number, line))
        number, line = next(pending, (number, None))  # type: ignore[arg-type]
    return body


def _call(
    path: Path,
    body: list[tuple[int, str]],
    arguments: list[str],
    cwd: Path,
    variables: dict[str, str],
    functions: _Functions,
    depth: int,
) -> Iterator[CommandLine]:
    """The commands of a shell function's body, run with `arguments` as its positional parameters."""
    inside = {**variables, "@": " ".join(shlex.quote(word) for word in arguments)}
    inside.update({str(index): word for index, word in enumerate(arguments[:9], start=1)})
    text = "\n".join(line for _, line in body)
    yield from _shell(path, text, body[0][0] if body else 0, cwd, inside, functions, depth + 1)


def _inner_script(command: str) -> tuple[str, str] | None:
    """`bash -c "torchrun ..."`, `srun -N 2 bash -c '...'` and `eval $CMD` run a script of their own:
    (the wrapper that still applies, such as `srun -N 2`, or ""; the script). None for other commands."""
    evaluated = _EVAL.match(command)
    if evaluated:
        return "", " ".join(split(evaluated.group(1)))
    shell = _SHELL_C.search(command)
    if shell is None and (">" in command or "<" in command):
        command = _REDIRECTIONS.sub("", command)
        shell = _SHELL_C.search(command)
    if shell is None:
        return None
    before = command[: shell.start()].strip()
    first = before.split(maxsplit=1)[0] if before else ""
    # `srun ... bash -c` still starts several processes; `docker run image bash -c` says nothing more.
    keeps = first in _WRAPPERS or _BARE_ASSIGNMENT.match(first) is not None
    return (before if keeps else ""), shell.group(2)


def _assign(segment: str, variables: dict[str, str], exported: dict[str, str]) -> bool:
    """Record `NAME=value`, `NAME="several words"`, `NAME=(an array)`, `NAME+=...` and `export NAME=...`;
    True when the segment is only that. A value computed when the script runs (`$(nproc)`) makes the
    name unknown from there on, never a guess."""
    assignment = _ASSIGNMENT.match(segment)
    if assignment is None:
        return False
    name, appends, raw = assignment.group(1), assignment.group(2), assignment.group(3).strip()
    if raw.startswith(("$(", "`")) and (segment.endswith((")", "`")) or ")" not in raw):
        variables.pop(name, None)
        exported.pop(name, None)
        return True
    array = raw.startswith("(") and raw.endswith(")")
    if array:
        value = raw[1:-1].strip()  # its words, quotes kept, as `${NAME[@]}` gives them
    else:
        words = split(raw) if raw else [""]
        if len(words) != 1:
            return False  # `NAME=value command ...`: an environment prefix of that one command
        value = words[0]
    if "$(" in value or "`" in value:
        if raw.startswith("'") or len(value.split()) < 2:
            variables.pop(name, None)
            exported.pop(name, None)
            return True
        # Several words (`ARGS="--deepspeed ds.json --eval_batch $((BS*2))"`): the computed one is
        # unknown, not the options written beside it.
        value = _computed_unknown(value)
    value = value if raw.startswith("'") else expand(value, variables)
    if appends:
        if name not in variables:
            return True  # appended to a value we do not know: still unknown
        value = f"{variables[name]} {value}".strip() if array else variables[name] + value
    variables[name] = value
    if segment.startswith("export "):
        exported[name] = value
    return True


def _computed_unknown(value: str) -> str:
    """`value` with each `$(...)`, `$((...))` and backquoted part, however nested, replaced by the
    unknown word `$(unknown)`: it is worked out when the script runs."""
    out: list[str] = []
    at = 0
    while at < len(value):
        if value.startswith("$(", at):
            depth, end = 0, at + 1
            while end < len(value):
                depth += {"(": 1, ")": -1}.get(value[end], 0)
                if depth == 0:
                    break
                end += 1
            out.append("$(unknown)")
            at = end + 1
        elif value[at] == "`":
            closing = value.find("`", at + 1)
            out.append("$(unknown)")
            at = len(value) if closing < 0 else closing + 1
        else:
            out.append(value[at])
            at += 1
    return "".join(out)


def _statements(text: str, first_line: int) -> Iterator[tuple[int, str]]:
    """Logical lines, where an assignment whose quoted value or array runs over several lines
    (`ARGS="` ... `"`, `ARGS=(` ... `)`) is joined into one, without its comments."""
    held: list[tuple[int, str]] = []
    opener = ""
    for number, line in _logical_lines(text, first_line):
        if not held:
            opening = _OPEN_ASSIGNMENT.match(line)
            if opening is None or not _unclosed(line[opening.start(1) :], opening.group(1)):
                yield number, line
                continue
            opener = opening.group(1)
            held = [(number, line)]
            continue
        held.append((number, _without_comment(line).strip()))
        joined = " ".join(part for _, part in held)
        if not _unclosed(joined[_OPEN_ASSIGNMENT.match(joined).start(1) :], opener):  # type: ignore[union-attr]
            yield held[0][0], joined
            held = []
        elif len(held) > _MAX_JOINED_LINES:  # a stray quote, not a long value: read the lines as they are
            yield from held
            held = []
    yield from held


_FOR = LazyPattern(r"^for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+([^;]*?)\s*(?:;\s*do\b\s*(.*))?$", re.DOTALL)
_LITERAL_WORD = LazyPattern(r"^[\w./:=+,@%-]+$")
_MAX_LOOP_VALUES = 16
_MAX_LOOP_BODY = 200
_MAX_UNROLLED = 2000


def _unrolled(statements: Iterator[tuple[int, str]], budget: list[int] | None = None) -> Iterator[tuple[int, str]]:
    """`for CFG in zero2 zero3; do ... done` read once per value, the loop variable set before each
    pass; over words not written out (`$CONFIGS`, `*.yaml`) once, with the variable unknown. Nested
    loops multiply: past `_MAX_UNROLLED` statements in a file, a loop is read once, unknown."""
    budget = [_MAX_UNROLLED] if budget is None else budget
    pending = iter(statements)
    for number, line in pending:
        loop = _FOR.match(line.strip())
        if loop is None:
            yield number, line
            continue
        name, words, rest = loop.group(1), split(loop.group(2)), loop.group(3)
        if rest is not None and rest.rstrip().endswith("done"):  # the whole loop on one line
            body = [(number, rest.rstrip()[: -len("done")].rstrip().rstrip(";"))]
        else:
            body = _loop_body(pending, number, rest)
        literal = 0 < len(words) <= _MAX_LOOP_VALUES and all(_LITERAL_WORD.match(word) for word in words)
        literal = literal and budget[0] >= len(words) * len(body)
        if literal:
            budget[0] -= len(words) * len(body)
        for value in words if literal else ["$(unknown)"]:
            yield number, f"{name}={shlex.quote(value) if literal else value}"
            yield from _unrolled(iter(body), budget)  # a loop in the loop


def _loop_body(pending: Iterator[tuple[int, str]], header: int, after_do: str | None) -> list[tuple[int, str]]:
    """The statements up to the `done` that closes this loop (nested loops included)."""
    body: list[tuple[int, str]] = []
    depth = 1
    opened = after_do is not None  # `for ...; do` on the header line; else a `do` line comes next
    if after_do:
        body.append((header, after_do))
    for number, line in pending:
        words = line.strip().split()
        if not opened and words[:1] == ["do"]:
            opened = True
            words = words[1:]
            line = " ".join(words)
        if words[:1] in (["for"], ["while"], ["until"]):
            depth += 1
        if words[-1:] == ["done"] or words[:1] == ["done"]:
            depth -= 1
            if depth == 0:
                return body
        body.append((number, line))
        if len(body) > _MAX_LOOP_BODY:
            break
    return body


def _unclosed(rest: str, opener: str) -> bool:
    if opener == "(":
        return rest.count("(") > rest.count(")")
    return (rest.count(opener) - rest.count("\\" + opener)) % 2 == 1


def _without_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index]
    return line


def _change_directory(path: Path, cwd: Path, target: str) -> Path:
    if "dirname" in target:  # cd "$(dirname "$0")" and friends: the script's own folder
        return path.parent / target.split(")", 1)[1].lstrip("/") if ")/" in target else path.parent
    if not target or target == "~" or target.startswith("$"):
        return cwd
    # An absolute folder is kept: the script's folder a variable holds (`cd $SCRIPT_DIR`) is one, and
    # one outside the repository resolves nothing there, so launches fall back to the repository's.
    # `..` is taken as the shell's `cd` takes it (logically, without resolving links): `cd sft && cd ..`
    # is back where it started.
    return Path(target) if target.startswith("/") else Path(os.path.normpath(cwd / target))


_FOLDER_ASSIGNMENT = LazyPattern(r"^(?:export\s+|local\s+|readonly\s+|declare\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.+)$")
# `$(dirname "$0")` written inside a command: the script's folder.
_SCRIPT_DIRNAME = LazyPattern(r"(\"?)\$\(dirname\s+[\"']?(?:\$0|\$\{0\}|\$\{?BASH_SOURCE(?:\[0\])?\}?)[\"']?\)\1")
_WHOLE_SUBSTITUTION = LazyPattern(
    r"(?:[)`]|\$PWD|\$\{PWD\})[\"']?(?:/\.\.)*[\"']?$"
)  # the value ends where the substitution does
_SCRIPT_FOLDER_UP = LazyPattern(r"dirname[^)]*\)[\"']?((?:/\.\.)*)")


def _folder_assignment(line: str, path: Path, cwd: Path) -> tuple[str, str] | None:
    """`DIR=$(cd "$(dirname "$0")/.." && pwd)`, `DIR=$(dirname $(realpath $0))`, `ROOT=$(pwd)`: the
    folder a script names with the shell's help, as an absolute path; None for anything else."""
    assignment = _FOLDER_ASSIGNMENT.match(line)
    if assignment is None:
        return None
    value = assignment.group(2).strip()
    if not value.startswith(("$(", '"$(', "`", '"`', "$PWD", "${PWD}", '"$PWD"', '"${PWD}"')):
        return None
    if not _WHOLE_SUBSTITUTION.search(value):
        return None  # `PYTHONPATH="$(dirname $0)/..":$PYTHONPATH torchrun ...`: a prefix of a command
    if "dirname" in value and ("$0" in value or "${0}" in value or "BASH_SOURCE" in value):
        up = _SCRIPT_FOLDER_UP.search(value)
        folder = path.parent.joinpath(*up.group(1).strip("/").split("/")) if up and up.group(1) else path.parent
        return assignment.group(1), os.path.normpath(folder)
    if value.strip('"`') in ("$(pwd)", "pwd", "$PWD", "${PWD}"):
        return assignment.group(1), os.path.normpath(cwd)
    return None


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


_YAML_COMMAND_KEY = LazyPattern(rf"^\s*-?\s*({'|'.join(sorted(_YAML_KEYS))})\s*:", re.MULTILINE)


def _yaml(path: Path, text: str, problems: list[str]) -> Iterator[CommandLine]:
    if not _YAML_COMMAND_KEY.search(text):
        return  # a config, not a job: nothing runs here
    import yaml

    try:
        documents = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except Exception as exc:  # a template (`{{ }}`) or a typo: its commands are still there, line by line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems.append(f"YAML does not parse ({reason}); its commands are read line by line")
        for line, command in _yaml_lines(text.splitlines()):
            yield from _shell(path, _untemplated(command), line, path.parent, {})
        return
    budget = [_YAML_NODE_BUDGET]
    lines = _LineFinder(text)
    for document in documents:
        for command in _yaml_commands(document, 0, budget):
            line = lines.line_of(command.splitlines()[0] if command.strip() else command)
            if line == 0:  # written as an argv list: its first word is where it starts
                line = max(lines.first_line_of((split(command) or [""])[0]), 1)
            yield from _shell(path, _untemplated(command), line, path.parent, {})


# `${{ matrix.gpus }}` (GitHub Actions), `{{ gpus }}` (Jinja, Helm): filled in by another tool, so one
# unknown word; `{% for ... %}` lines are that tool's, not commands.
_TEMPLATE_VALUE = LazyPattern(r"\$?\{\{.*?\}\}")
_TEMPLATE_TAG = LazyPattern(r"\{%.*?%\}")


def _untemplated(command: str) -> str:
    if "{{" not in command and "{%" not in command:
        return command
    return _TEMPLATE_TAG.sub("", _TEMPLATE_VALUE.sub("${TEMPLATED}", command))


_YAML_NODE_BUDGET = 50_000  # YAML aliases can make a small file a huge (or endless) tree: stop walking


def _yaml_commands(node: object, depth: int, budget: list[int]) -> Iterator[str]:
    budget[0] -= 1
    if depth > 30 or budget[0] < 0:
        return
    if isinstance(node, dict):
        # A container spec: `command: [torchrun]` and `args: [--nproc_per_node, "8", train.py]` are one argv.
        argv = _argv(node.get("command")), _argv(node.get("args"))
        joined = argv[0] is not None and argv[1] is not None
        if joined:
            yield _argv_text([*argv[0], *argv[1]])  # type: ignore[misc]
        for key, value in node.items():
            if key in _YAML_KEYS:
                if joined and key in ("command", "args"):
                    continue
                if isinstance(value, str):
                    yield value
                elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                    yield from _list_commands(value)
            else:
                yield from _yaml_commands(value, depth + 1, budget)
    elif isinstance(node, list):
        for item in node:
            yield from _yaml_commands(item, depth + 1, budget)


def _argv(value: object) -> list[str] | None:
    if isinstance(value, str):
        return split(value)
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    return None


def _list_commands(value: list[str]) -> Iterator[str]:
    # ["torchrun", "--nproc_per_node", "8", "train.py"] is one command in argv form;
    # ["pip install .", "torchrun ... train.py"] a command a line.
    if all(" " not in v for v in value) and not any(
        v.startswith(("python", "torchrun", "accelerate", "deepspeed")) for v in value[1:]
    ):
        yield " ".join(value)
    elif _shell_script(value) is not None:
        yield _shell_script(value)  # type: ignore[misc]
    else:
        yield from value


def _argv_text(argv: list[str]) -> str:
    script = _shell_script(argv)
    if script is not None:
        return script
    return " ".join(word if word and not any(c in word for c in " \t'\"") else shlex.quote(word) for word in argv)


def _shell_script(argv: list[str]) -> str | None:
    """`["bash", "-c", "torchrun ..."]`: the script the shell is given, which is the command."""
    if len(argv) > 2 and argv[0].rsplit("/", 1)[-1] in ("bash", "sh") and argv[1].startswith("-") and "c" in argv[1]:
        return argv[2]
    return None


_YAML_LINE = LazyPattern(rf"^(\s*)(?:-\s+)?({'|'.join(sorted(_YAML_KEYS))})\s*:\s*(.*?)\s*$")


def _yaml_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """The commands of a YAML file that does not parse, found by their keys: a value on the key's line
    (plain, quoted, or a `[...]` list), a `|` / `>` block, or `- item` lines below the key."""
    number = 0
    while number < len(lines):
        match = _YAML_LINE.match(lines[number])
        number += 1
        if match is None:
            continue
        indent, value = len(match.group(1)), match.group(3)
        if value and value[0] not in "|>" and not value.startswith("#"):
            yield number, _yaml_scalar(value)
            continue
        start = number
        number, block = _indented_block(lines, start, indent)
        if value[:1] in ("|", ">"):
            body = "\n".join(block)
            yield start + 1, body.replace("\n", " ") if value.startswith(">") else body
            continue
        for offset, line in enumerate(block):
            item = line.strip()
            if item.startswith("- "):
                yield start + offset + 1, _yaml_scalar(item[2:].strip())


def _yaml_scalar(value: str) -> str:
    if value.startswith("[") and value.endswith("]"):
        words = [word.strip().strip("\"'") for word in value[1:-1].split(",")]
        return "\n".join(_list_commands(words)) if words and all(words) else value
    if len(value) > 1 and value[0] in "\"'" and value[-1] == value[0]:
        return value[1:-1]
    return value


class _LineFinder:
    """The line a command of a YAML file is on, 0 when its text is not there as written (an escape, a
    folded block). The commands come in the order the file holds them, so each is looked for from
    where the one before it was found (from the top, if not after it), and a text found once is not
    looked for again: a file of 20,000 jobs is read about once, not once a job (it took 18 s). A word
    (the first of an argv list) is where it is first in the file, looked for once. A line's number
    is a bisection of the lines' offsets."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._starts: list[int] | None = None  # the offset of each line's first character
        self._found: dict[tuple[str, bool], int] = {}
        self._from = 0

    def line_of(self, needle: str) -> int:
        """The line of a command's first line (a text found before is on the line found then)."""
        return self._look_up(needle.strip(), False)

    def first_line_of(self, word: str) -> int:
        """The first line `word` is on."""
        return self._look_up(word.strip(), True)

    def _look_up(self, needle: str, from_top: bool) -> int:
        if not needle:
            return 0
        key = (needle, from_top)
        if key not in self._found:
            start = 0 if from_top else self._from
            index = self._text.find(needle, start)
            if index < 0 and start:
                index = self._text.find(needle, 0, start + len(needle) - 1)
            if index >= 0 and not from_top:
                self._from = index
            self._found[key] = self._line(index) if index >= 0 else 0
        return self._found[key]

    def _line(self, index: int) -> int:
        if self._starts is None:
            self._starts = [0, *(match.end() for match in _NEWLINE.finditer(self._text))]
        return bisect.bisect_right(self._starts, index)


_NEWLINE = LazyPattern("\n")


def _markdown(path: Path, text: str) -> Iterator[CommandLine]:
    """Fenced blocks (``` or ~~~ of any length, indented in a list or quoted) of any language label,
    and indented code blocks."""
    yield from _markdown_blocks(path, text, path.parent, _cloned_names(text))


def _markdown_blocks(path: Path, text: str, cwd: Path, clones: frozenset[str]) -> Generator[CommandLine, None, Path]:
    """The commands of a Markdown text's fenced blocks, the first run in `cwd`, and (returned) the
    folder the next block runs in (a notebook's markdown cells go on from where the last one left)."""
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        if _opens_indented_code(lines, number):
            end, body = _indented_block(lines, number, 3)
            while body and not body[-1].strip():
                body.pop()
            # Labelled by nothing, as an rst `::` block: shell only when it opens with a launch or a
            # shell-only word and is not Python.
            cwd = yield from _doc_block(path, body, number + 1, "indented", cwd, clones)
            number = end
            continue
        prefix = _QUOTE_OR_INDENT.match(lines[number]).group()  # type: ignore[union-attr]
        opening = _FENCE_OPEN.match(lines[number][len(prefix) :])
        number += 1
        if opening is None or (opening.group(1)[0] == "`" and "`" in lines[number - 1][len(prefix) + opening.end(1) :]):
            continue  # CommonMark: a backtick fence's info string holds no backtick (```code``` is inline code)
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
        cwd = yield from _doc_block(path, body, first, language, cwd, clones)
    return cwd


_LIST_ITEM = LazyPattern(r"^\s*(?:[-*+]|\d{1,9}[.)])(?:\s|$)")


def _opens_indented_code(lines: list[str], number: int) -> bool:
    """Whether a CommonMark indented code block (four spaces) starts at `lines[number]`: after
    a blank line (or at the top), with the text before it at the margin and not a list item, whose
    indented paragraphs are its own, not code."""
    line = lines[number]
    if not (line.startswith("    ") and line.strip()):
        return False
    if number > 0 and lines[number - 1].strip():
        return False  # an indented line cannot interrupt a paragraph
    before = next((lines[i] for i in range(number - 1, -1, -1) if lines[i].strip()), None)
    return before is None or (not before[0].isspace() and not _LIST_ITEM.match(before) and not before.startswith(">"))


_RST_CODE = LazyPattern(r"^(\s*)\.\.\s+(?:code-block|code|sourcecode|prompt)::[ \t]*([A-Za-z0-9_+-]*)")
_RST_DIRECTIVE = LazyPattern(r"^\s*\.\.\s")  # any other directive (`.. note::`) or a comment


def _rst(path: Path, text: str) -> Iterator[CommandLine]:
    """`.. code-block:: LANG` / `.. code::` / `.. prompt::` directives, and `::` literal blocks (no
    language: shell only when they open with a launch)."""
    lines = text.splitlines()
    number = 0
    cwd = path.parent
    clones = _cloned_names(text)
    while number < len(lines):
        line = lines[number]
        number += 1
        directive = _RST_CODE.match(line)
        if directive:
            indent, language = len(directive.group(1)), directive.group(2).lower()
        elif line.rstrip().endswith("::") and not _RST_DIRECTIVE.match(line) and line.strip().strip(":"):
            indent, language = len(line) - len(line.lstrip()), "literal"
        elif line.strip() == "::":
            indent, language = len(line) - len(line.lstrip()), "literal"
        else:
            continue
        start, body = _rst_body(lines, number, indent)
        number = start + len(body)
        cwd = yield from _doc_block(path, body, start + 1, language, cwd, clones)


def _rst_body(lines: list[str], start: int, indent: int) -> tuple[int, list[str]]:
    """The block indented past `indent` from `start` (after a directive's `:option:` lines): the index
    of its first line, and its lines, dedented."""
    while start < len(lines) and (not lines[start].strip() or lines[start].strip().startswith(":")):
        if lines[start].strip() and len(lines[start]) - len(lines[start].lstrip()) <= indent:
            return start, []
        start += 1
    return start, _indented_block(lines, start, indent)[1]


def _indented_block(lines: list[str], start: int, indent: int) -> tuple[int, list[str]]:
    """The lines from `start` indented past `indent` (blank ones included), dedented to their common
    margin, and the index of the first line after them: a YAML block value, an rst directive's body."""
    end = start
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    block = lines[start:end]
    margin = min((len(line) - len(line.lstrip()) for line in block if line.strip()), default=0)
    return end, [line[margin:] for line in block]


def _doc_block(
    path: Path, lines: list[str], first: int, language: str, cwd: Path, clones: frozenset[str] = frozenset()
) -> Generator[CommandLine, None, Path]:
    """The commands of a doc's code block, run in `cwd`, and (returned) the folder the next block runs
    in: a reader runs a doc's blocks in order, so `cd examples/sft` in one moves the launches of the
    next. All of a block labelled shell is read; otherwise (```python, an rst `::` block) only a block
    that opens with a launch or a shell-only word and is not valid Python, or its IPython `!` escapes
    and `%%bash` body. Outside a script (```bash), console prompts, when used, mark the commands: the
    other lines are output."""
    if not any(word in line for line in lines for word in _LAUNCH_WORDS) and not any(_CD.search(line) for line in lines):
        return cwd  # a block with no launch word nor `cd` neither launches nor moves anything
    if language not in _SHELL_LANGUAGES:
        shell = _shell_in_other_block(lines)
        if shell is None:
            return cwd
        lines = shell
    if language in _SCRIPT_LANGUAGES:  # a script: every line is a command, a prompt only decoration
        lines = ["" if _REPL.match(line) else _PROMPT.sub("", line, count=1) for line in lines]
    else:
        lines = _console_commands(lines)
    moved = yield from _shell(path, "\n".join(lines), first, cwd, {})
    return _carried(path, moved, cwd, clones)


def _carried(doc: Path, moved: Path, cwd: Path, clones: frozenset[str]) -> Path:
    """The folder the next block runs in: where this one moved to, if the repository has it. A doc
    that clones its own repository (`git clone URL`, then `cd NAME/fine-tune`, NAME being a folder the
    doc is in) enters it: `fine-tune` beside the doc is where its launches run (Baichuan2). A clone of
    another repository leaves the next block where it was."""
    if moved == cwd or os.path.isdir(moved):
        return moved
    try:
        parts = moved.relative_to(cwd).parts
    except ValueError:
        return cwd
    own = {folder.name.lower() for folder in doc.parents}
    if len(parts) > 1 and parts[0] in clones and parts[0].lower() in own:
        inside = cwd.joinpath(*parts[1:])
        if os.path.isdir(inside):
            return inside
    return cwd


_CD = LazyPattern(r"(?:^|[;&|(]|\$\s)\s*cd(?:\s|$)")
# `git clone [options] URL [folder]`: the folder it makes, named or the URL's last part less `.git`.
_CLONE = LazyPattern(
    r"git\s+clone\s+(?:-\S+\s+(?:\d+\s+)?)*(\S+?)(?:\.git)?/?(?:[ \t]+([^\s;&|]+))?(?:\s*(?:$|[;&|]))", re.MULTILINE
)


def _cloned_names(text: str) -> frozenset[str]:
    if "git clone" not in text:
        return frozenset()
    return frozenset(folder or url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1] for url, folder in _CLONE.findall(text))


def _shell_in_other_block(lines: list[str]) -> list[str] | None:
    code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not code:
        return None
    if _SHELL_CELL.match(code[0]):
        opening = lines.index(code[0])
        return ["" if index <= opening else line for index, line in enumerate(lines)]
    if any(line.lstrip().startswith("!") for line in code):
        return _escapes(lines)
    # Shell-style assignments (`NPROC=8`) may come first: the first command decides.
    commands = (_PROMPT.sub("", line, count=1).strip() for line in code)
    opening = next((line for line in commands if not _BARE_ASSIGNMENT.match(line)), "")
    segment = (_segments(opening) or [""])[0]
    words = split(segment)
    if not words or (words[0] not in _SHELL_ONLY_WORDS and parse_command(segment) is None):
        return None
    return None if _is_python("\n".join(lines)) else lines


def _escapes(lines: list[str]) -> list[str]:
    """The `!command` lines of a Python block (and their `\\` continuations); the rest blanked, so line
    numbers hold."""
    out: list[str] = []
    continued = False
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith("!") or continued:
            out.append(stripped.removeprefix("!"))
            continued = line.rstrip().endswith("\\")
        else:
            out.append("")
    return out


def _is_python(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _console_commands(lines: list[str]) -> list[str]:
    """Python prompts (`>>> `) blanked; where shell prompts (`$ `) are used, only the prompted lines
    (and their continuations) kept: the others are what the commands printed."""
    lines = ["" if _REPL.match(line) else line for line in lines]
    if not any(_PROMPT.match(line) for line in lines):
        return lines
    out: list[str] = []
    continued = False
    for line in lines:
        prompt = _PROMPT.match(line)
        if prompt or continued:
            out.append(line[prompt.end() :] if prompt else line)
            continued = line.rstrip().endswith("\\")
        else:
            out.append("")
    return out


def _notebook(path: Path, text: str) -> Iterator[CommandLine]:
    """Shell escapes (`!accelerate launch train.py`, `%sx ...`), `%%bash` cells, and `%cd`, which
    moves every later command; a `!cd` runs in its own shell and moves nothing after it. And the
    fenced blocks of markdown cells, read as a Markdown doc's are (a `cd` in one moves the next
    markdown cell's, not the kernel's). In cell order."""
    from placement_lint.notebook import read_notebook  # a tree without notebooks never imports it

    try:
        notebook = read_notebook(text.encode("utf-8", "surrogatepass"))
    except SourceError:
        return  # the notebook's own check names the problem
    yield from heapq.merge(_code_cell_commands(path, notebook), _markdown_cell_commands(path, notebook), key=_cell_of)


def _cell_of(command: CommandLine) -> int:
    return command.cell or 0


def _code_cell_commands(path: Path, notebook: Notebook) -> Iterator[CommandLine]:
    cwd = path.parent
    for command in notebook.shell_commands():
        if command.kind == "cd":
            cwd = _change_directory(path, cwd, command.text)
            continue
        for line in _shell(path, command.text, command.row, cwd, {}):
            yield line._replace(cell=command.cell)


def _markdown_cell_commands(path: Path, notebook: Notebook) -> Iterator[CommandLine]:
    cells = [(number, text) for number, text in notebook.markdown_cells() if "```" in text or "~~~" in text]
    if not cells:
        return
    cwd = path.parent
    clones = _cloned_names("\n".join(text for _, text in cells))
    for number, text in cells:
        blocks = _markdown_blocks(path, text, cwd, clones)
        while True:
            try:
                line = next(blocks)
            except StopIteration as done:
                cwd = done.value
                break
            yield line._replace(cell=number)


def _python(path: Path, text: str) -> Iterator[CommandLine]:
    """The launches a Python file's module docstring documents, and the commands the file runs
    (`subprocess.run([...])`, `os.system("...")`), each read as a shell script's line and said at
    the line of the call."""
    raw = text.encode("utf-8", errors="replace")
    span = module_docstring(raw)
    if span is not None:
        escaped = raw[span[0] - 4 : span[0] - 3] not in (b"r", b"R")  # not a raw string: `\\` is one backslash
        docstring = raw[span[0] : span[1]].decode("utf-8", errors="replace")
        yield from _docstring(path, raw[: span[0]].count(b"\n") + 1, docstring, escaped)
    if not may_start_a_launcher(raw):
        return  # a script that only documents its launch: not parsed here
    from placement_lint.context.python_launches import python_commands  # only for a file that may launch

    for command in python_commands(path, text):
        script = _argv_text(list(command.words)) if command.words else command.script
        for line in _shell(path, script, command.line, path.parent, {}):
            yield line._replace(line=command.line)


def _docstring(path: Path, first: int, text: str, escaped: bool) -> Iterator[CommandLine]:
    """The launches a module docstring documents (`accelerate launch --config_file ... sft_vlm.py`, its
    first line on line `first`), read as a doc's code block run from the module's folder: only the
    commands that start several processes (a distributed launcher, or `srun`/`mpirun` around python);
    the prose around them, and a plain `python script.py` (which says nothing a launch changes), are
    not read. `escaped`: a line the docstring's source ends in `\\\\` ends in one backslash, a
    continuation."""
    lines = text.splitlines()
    if escaped:
        lines = [line.rstrip()[:-1] if line.rstrip().endswith("\\\\") else line for line in lines]
    kept = [""] * len(lines)  # the lines not read blanked: the others keep their numbers
    number = 0
    while number < len(lines):
        end = number + 1
        while end < len(lines) and lines[end - 1].rstrip().endswith("\\"):
            end += 1
        command = _PROMPT.sub("", " ".join(line.rstrip().removesuffix("\\").strip() for line in lines[number:end]), count=1)
        if any(_distributed(segment) for segment in _segments(command)):
            kept[number:end] = [_PROMPT.sub("", line, count=1) for line in lines[number:end]]
        number = end
    for command in _shell(path, "\n".join(kept), first, path.parent, {}):
        if _distributed(command.text):
            yield command._replace(documented=True)


def _distributed(command: str) -> bool:
    launch = parse_command(command.strip())
    return launch is not None and (launch.launcher != "python" or launch.wrapped_by is not None)
