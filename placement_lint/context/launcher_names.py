"""Which files can launch training, by name: what the discovery walk asks of every file it meets.
Apart from `launch_files`, which reads them, so a run the cache answers does not import the readers."""

from __future__ import annotations

import os

SHELL_SUFFIXES = {".sh", ".bash", ".zsh", ".sbatch", ".slurm", ".pbs", ".job", ".qsub", ".lsf"}
MAKE_NAMES = ("Makefile", "makefile", "GNUmakefile")
DOCKER_NAMES = ("Dockerfile", "Containerfile")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".rst")
# Suffixes whose files `launcher_kind` may read; a name without a suffix may be a shebang script.
_LAUNCHER_SUFFIXES = SHELL_SUFFIXES | {".mk", ".dockerfile", ".yml", ".yaml", *MARKDOWN_SUFFIXES, ".ipynb"}


def launcher_name(name: str) -> bool:
    """Could a file of this name hold launch commands? The discovery walk asks this of every file,
    before `launcher_kind` reads its head to be sure; both read the same tables."""
    suffix = os.path.splitext(name)[1].lower()
    return suffix == "" or suffix in _LAUNCHER_SUFFIXES or name.startswith((*MAKE_NAMES, *DOCKER_NAMES, "Procfile"))
