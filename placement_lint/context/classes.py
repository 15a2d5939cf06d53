"""The base classes of classes a file imports from its repository's modules.

`from trainers import CustomSFT`, with `class CustomSFT(SFTTrainer)` in trainers.py: a call of
CustomSFT is an SFTTrainer's. Asked on demand while the file is checked (most files never ask), of
the repository's module graph, which reads each module once per run and process; every module
looked at is a dependency of the file's cached result, as the configs it names are.
"""

from __future__ import annotations

import ast
from pathlib import Path

from placement_lint.analysis.index import index_of
from placement_lint.analysis.names import last_segment
from placement_lint.context.module_graph import Binding, ClassTable, ModuleGraph, bindings_of

_MAX_MODULES = 16  # read for one file
_MAX_STEPS = 32  # classes followed for one name (a deep hierarchy, or a cycle through re-exports)


class ImportedClasses:
    """`ancestors(written)`: the base class names, nearest first, of the class a name as written in the
    file (`CustomSFT`, `trainers.CustomSFT`) refers to, when that class is defined in the repository.
    Names a base was imported under are given as imported (`class C(Base)` with `from trl import
    SFTTrainer as Base` gives "SFTTrainer")."""

    def __init__(self, module: ast.Module, path: Path, graph: ModuleGraph) -> None:
        self.module = module
        self.path = path
        self.graph = graph
        self.read: list[Path] = []  # the modules looked at, for the result cache
        self._own: dict[str, Binding] | None = None  # built at the first question: most files never ask
        self._modules: dict[Path, ClassTable | None] = {}
        self._known: dict[str, tuple[str, ...]] = {}

    def __call__(self, written: str) -> tuple[str, ...]:
        if written not in self._known:
            head, _, rest = written.partition(".")
            if self._own is None:
                self._own = bindings_of(index_of(self.module).nodes)  # imports inside main() count too
            # Classes are named in CapWords: `get_peft_model(...)` is not worth reading a package for.
            binding = self._own.get(head) if written.rpartition(".")[2][:1].isupper() else None
            located = self.graph.locate(binding, rest, self.path) if binding is not None else None
            found: list[str] = []
            if located is not None:
                self._collect(located[0], located[1], found, set())
            self._known[written] = tuple(found)
        return self._known[written]

    def _collect(self, path: Path, name: str, found: list[str], seen: set[tuple[Path, str]]) -> None:
        if (path, name) in seen or len(seen) >= _MAX_STEPS:
            return
        seen.add((path, name))
        module = self._load(path)
        if module is None:
            return
        bases = module.classes.get(name)
        if bases is None:  # re-exported: `from .trainer import CustomSFT` in a package's __init__.py
            binding = module.imports.get(name)
            located = self.graph.locate(binding, "", path) if binding is not None else None
            if located is not None:
                self._collect(located[0], located[1], found, seen)
            return
        for base in bases:
            head, _, rest = base.partition(".")
            binding = module.imports.get(head)
            imported_as = binding[2] if binding is not None and not rest else None
            found.append(imported_as or last_segment(base))
            if head in module.classes and not rest:
                self._collect(path, head, found, seen)
            elif binding is not None:
                located = self.graph.locate(binding, rest, path)
                if located is not None:
                    self._collect(located[0], located[1], found, seen)

    def _load(self, path: Path) -> ClassTable | None:
        if path in self._modules:
            return self._modules[path]
        module = None
        if len(self._modules) < _MAX_MODULES and path != self.path:
            self.read.append(path)
            module = self.graph.class_table(path)
        self._modules[path] = module
        return module
