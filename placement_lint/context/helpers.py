"""First-party helpers a file imports from its repository: `from utils import get_device_map`.

A `device_map=get_device_map()` is judged by what `get_device_map` returns, so the resolver asks
for the function's definition and resolves its `return`s in its own module; `device_map=DEVICE_MAP`
after `from settings import DEVICE_MAP`, by the value settings.py binds the name to. Modules are located and
parsed by the repository's module graph, as the class lookups are, on demand (most files never ask),
and every module read is a dependency of the file's cached result.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from placement_lint.analysis.dataflow import ForeignConstant, ForeignFunction, Resolver
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
        self._loaded: dict[tuple[Path, bool], tuple[ast.Module, str] | None] = {}  # this file's lookups, at most _MAX_MODULES
        self._resolvers: dict[tuple[Path, Setup], Resolver] = {}

    def __call__(self, written: str, setup: Setup) -> ForeignFunction | None:
        found = self._defining(written, _defines_function, constants=False)
        if found is None:
            return None
        path, name, module, text = found
        function = next((s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
        return ForeignFunction(self._resolver(path, module, setup), function, self.display(path), text) if function else None

    def constant(self, name: str, setup: Setup) -> ForeignConstant | None:
        """The value another module binds a name this file imports (`from settings import DEVICE_MAP`)
        to, when it binds it once, at its top level, and to nothing else (no `def`, class, loop or
        `global` rebinds it there): `DEVICE_MAP = {"": LOCAL_RANK}`."""
        found = self._defining(name, _binds_otherwise, constants=True)
        if found is None:
            return None
        path, defined, module, text = found
        assignments = [s for s in module.body if defined in _bound_names(s)]
        statement = assignments[0] if len(assignments) == 1 else None
        if (
            not isinstance(statement, (ast.Assign, ast.AnnAssign))
            or statement.value is None
            or _rebound_in_functions(module, text, defined)
        ):
            return None
        if isinstance(statement, ast.Assign) and not (len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
            return None  # `a = b = ...`, `a, b = ...`: not one name bound to one value
        return ForeignConstant(self._resolver(path, module, setup), statement, statement.value, self.display(path), text)

    def _defining(
        self, written: str, defines: Callable[[ast.Module, str], bool], constants: bool
    ) -> tuple[Path, str, ast.Module, str] | None:
        """The module of the repository that defines what `written` names (`defines` says whether a
        module does), past the packages' re-exports, with the name there, its tree and text."""
        head, _, rest = written.partition(".")
        if self._own is None:
            self._own = bindings_of(index_of(self.module).nodes)
        binding = self._own.get(head)
        located = self.graph.locate(binding, rest, self.path) if binding is not None else None
        for _ in range(_MAX_REEXPORTS):  # a package's __init__.py may re-export it: `from .maps import get_device_map`
            if located is None:
                return None
            path, name = located
            loaded = self._load(path, constants)
            if loaded is None:
                return None
            module, text = loaded
            binding = bindings_of(module.body).get(name)
            if binding is None or defines(module, name):
                return path, name, module, text
            located = self.graph.locate(binding, "", path)
        return None

    def _resolver(self, path: Path, module: ast.Module, setup: Setup) -> Resolver:
        key = (path, setup)
        if key not in self._resolvers:
            self._resolvers[key] = Resolver(module, setup)
        return self._resolvers[key]

    def _load(self, path: Path, constants: bool = False) -> tuple[ast.Module, str] | None:
        key = (path, constants)
        if key not in self._loaded:
            looked_at = {looked for looked, _ in self._loaded}
            if path == self.path.resolve() or (path not in looked_at and len(looked_at) >= _MAX_MODULES):
                return None
            if path not in looked_at:
                self.read.append(path)
            self._loaded[key] = self.graph.source(path, constants)
        return self._loaded[key]


def _defines_function(module: ast.Module, name: str) -> bool:
    return any(isinstance(statement, ast.FunctionDef) and statement.name == name for statement in module.body)


def _binds_otherwise(module: ast.Module, name: str) -> bool:
    """A top-level statement other than an import binds the name."""
    return any(
        name in _bound_names(statement) for statement in module.body if not isinstance(statement, (ast.Import, ast.ImportFrom))
    )


def _bound_names(statement: ast.stmt) -> set[str]:
    """The names a top-level statement binds in its module: a definition's, an import's, and every
    name stored anywhere in it (in the branches of an `if`, a loop's or a `with`'s body too)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
    return {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}


def _rebound_in_functions(module: ast.Module, text: str, name: str) -> bool:
    """A function of the module declares the name `global` (and may bind it when called); the text
    spares most modules the walk."""
    return "global" in text and any(isinstance(node, ast.Global) and name in node.names for node in ast.walk(module))
