"""Read the configs a script names (DeepSpeed JSON, YAML), safely: parsed, never evaluated.

Only files inside the repository root are read, and only up to a size cap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.discover import real_path

if TYPE_CHECKING:
    import ast

    from placement_lint.context.foreign_paths import ForeignPaths

MAX_CONFIG_BYTES = 2 * 1024 * 1024


class ConfigReader:
    def __init__(self, root: Path, project_of: Callable[[Path], Path | None] | None = None, resolved: bool = False) -> None:
        self.root = root if resolved else root.resolve()
        self._project_of = project_of  # in a monorepo: the project holding a folder, where its paths may start
        self._cache: dict[Path, object] = {}
        self.warnings: list[str] = []
        self.read: list[Path] = []  # every config read or looked for: the inputs a cached result depends on
        self.loaded: list[Path] = []  # every load asked for, in order, repeats included: what each launch read
        self.taken_as: dict[str, str] = {}  # a path written for another machine -> the rule that found its file
        # Launched scripts whose text a launch's setup or arguments were read from (their `--deepspeed`
        # default, an option they hand DeepSpeed as the config, an arguments file they parse): any edit of
        # one may change what its launches run under, not only an edit of its import lines.
        self.scripts: list[Path] = []
        # The tree the run's module graph keeps of a launched script (build_repo_context), for the
        # propagation and the checker: its setup is read from the same tree. None: parsed where read.
        self.script_tree: Callable[[Path], ast.Module | None] | None = None
        self._foreign: ForeignPaths | None = None

    def find(self, name: str, near: Path) -> Path | None:
        """A config path as a script names it: relative to the script's folder, then to its project's
        root (in a monorepo), then to the repo root."""
        candidate = Path(name)
        project = self._project_of(near) if self._project_of is not None else None
        bases = [near, *([project] if project is not None else []), self.root]
        if candidate.is_absolute() and not os.path.exists(candidate):
            return self._from_another_machine(name)
        options = [candidate] if candidate.is_absolute() else [base / candidate for base in dict.fromkeys(bases)]
        for option in options:
            try:
                real = real_path(option)
            except (OSError, RuntimeError):
                continue
            if real.is_relative_to(self.root):
                if real.is_file():
                    return real
                self.read.append(real)  # not there yet: creating it must refresh cached results
        return None

    def _from_another_machine(self, name: str) -> Path | None:
        """`/workspace/configs/ds_zero3.json`: the repository file it names, by a Dockerfile's COPY or a
        unique tail (foreign_paths); the rule that matched is kept in `taken_as`, for the launch's note."""
        taken = self.foreign_paths().find(name)
        if taken is None:
            return None
        self.taken_as[name] = f"{name} taken as {self._shown(taken.path)} ({taken.rule})"
        return taken.path

    def foreign_paths(self) -> ForeignPaths:
        """The repository's files as paths written for another machine or tree are matched against,
        listed when first asked for."""
        if self._foreign is None:
            from placement_lint.context.foreign_paths import ForeignPaths

            self._foreign = ForeignPaths(self.root)
        return self._foreign

    def note(self, name: str) -> str:
        """How a config path written for another machine was found here, or ""."""
        return f", {self.taken_as[name]}" if name in self.taken_as else ""

    def _shown(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def load(self, path: Path) -> object:
        self.loaded.append(path)
        if path in self._cache:
            return self._cache[path]
        data: object = None
        self.read.append(path)
        try:
            if path.stat().st_size > MAX_CONFIG_BYTES:
                self.warnings.append(f"{self._shown(path)}: skipped, larger than {MAX_CONFIG_BYTES} bytes")
            else:
                text = path.read_text(encoding="utf-8")
                if path.suffix in (".yaml", ".yml"):
                    import yaml

                    # CSafeLoader is the same safe loader (no tags that construct objects), in C.
                    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                else:
                    data = json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            self.warnings.append(f"{self._shown(path)}: cannot parse config: {_one_line(exc)}")
        except Exception as exc:  # yaml.YAMLError and friends: a bad config is a warning, never a crash
            self.warnings.append(f"{self._shown(path)}: cannot parse config: {_one_line(exc)}")
        self._cache[path] = data
        return data


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def zero_stage_of(config: object) -> int | None:
    """`zero_optimization.stage` of a DeepSpeed config (dict from JSON)."""
    if isinstance(config, dict):
        zero = config.get("zero_optimization")
        if isinstance(zero, dict):
            stage = zero.get("stage")
            if isinstance(stage, int) and not isinstance(stage, bool):
                return stage
            if isinstance(stage, str) and stage.isdigit():
                return int(stage)
    return None
