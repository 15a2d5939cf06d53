"""First-party helpers a file imports from its repository: `from utils import get_device_map`.

A `device_map=get_device_map()` is judged by what `get_device_map` returns, so the resolver asks
for the function's definition and resolves its `return`s in its own module. Modules are located
with `module_file`, as the class lookups do, parsed on demand (most files never ask), and every
module read is a dependency of the file's cached result.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.index import index_of
from placement_lint.context.classes import imports_of, locate_imported
from placement_lint.distributed import Setup

_MAX_BYTES = 1024 * 1024  # a helper module this large is generated or vendored: not followed
_MAX_MODULES = 8  # read for one file


class ImportedFunctions:
    """`locate(written, setup)`: the resolver of the repository module that defines the function a
    name as written in the file (`get_device_map`, `utils.get_device_map`) calls, the function, and
    the module's path for messages. One hop: a helper's own imports are not followed."""

    def __init__(self, module: ast.Module, path: Path, root: Path, display: Callable[[Path], str]) -> None:
        self.module = module
        self.path = path
        self.root = root.resolve()
        self.display = display
        self.read: list[Path] = []  # the modules looked at, for the result cache
        self._own: dict[str, tuple[str, int, str | None]] | None = None
        self._parsed: dict[Path, ast.Module | None] = {}
        self._resolvers: dict[tuple[Path, Setup], Resolver] = {}

    def __call__(self, written: str, setup: Setup) -> tuple[Resolver, ast.FunctionDef, str] | None:
        head, _, rest = written.partition(".")
        if self._own is None:
            self._own = imports_of(index_of(self.module).nodes)
        binding = self._own.get(head)
        located = locate_imported(binding, rest, self.path, self.root) if binding is not None else None
        if located is None:
            return None
        path, name = located
        module = self._load(path)
        if module is None:
            return None
        function = next((s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
        if function is None:
            return None
        key = (path, setup)
        if key not in self._resolvers:
            self._resolvers[key] = Resolver(module, setup)
        return self._resolvers[key], function, self.display(path)

    def _load(self, path: Path) -> ast.Module | None:
        if path not in self._parsed:
            if len(self._parsed) >= _MAX_MODULES or path == self.path.resolve():
                return None
            self.read.append(path)
            self._parsed[path] = _parse(path)
        return self._parsed[path]


def _parse(path: Path) -> ast.Module | None:
    try:
        raw = path.read_bytes()
        if len(raw) > _MAX_BYTES or b"return" not in raw:
            return None
        return ast.parse(raw)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
