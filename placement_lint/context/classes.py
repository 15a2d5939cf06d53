"""The base classes of classes a file imports from its repository's modules.

`from trainers import CustomSFT`, with `class CustomSFT(SFTTrainer)` in trainers.py: a call of
CustomSFT is an SFTTrainer's. Read on demand while the file is checked (most files never ask), and
every module read is a dependency of the file's cached result, as the configs it names are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from placement_lint.analysis.index import index_of
from placement_lint.analysis.names import dotted, last_segment
from placement_lint.context.modules import IMPORT_DEPTH, module_file

# What a local name is bound to by an import: (module, relative level, name imported from it; None
# when the name is the module itself, `import trainers` / `import a.b as ab`).
_Binding = tuple[str, int, str | None]
_MAX_BYTES = 1024 * 1024  # a module this large is not where a user's trainer subclass lives
_MAX_MODULES = 16  # read for one file
_MAX_STEPS = 32  # classes followed for one name (a deep hierarchy, or a cycle through re-exports)


class _Module(NamedTuple):
    classes: dict[str, list[str]]  # top-level class -> its bases as written
    imports: dict[str, _Binding]


class ImportedClasses:
    """`ancestors(written)`: the base class names, nearest first, of the class a name as written in the
    file (`CustomSFT`, `trainers.CustomSFT`) refers to, when that class is defined in the repository.
    Names a base was imported under are given as imported (`class C(Base)` with `from trl import
    SFTTrainer as Base` gives "SFTTrainer")."""

    def __init__(self, module: ast.Module, path: Path, root: Path, parsed: dict[Path, _Module | None] | None = None) -> None:
        """`parsed`: modules already read, shared by the lookups of one run over a repository's files."""
        self.module = module
        self.path = path
        self.root = root.resolve()
        self.read: list[Path] = []  # the modules looked at, for the result cache
        self._parsed = parsed if parsed is not None else {}
        self._own: dict[str, _Binding] | None = None  # built at the first question: most files never ask
        self._modules: dict[Path, _Module | None] = {}
        self._known: dict[str, tuple[str, ...]] = {}

    def __call__(self, written: str) -> tuple[str, ...]:
        if written not in self._known:
            head, _, rest = written.partition(".")
            if self._own is None:
                self._own = _imports_of(index_of(self.module).nodes)  # imports inside main() count too
            # Classes are named in CapWords: `get_peft_model(...)` is not worth reading a package for.
            binding = self._own.get(head) if written.rpartition(".")[2][:1].isupper() else None
            located = self._locate(binding, rest, self.path, 0) if binding is not None else None
            found: list[str] = []
            if located is not None:
                self._collect(located[0], located[1], found, set(), 1)
            self._known[written] = tuple(found)
        return self._known[written]

    def _locate(self, binding: _Binding, rest: str, importer: Path, hops: int) -> tuple[Path, str] | None:
        """The module file and class name `binding` + `.rest` names, if the module is in the repository."""
        if hops >= IMPORT_DEPTH:
            return None
        return locate_imported(binding, rest, importer, self.root)

    def _collect(self, path: Path, name: str, found: list[str], seen: set[tuple[Path, str]], hops: int) -> None:
        if (path, name) in seen or len(seen) >= _MAX_STEPS:
            return
        seen.add((path, name))
        module = self._load(path)
        if module is None:
            return
        bases = module.classes.get(name)
        if bases is None:  # re-exported: `from .trainer import CustomSFT` in a package's __init__.py
            binding = module.imports.get(name)
            located = self._locate(binding, "", path, hops) if binding is not None else None
            if located is not None:
                self._collect(located[0], located[1], found, seen, hops + 1)
            return
        for base in bases:
            head, _, rest = base.partition(".")
            binding = module.imports.get(head)
            imported_as = binding[2] if binding is not None and not rest else None
            found.append(imported_as or last_segment(base))
            if head in module.classes and not rest:
                self._collect(path, head, found, seen, hops)
            elif binding is not None:
                located = self._locate(binding, rest, path, hops)
                if located is not None:
                    self._collect(located[0], located[1], found, seen, hops + 1)

    def _load(self, path: Path) -> _Module | None:
        if path in self._modules:
            return self._modules[path]
        module = None
        if len(self._modules) < _MAX_MODULES and path != self.path:
            self.read.append(path)
            if path not in self._parsed:
                self._parsed[path] = _parse(path)
            module = self._parsed[path]
        self._modules[path] = module
        return module


def locate_imported(binding: _Binding, rest: str, importer: Path, root: Path) -> tuple[Path, str] | None:
    """The repository module file, and the name in it, that an imported name (`binding`) followed by
    `.rest` as written (`trainers.CustomSFT`: the binding of `trainers`, then "CustomSFT") refers to."""
    module, level, name = binding
    parts = rest.split(".") if rest else []
    if name is not None:
        if not parts:
            target = module_file(module, level, importer, root)
            return (target, name) if target is not None else None
        module = f"{module}.{name}" if module else name  # `from pkg import trainers`, then `trainers.CustomSFT`
    if not parts:
        return None  # the name is a module, not something defined in one
    module = ".".join([module, *parts[:-1]]) if module else ".".join(parts[:-1])
    target = module_file(module, level, importer, root)
    return (target, parts[-1]) if target is not None else None


def imports_of(nodes: Iterable[ast.AST]) -> dict[str, _Binding]:
    """What each name a module's imports bind refers to (every import in `nodes`)."""
    return _imports_of(nodes)


def _parse(path: Path) -> _Module | None:
    try:
        raw = path.read_bytes()
        if len(raw) > _MAX_BYTES or not (b"class" in raw or b"import" in raw):
            return None
        tree = ast.parse(raw)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    classes = {node.name: [d for d in map(dotted, node.bases) if d] for node in tree.body if isinstance(node, ast.ClassDef)}
    return _Module(classes, _imports_of(_top_level(tree.body)))


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's statements outside functions and classes: `try: from .x import A` counts."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.If, ast.Try, ast.With)):
            for name in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, name, [])
                for item in inner:
                    if isinstance(item, ast.ExceptHandler):
                        yield from _top_level(item.body)
                    else:
                        yield from _top_level([item])


def _imports_of(nodes: Iterable[ast.AST]) -> dict[str, _Binding]:
    bindings: dict[str, _Binding] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bindings[alias.asname] = (alias.name, 0, None)
                else:
                    top = alias.name.split(".")[0]
                    bindings.setdefault(top, (top, 0, None))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    bindings[alias.asname or alias.name] = (node.module or "", node.level, alias.name)
    return bindings
