"""The accelerate config a repository ships for `accelerate config` to install as the default.

A bare `accelerate launch train.py` reads ~/.cache/huggingface/accelerate/default_config.yaml, which
no scan of the repository can see. When the repository ships an accelerate config near the script
(README: "run `accelerate config`", "copy configs/ds_z3.yaml to your default config"), that config is
what its authors run with, so it stands for the invisible default.

Which one: the nearest folder that holds any accelerate config, itself or in a config folder just
below it (`configs/`, `accelerate_configs/`, `deepspeed/`), decides: the script's folder, then the launcher's, then the
script's parent folders up to the repository root; there the configs must agree on the setup (kind
and ZeRO stage).
Several that disagree (TRL's `examples/accelerate_configs/` holds DDP, ZeRO-1/2/3 and FSDP) say
nothing about which one a bare launch uses, so none is taken.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from placement_lint.context.configs import ConfigReader
from placement_lint.patterns import LazyPattern

_YAML = (".yaml", ".yml")
_CONFIG_FOLDER = LazyPattern(r"config|accelerate|deepspeed|zero|fsdp", re.IGNORECASE)
_MARKER = b"distributed_type"
_MAX_BYTES = 64 * 1024  # accelerate configs are a few dozen lines


class ShippedAccelerateConfigs:
    """Looks up, per launch, the one accelerate config the repository ships for it (or none)."""

    def __init__(self, root: Path, candidates: Iterable[Path], configs: ConfigReader) -> None:
        self.root = root
        self._configs = configs
        # By folder, the YAML files the launch-context walk found (it already honours excludes).
        self._by_folder: dict[Path, list[Path]] = {}
        for path in candidates:
            if path.suffix.lower() in _YAML:
                self._by_folder.setdefault(path.parent, []).append(path)
        # Config folders just below a folder; a sibling project's folder (`sft/` beside `dpo/`) is not one.
        self._below: dict[Path, list[Path]] = {}
        for folder in self._by_folder:
            if _CONFIG_FOLDER.search(folder.name):
                self._below.setdefault(folder.parent, []).append(folder)
        self._config_of: dict[Path, dict[str, object] | None] = {}

    def nearest(
        self, beside: tuple[Path, ...], setup_of: Callable[[dict[str, object], Path], object]
    ) -> tuple[Path, dict[str, object]] | None:
        """The config at the nearest level holding any, when they all give one setup (`setup_of`)."""
        for level in self._levels(beside):
            files = sorted(self._near(level))
            found = [(path, config) for path in files if (config := self._accelerate_config(path)) is not None]
            if not found:
                continue
            setups = {repr(setup_of(config, path.parent)) for path, config in found}
            return found[0] if len(setups) == 1 else None
        return None

    def _levels(self, beside: tuple[Path, ...]) -> list[Path]:
        """The script's folder (the last of `beside`), the launcher's folder unless it is one of the script's
        parent folders (they come in their turn), then the script's parent folders up to the root."""
        script = beside[-1] if beside else self.root
        parents = [folder for folder in script.parents if folder.is_relative_to(self.root)]
        levels = [script] if script.is_relative_to(self.root) else []
        levels += [folder for folder in beside[:-1] if folder.is_relative_to(self.root) and folder not in (script, *parents)]
        return [*levels, *parents]

    def _near(self, folder: Path) -> list[Path]:
        """YAML files in the folder and in the config folders just below it."""
        return [
            *self._by_folder.get(folder, ()),
            *(path for below in self._below.get(folder, ()) for path in self._by_folder[below]),
        ]

    def _accelerate_config(self, path: Path) -> dict[str, object] | None:
        if path not in self._config_of:
            self._config_of[path] = self._read(path)
        return self._config_of[path]

    def _read(self, path: Path) -> dict[str, object] | None:
        try:
            if path.stat().st_size > _MAX_BYTES or not path.resolve().is_relative_to(self.root):
                return None
            if _MARKER not in path.read_bytes():
                return None
        except (OSError, RuntimeError):
            return None
        data = self._configs.load(path)
        if isinstance(data, dict) and "distributed_type" in data:
            return data
        return None
