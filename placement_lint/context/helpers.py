"""First-party helpers a file imports from its repository: `from utils import get_device_map`.

A `device_map=get_device_map()` is judged by what `get_device_map` returns, so the resolver asks
for the function's definition and resolves its `return`s in its own module. Modules are located and
parsed by the repository's module graph, as the class lookups are, on demand (most files never ask),
and every module read is a dependency of the file's cached result.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from placement_lint.analysis.dataflow import ForeignFunction, Resolver
from placement_lint.analysis.index import index_of
from placement_lint.context.module_graph import ModuleGraph, bindings_of
from placement_lint.distributed import Setup

_MAX_MODULES = 8  # read for one file
_MAX_REEXPORTS = 8  # packages' __init__.py files a helper's name is followed through


class ImportedFunctions:
    """`locate(written, setup)`: the resolver of the repository module that defines the function a
    name as written in the file (`get_device_map`, `utils.get_device_map`) calls, the function, and
    the module's path for messages. One hop: a helper's own imports are not followed."""

    def __init__(
        self,
        module: ast.Module,
        path: Path,
        graph: ModuleGraph,
        display: Callable[[Path], str],
    ) -> None:
        self.module = module
        self.path = path
        self.graph = graph
        self.display = display
        self.read: list[Path] = []  # the modules looked at, for the result cache
        self._own: dict[str, tuple[str, int, str | None]] | None = None
        self._loaded: dict[Path, tuple[ast.Module, str] | None] = {}  # this file's lookups, at most _MAX_MODULES
        self._resolvers: dict[tuple[Path, Setup], Resolver] = {}

    def __call__(self, written: str, setup: Setup) -> ForeignFunction | None:
        head, _, rest = written.partition(".")
        if self._own is None:
            self._own = bindings_of(index_of(self.module).nodes)
        binding = self._own.get(head)
        located = self.graph.locate(binding, rest, self.path) if binding is not None else None
        for _ in range(_MAX_REEXPORTS):  # a package's __init__.py may re-export it: `from .maps import get_device_map`
            if located is None:
                return None
            path, name = located
            loaded = self._load(path)
            if loaded is None:
                return None
            module, text = loaded
            function = next((s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
            if function is not None:
                key = (path, setup)
                if key not in self._resolvers:
                    self._resolvers[key] = Resolver(module, setup)
                return ForeignFunction(self._resolvers[key], function, self.display(path), text)
            binding = bindings_of(module.body).get(name)
            located = self.graph.locate(binding, "", path) if binding is not None else None
        return None

    def _load(self, path: Path) -> tuple[ast.Module, str] | None:
        if path not in self._loaded:
            if len(self._loaded) >= _MAX_MODULES or path == self.path.resolve():
                return None
            self.read.append(path)
            self._loaded[path] = self.graph.source(path)
        return self._loaded[path]
