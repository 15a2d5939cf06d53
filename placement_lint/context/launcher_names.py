"""Which files can launch training: by name, what the discovery walk asks of every file it meets,
and the candidates a repository's launch context reads. Apart from `launch_files` and `repo`, which
read them, so a run the cache answers, or a repository with no candidate, does not import the readers."""

from __future__ import annotations

import os
import re
from pathlib import Path

from placement_lint.discover import launch_excluded_by_settings, launch_files
from placement_lint.git_index import tracked_paths
from placement_lint.patterns import LazyPattern
from placement_lint.settings import Settings

SHELL_SUFFIXES = {".sh", ".bash", ".zsh", ".sbatch", ".slurm", ".pbs", ".job", ".qsub", ".lsf"}
MAKE_NAMES = ("Makefile", "makefile", "GNUmakefile")
DOCKER_NAMES = ("Dockerfile", "Containerfile")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
RST_SUFFIXES = (".rst",)
# Suffixes whose files `launcher_kind` may read; a name without a suffix may be a shebang script.
_LAUNCHER_SUFFIXES = SHELL_SUFFIXES | {".mk", ".dockerfile", ".yml", ".yaml", *MARKDOWN_SUFFIXES, *RST_SUFFIXES, ".ipynb"}


def launcher_name(name: str) -> bool:
    """Could a file of this name hold launch commands? The discovery walk asks this of every file,
    before `launcher_kind` reads its head to be sure; both read the same tables."""
    suffix = os.path.splitext(name)[1].lower()
    return suffix == "" or suffix in _LAUNCHER_SUFFIXES or name.startswith((*MAKE_NAMES, *DOCKER_NAMES, "Procfile"))


def launcher_candidates(
    root: Path, settings: Settings, launchers: list[Path] | None, listed: list[str] | None = None
) -> list[Path]:
    """The files the launch context of `root` (resolved) reads: `launchers`, when a walk already found
    them, else those under `root`, whatever paths the run was given (a repository's launches are its
    own, not the command line's). With `listed`, a walk made here adds the folders it listed."""
    return launchers if launchers is not None else launch_files(root, settings, launcher_name, listed)


def tracked_launchers(root: Path, settings: Settings, found: list[Path]) -> list[Path]:
    """Launch files git tracks that the walk did not meet (`found` holds what it met): committed under
    a folder a .gitignore rule leaves out (MiniCPM ignores `scripts/` and tracks its DeepSpeed scripts
    there). DEFAULT_EXCLUDE and `launch-exclude` still apply (`exclude` does not: it decides what is
    reported). Read from the index as it is when the context is built; a cached context asks again
    when the index changes."""
    if not settings.respect_gitignore:
        return []  # the walk met every file already
    tracked = tracked_paths(root)
    if not tracked:
        return []
    top = str(root) + os.sep
    known: set[str] = set()
    for path in found:
        spelled = os.path.abspath(path)
        if not spelled.startswith(top):  # a run started from a linked folder
            spelled = os.path.realpath(spelled)
        known.add(spelled[len(top) :].replace(os.sep, "/"))
    excluded = launch_excluded_by_settings(settings)
    added: list[Path] = []
    for relative in tracked:
        if relative in known or not launcher_name(relative.rpartition("/")[2]):
            continue
        path = root.joinpath(*relative.split("/"))
        if not excluded(path) and os.path.isfile(path):
            added.append(path)
    return added


# A script that starts a launcher is small (a launch.py, a console script's command); a library module
# that mentions subprocess and "deepspeed" (transformers' testing_utils.py, 200 KB) is not read as one:
# parsing those cost a cold run over transformers 0.6 s.
MAX_PYTHON_LAUNCHER_BYTES = 64 * 1024
# A Python file is parsed for launches only if it starts processes and a string in it names a launcher.
# Plain substring tests first: a regular expression over every Python file of a large tree cost ten times more.


def _may_start_processes(raw: bytes) -> bool:
    """A word of a process runner (subprocess, Popen, os.system, os.popen, os.exec, check_call,
    check_output) is in the file, where _IMPORTS_A_RUNNER may hold: each substring test reads the
    whole file when the word is absent (most files), so the rarest come first and the `os.` ones only
    after `os.` (transformers' 2,860 files: 0.59 s for the seven words, 0.2 s this way)."""
    if b"subprocess" in raw or (b"os." in raw and (b"os.system" in raw or b"os.popen" in raw or b"os.exec" in raw)):
        return True
    # Popen, check_call and check_output without those: only beside an `os` imported under another name.
    return (b"Popen" in raw or b"check_call" in raw or b"check_output" in raw) and _IMPORTS_A_RUNNER.search(raw) is not None


# Only a runner the file imports starts a process (python_launches reads `import subprocess [as sp]`,
# `import os [as o]`, `from subprocess import run`): "Number of subprocesses" in a help text, as in
# 60 of diffusers' training scripts, is none, and parsing those cost a cold run over diffusers 1.4 s.
_IMPORTS_A_RUNNER = LazyPattern(
    rb"(?:^|;)[ \t]*(?:import[ \t][^\n]*\b(?:subprocess|os[ \t]+as)\b|from[ \t]+(?:subprocess|os)[ \t]+import\b)"
    rb"|\bos\.(?:system|popen|exec)",
    re.MULTILINE,
)
_NAMES_A_LAUNCHER = LazyPattern(
    rb"""["'](?:[^"'\n]*[\s/])?(?:torchrun|deepspeed|accelerate|torch\.distributed\.(?:run|launch)|srun|mpirun)\b"""
    rb"""|["'][^"'\n]*\.sh\b"""  # a launch script it runs (`os.system("bash scripts/train.sh 4 3")`)
)


def python_files(root: Path, settings: Settings) -> list[Path]:
    """Every Python file under `root` that a launch context looks at for Python launchers, as a walk
    for launch files finds them (`exclude` does not leave them out, `launch-exclude` does)."""
    return launch_files(root, settings, _is_python, python=True)


def python_launch_files(root: Path, settings: Settings, names: list[str] | None = None) -> list[Path]:
    """The Python files under `root` (`names`, when a walk already listed them) that may start a
    launcher: they start processes and a string in them names a launcher. Read, and parsed only
    when those cheap tests pass."""
    paths = [Path(name) for name in names] if names is not None else python_files(root, settings)
    found: list[Path] = []
    for path in paths:
        try:
            with open(path, "rb") as file:
                raw = file.read(MAX_PYTHON_LAUNCHER_BYTES + 1)
        except OSError:
            continue
        if len(raw) > MAX_PYTHON_LAUNCHER_BYTES:
            continue
        if documents_a_launch(raw) or (may_start_a_launcher(raw) and _runs_a_command(path, raw)):
            found.append(path)
    return found


def may_start_a_launcher(raw: bytes) -> bool:
    """The bytes tests a Python file passes before it is parsed for the commands it runs: it imports a
    process runner and a string in it names a launcher."""
    return _may_start_processes(raw) and _IMPORTS_A_RUNNER.search(raw) is not None and _NAMES_A_LAUNCHER.search(raw) is not None


# A module docstring, found without parsing: the first thing after the comments and blank lines a file
# opens with (a licence header, `# /// script` metadata) is a triple-quoted string. A comment stops at
# `\r` as at `\n`: one that may end either way (`[^\n]*\r?\n`) made a CRLF file that holds no docstring
# take twice as long for each comment line of its header (verl's: minutes).
_DOCSTRING_OPENING = LazyPattern(rb"""\A(?:\xef\xbb\xbf)?(?:[ \t]*(?:#[^\r\n]*)?\r?\n)*[ \t]*[rRuU]?(\"\"\"|''')""")
# A launcher that starts several processes, as a docstring documents it (`python train.py` starts one).
_DOCUMENTED_LAUNCHER = LazyPattern(
    rb"(?<![\w.-])(?:torchrun|deepspeed|accelerate\s+launch|torch\.distributed\.(?:run|launch)|srun|mpirun|mpiexec|trl\s+[a-z])\b"
)


def module_docstring(raw: bytes) -> tuple[int, int] | None:
    """Where a module's docstring text is in `raw` (between its triple quotes), or None."""
    opening = _DOCSTRING_OPENING.match(raw)
    if opening is None:
        return None
    end = raw.find(opening.group(1), opening.end())
    return (opening.end(), end) if end >= 0 else None


def documents_a_launch(raw: bytes) -> bool:
    """The module docstring names a launcher (TRL's examples open with the `accelerate launch` that runs
    them): a launch source, read as a doc's code block is."""
    span = module_docstring(raw)
    return span is not None and _DOCUMENTED_LAUNCHER.search(raw, *span) is not None


def _runs_a_command(path: Path, raw: bytes) -> bool:
    """The file starts a command the launch readers can read (parsed, never run): a library that only
    names `"deepspeed"` as an option beside a `subprocess` import is no launch file, and would make a
    whole launch context be built for a tree with no launch in it."""
    from placement_lint.context.python_launches import python_commands  # only for a file that may launch

    for command in python_commands(path, raw.decode("utf-8", errors="replace")):  # as the launch files are read
        text = " ".join(command.words) if command.words else command.script
        if _STARTS_A_LAUNCHER.search(text.encode("utf-8", errors="replace")):
            return True
    return False


# A command that starts a launcher or runs a launch script (`subprocess.check_output(["ninja", "--version"])` does not).
_STARTS_A_LAUNCHER = LazyPattern(
    rb"""(?:^|[\s/])(?:torchrun|deepspeed|accelerate|torch\.distributed\.(?:run|launch)|srun|mpirun)\b|\.sh\b"""
)


def _is_python(name: str) -> bool:
    return name.endswith(".py")
