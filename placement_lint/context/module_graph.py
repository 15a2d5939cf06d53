"""One module graph per repository and run: where each first-party import leads, and what each
module reached holds.

The launch context asks it which modules a launched script reaches (to any depth, safe on cycles),
what each uses of the next, where a name a package re-exports is defined, and which file `python -m
pkg.mod` runs; the class lookups ask it where a trainer subclass is defined. No other layer resolves
an import.

Its cost grows with the modules reached, not with the repository: a module is read when an import
reaches it, parsed only when a cheap look at its import lines finds something of the repository
(or, for a class lookup, when it can hold a class), and each file at most once. Where packages live
(`src/`, setuptools `package-dir` and `packages.find where`, Poetry `packages`, hatch's wheel
`packages`) is read as data from pyproject.toml, setup.cfg and setup.py, never executed.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from placement_lint.analysis.index import walk
from placement_lint.context.import_lines import IMPORT_LINE, import_matches
from placement_lint.context.setup_py import literal, setup_py_tree
from placement_lint.discover import real_name
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.source import content_hash

# What a local name is bound to by an import: (module, relative level, name imported from it; None
# when the name is the module itself, `import trainers` / `import a.b as ab`).
Binding = tuple[str, int, str | None]

# Larger modules are generated data, not code an import reaches a loader through (the checker skips them too).
_MAX_MODULE_BYTES = 4 * 1024 * 1024
_MAX_CLASS_MODULE_BYTES = 1024 * 1024  # a module this large is not where a user's trainer subclass lives
_MAX_LAYOUT_BYTES = 1024 * 1024  # a pyproject.toml, setup.cfg or setup.py larger than this is not read
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LAYOUT_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
_PARSE_ERRORS = (OSError, SyntaxError, ValueError, RecursionError, MemoryError)
_UNRESOLVED = object()


# -- where packages live ----------------------------------------------------------------------


class Layout(NamedTuple):
    """Where top-level modules are looked for, after the importing file's own folder."""

    folders: tuple[Path, ...]  # the root, src/, then folders the packaging config names
    packages: tuple[tuple[tuple[str, ...], Path], ...]  # package-dir entries: ("pkg", "sub") -> its folder
    read: tuple[Path, ...]  # the config files looked at (present or not): a change to one re-reads the layout


def read_layout(root: Path) -> Layout:
    folders: list[str] = []
    packages: dict[str, str] = {}
    for name in _LAYOUT_FILES:
        raw = _small_file(root / name)
        if raw is None:
            continue
        try:
            if name == "pyproject.toml":
                _pyproject_layout(raw, folders, packages)
            elif name == "setup.cfg":
                _setup_cfg_layout(raw, folders, packages)
            elif b"package_dir" in raw or b"find_packages" in raw or b"find_namespace_packages" in raw:
                _setup_py_layout(raw, folders, packages)
        except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError, AttributeError, KeyError):
            continue  # a config we cannot read says nothing about the layout; never guessed at
    found = [root, root / "src"]
    for folder in folders:
        inside = _inside(root, folder)
        if inside is not None and inside.is_dir() and inside not in found:
            found.append(inside)
    mapped = []
    for package, folder in packages.items():
        inside = _inside(root, folder)
        if inside is not None and inside.is_dir():
            mapped.append((tuple(package.split(".")), inside))
    return Layout(tuple(found), tuple(mapped), tuple(root / name for name in _LAYOUT_FILES))


def _small_file(path: Path) -> bytes | None:
    try:
        if path.stat().st_size > _MAX_LAYOUT_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _inside(root: Path, relative: str) -> Path | None:
    """`relative` (as a config writes it) as a folder of the repository, never outside it."""
    if not isinstance(relative, str):
        return None
    try:
        folder = (root / relative.strip()).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return folder if folder.is_relative_to(root) else None


def _add_package_dirs(mapping: object, folders: list[str], packages: dict[str, str]) -> None:
    if not isinstance(mapping, dict):
        return
    for package, folder in mapping.items():
        if not isinstance(package, str) or not isinstance(folder, str):
            continue
        if package:
            packages[package] = folder
        else:
            folders.append(folder)  # {"": "src"}: every top-level package lives there


def _pyproject_layout(raw: bytes, folders: list[str], packages: dict[str, str]) -> None:
    from placement_lint.settings import parsed_toml

    tool = parsed_toml(raw.decode("utf-8")).get("tool", {})
    setuptools = tool.get("setuptools", {}) if isinstance(tool, dict) else {}
    if isinstance(setuptools, dict):
        _add_package_dirs(setuptools.get("package-dir"), folders, packages)
        found = setuptools.get("packages", {})
        where = found.get("find", {}).get("where") if isinstance(found, dict) and isinstance(found.get("find"), dict) else None
        folders += [where] if isinstance(where, str) else [w for w in where or () if isinstance(w, str)]
    poetry = tool.get("poetry", {}) if isinstance(tool, dict) else {}
    for entry in poetry.get("packages", ()) if isinstance(poetry, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("include"), str):
            include = entry["include"].split("/")[0]
            origin = entry.get("from", "")
            if include.isidentifier() and isinstance(origin, str):
                packages[include] = os.path.join(origin, include) if origin else include
    hatch = tool.get("hatch", {}) if isinstance(tool, dict) else {}
    wheel = hatch.get("build", {}).get("targets", {}).get("wheel", {}) if isinstance(hatch, dict) else {}
    for entry in wheel.get("packages", ()) if isinstance(wheel, dict) else ():
        if isinstance(entry, str) and entry.rstrip("/").rsplit("/", 1)[-1].isidentifier():
            packages[entry.rstrip("/").rsplit("/", 1)[-1]] = entry  # "src/pkg"


def _setup_cfg_layout(raw: bytes, folders: list[str], packages: dict[str, str]) -> None:
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(raw.decode("utf-8", errors="replace"))
    except configparser.Error:
        return
    if parser.has_option("options", "package_dir"):
        mapping: dict[str, str] = {}
        for line in parser.get("options", "package_dir").splitlines():
            package, equals, folder = line.partition("=")
            if equals:
                mapping[package.strip()] = folder.strip()
        _add_package_dirs(mapping, folders, packages)
    if parser.has_option("options.packages.find", "where"):
        folders += [line.strip() for line in parser.get("options.packages.find", "where").splitlines() if line.strip()]


def _setup_py_layout(raw: bytes, folders: list[str], packages: dict[str, str]) -> None:
    """`setup(package_dir={"": "src"}, packages=find_packages("src"))`, literals only."""
    for node in ast.walk(setup_py_tree(raw.decode("utf-8", errors="replace"))):
        if not isinstance(node, ast.Call):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for keyword in node.keywords:
            if keyword.arg == "package_dir":
                _add_package_dirs(literal(keyword.value), folders, packages)
            elif keyword.arg == "where" and called in ("find_packages", "find_namespace_packages"):
                where = literal(keyword.value)
                folders += [where] if isinstance(where, str) else []
        if called in ("find_packages", "find_namespace_packages") and node.args:
            where = literal(node.args[0])
            folders += [where] if isinstance(where, str) else []


# -- what a module holds ----------------------------------------------------------------------


class ClassTable(NamedTuple):
    """What the class lookups need of a module: small, so it travels to pool workers."""

    classes: dict[str, list[str]]  # top-level class -> its bases as written
    imports: dict[str, Binding]  # top-level imports (`try: from .x import A` counts)


class _File:
    """One file as the graph has read it. Only a module that imports something of the repository
    keeps its bytes and its tree, until the launch context is built: the summary, the class table
    and the parser lookups share them."""

    __slots__ = ("raw", "size", "local", "tree", "parsed", "anchored", "leads_to")

    def __init__(self, raw: bytes | None, size: int, local: bool, anchored: bool) -> None:
        self.raw = raw
        self.size = size
        self.local = local  # its import lines name a module of the repository
        self.anchored = anchored  # it holds a token a finding needs (see ModuleGraph.anchors)
        self.leads_to: tuple[Path, ...] | None = None  # the repository modules its import lines may load
        self.tree: ast.Module | None = None
        self.parsed = False


class ModuleGraph:
    """The modules of one repository, as imports reach them."""

    def __init__(
        self,
        root: Path,
        layout: Layout | None = None,
        anchors: tuple[bytes, ...] | None = None,
        project_of: Callable[[Path], Path | None] | None = None,
    ) -> None:
        """`anchors`: the tokens without which no rule can fire in a file. With them, a module is
        parsed to follow its imports only when its import lines lead (through any number of modules)
        to a module that holds one; without them, every module reached is followed. `project_of`:
        the root of the project nested in the repository that a folder belongs to, whose packages an
        import there finds too (a monorepo's `projects/p1/p1/train.py` imports `p1.modeling`)."""
        self.root = root.resolve()
        self._project_of = project_of
        self._layouts: dict[Path, Layout] = {}  # nested projects'
        self._sources: dict[tuple[Path, bool], tuple[ast.Module, str] | None] = {}  # see source()
        self._root_prefix = os.path.join(str(self.root), "")
        self._layout = layout
        self.anchors = anchors
        self._leading: set[Path] | None = None  # see leading_to_anchors
        self._resolved: dict[tuple[str, int, Path] | tuple[str, int, Path, tuple[Path, ...]], Path | None] = {}
        self._sys_path: dict[Path, tuple[Path, ...]] = {}  # importer -> the folders it adds to sys.path
        self._folders: dict[Path, Path] = {}  # importer -> its folder
        self._top_level: dict[tuple[str, Path] | tuple[str, Path, tuple[Path, ...]], bool] = {}
        self._listings: dict[str, frozenset[str] | None] = {}  # folder -> its entries, lowercase (see _may_hold)
        # (base, names, package file, a module asked) -> the file: relative imports of one package ask
        # for the same modules from each of its folders, under keys of their own in `_resolved`.
        self._candidates: dict[tuple[str, tuple[str, ...], str, bool], Path | None] = {}
        self._files: dict[Path, _File | None] = {}
        self._summaries: dict[Path, ModuleSummary | None] = {}
        self._tables: dict[Path, ClassTable | None] = {}
        self._handed: dict[Path, tuple[bytes, ast.Module]] = {}  # see parsed_tree
        self._definitions: dict[tuple[Path, str], list[tuple[Path, str]]] = {}  # see definitions

    def __getstate__(self) -> dict[str, object]:
        """What crosses to a pool worker: the layout, the resolutions and the class tables, not the trees."""
        return {"root": self.root, "layout": self._layout, "resolved": self._resolved, "tables": self._tables}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["root"], state["layout"])  # type: ignore[arg-type, misc]
        self._resolved = state["resolved"]  # type: ignore[assignment]
        self._tables = state["tables"]  # type: ignore[assignment]

    @property
    def layout(self) -> Layout:
        if self._layout is None:
            self._layout = read_layout(self.root)
        return self._layout

    # -- resolution ------------------------------------------------------------------------

    def resolve(self, name: str, level: int, importer: Path) -> Path | None:
        """The repository file `import name` (with `level` leading dots) in `importer` loads, if any."""
        folder = self._folder(importer)
        added = self._added_to_sys_path(importer) if not level else ()
        key = (name, level, folder, added) if added else (name, level, folder)
        found = self._resolved.get(key, _UNRESOLVED)
        if found is _UNRESOLVED:
            found = self._resolved[key] = self._find(name, level, folder, added)
        return found  # type: ignore[return-value]

    def _added_to_sys_path(self, importer: Path) -> tuple[Path, ...]:
        if importer not in self._sys_path:
            self._file(importer)  # reads what it adds
        return self._sys_path.get(importer, ())

    def _folder(self, path: Path) -> Path:
        """The file's folder, made once: the same importer asks thousands of times, and a Path made
        once keeps its hash."""
        folder = self._folders.get(path)
        if folder is None:
            folder = self._folders[path] = path.parent
        return folder

    def _find(self, name: str, level: int, folder: Path, added: tuple[Path, ...] = ()) -> Path | None:
        if not name and not level:
            return None
        parts = name.split(".") if name else []
        if level:
            if len(folder.parents) < level - 1:
                return None
            return self._candidate(folder.parents[level - 2] if level > 1 else folder, parts, "__init__.py")
        if not self._local_top_level(parts[0], folder, added):
            return None  # an installed package (one look per name and folder, not one per submodule)
        # The importing script's folder first (Python puts it on sys.path), then where packages live,
        # then the folders the importer adds to sys.path itself.
        found = self._located(parts, "__init__.py", (folder, *self._nested_project(folder)), self.layout)
        for base in added if found is None else ():
            found = self._candidate(base, parts, "__init__.py")
            if found is not None:
                break
        return found

    def _nested_project(self, folder: Path) -> tuple[Path, ...]:
        """Where the packages of the project nested in the repository that `folder` belongs to live."""
        project = self._project_of(folder) if self._project_of is not None else None
        return self.layout_of(project).folders if project is not None and project != self.root else ()

    def layout_of(self, project: Path) -> Layout:
        """Where a project's packages live: the repository's own, or a nested project's."""
        if project == self.root:
            return self.layout
        if project not in self._layouts:
            self._layouts[project] = read_layout(project)
        return self._layouts[project]

    def module_in(self, project: Path, name: str) -> Path | None:
        """The file of module `name` (`pkg.cli`) of the project at `project` (a console script's): in its
        folder, its `src/`, or the folders and package-dir entries its packaging declares."""
        parts = name.split(".")
        if not all(part.isidentifier() for part in parts):
            return None
        return self._located(parts, "__init__.py", (), self.layout_of(project))

    def _located(self, parts: list[str], package_file: str, first: tuple[Path, ...], layout: Layout) -> Path | None:
        """The file of the module `parts` names: in `first`'s folders, then the layout's folders, then
        its package-dir entries (`package_file`: what stands for a package, `__init__.py` for an import,
        `__main__.py` for `python -m`)."""
        for base in (*first, *layout.folders):
            found = self._candidate(base, parts, package_file)
            if found is not None:
                return found
        for package, folder in layout.packages:
            if tuple(parts[: len(package)]) == package:
                found = self._candidate(folder, parts[len(package) :], package_file)
                if found is not None:
                    return found
        return None

    def _candidate(self, base: Path, parts: list[str], package_file: str) -> Path | None:
        names = tuple(part for part in parts if part)
        key = (str(base), names, package_file, bool(parts))
        found = self._candidates.get(key, _UNRESOLVED)
        if found is _UNRESOLVED:
            found = self._candidates[key] = self._find_candidate(key[0], names, package_file, bool(parts))
        return found  # type: ignore[return-value]

    def _find_candidate(self, base: str, names: tuple[str, ...], package_file: str, module: bool) -> Path | None:
        # Strings, not Paths: thousands of candidates are looked at in a big package. Most are names
        # imported from a module, tried as its submodules first (`from .x import A` tries `x/A.py`):
        # the folder's listing rules them out, where two stats each did.
        if names and not self._may_hold(os.path.join(base, *names[:-1]), names[-1]):
            return None
        folder = os.path.join(base, *names)
        candidates = (folder + ".py", os.path.join(folder, package_file)) if module else (os.path.join(folder, package_file),)
        for candidate in candidates:
            if os.path.isfile(candidate):
                try:
                    # Its folders resolved once each (a `..` is resolved after the links before it, by realpath).
                    resolved = os.path.realpath(candidate) if ".." in candidate else real_name(candidate)
                except (OSError, ValueError):
                    continue
                if resolved.startswith(self._root_prefix):
                    return Path(resolved)
        return None

    def locate(self, binding: Binding, rest: str, importer: Path) -> tuple[Path, str] | None:
        """The repository module file, and the name in it, that an imported name (`binding`) followed
        by `.rest` as written (`trainers.CustomSFT`: the binding of `trainers`, then "CustomSFT") refers to."""
        module, level, name = binding
        parts = rest.split(".") if rest else []
        if name is not None:
            if not parts:
                target = self.resolve(module, level, importer)
                return (target, name) if target is not None else None
            module = f"{module}.{name}" if module else name  # `from pkg import trainers`, then `trainers.CustomSFT`
        if not parts:
            return None  # the name is a module, not something defined in one
        module = ".".join([module, *parts[:-1]]) if module else ".".join(parts[:-1])
        target = self.resolve(module, level, importer)
        return (target, parts[-1]) if target is not None else None

    def launched_module(self, name: str, cwd: Path) -> Path | None:
        """The file `python -m name` (or `torchrun -m name`) run from `cwd` executes: `name.py`, or a
        package's `__main__.py`."""
        parts = name.split(".")
        if not all(part.isidentifier() for part in parts):
            return None
        return self._located(parts, "__main__.py", (cwd,), self.layout)

    def imports_something_local(self, raw: bytes, folder: Path, added: tuple[Path, ...] = ()) -> bool:
        """A cheap look at the import lines: does any name a module of the repository?"""
        for match in import_matches(IMPORT_LINE, raw):
            if match.group(1):
                return True  # a relative import
            name = (match.group(2) or match.group(3) or b"").decode("ascii", "replace").split(".")[0]
            if name and self._local_top_level(name, folder, added):
                return True
        return False

    def _local_top_level(self, name: str, folder: Path, added: tuple[Path, ...] = ()) -> bool:
        key = (name, folder, added) if added else (name, folder)
        if key not in self._top_level:
            bases = (str(folder), *map(str, self._nested_project(folder)), *map(str, self.layout.folders), *map(str, added))
            self._top_level[key] = any(
                self._may_hold(base, name)
                and (os.path.isfile(os.path.join(base, name) + ".py") or os.path.isdir(os.path.join(base, name)))
                for base in bases
            ) or any(package[0] == name for package, _ in self.layout.packages)
        return self._top_level[key]

    def _may_hold(self, base: str, name: str) -> bool:
        """False when the folder's listing rules out `name.py` and `name/` on any file system (compared
        without case): one listing per folder instead of two stats per imported name; a folder that
        cannot be listed, or a name that is not ASCII (normalized by some file systems), is asked by stat."""
        if not name.isascii():
            return True
        if base not in self._listings:
            try:
                self._listings[base] = frozenset(entry.lower() for entry in os.listdir(base))
            except OSError:
                self._listings[base] = None
        listing = self._listings[base]
        lowered = name.lower()
        return listing is None or lowered in listing or f"{lowered}.py" in listing

    # -- reading ---------------------------------------------------------------------------

    def _file(self, path: Path) -> _File | None:
        if path not in self._files:
            raw = _read_module(path)
            if raw is None:
                self._files[path] = None
            else:
                tree = _sys_path_tree(raw)
                added = self._sys_path[path] = _additions(tree, path, self.root) if tree is not None else ()
                local = len(raw) <= _MAX_MODULE_BYTES and self.imports_something_local(raw, self._folder(path), added)
                anchored = self.anchors is None or any(token in raw for token in self.anchors)
                # Kept until the context is built (parsed, its parser fields and attribute names are read
                # from it too); a module that imports nothing of the repository is not kept: most launched
                # scripts of a big monorepo are such, and a launch rarely asks for one's bytes again.
                file = _File(raw if local else None, len(raw), local, anchored)
                if local and tree is not None:
                    file.tree, file.parsed = tree, True  # parsed for its sys.path lines: not parsed again
                if local and self.anchors is not None:
                    file.leads_to = tuple(self._text_imports(raw, path))
                self._files[path] = file
        return self._files[path]

    def _tree(self, path: Path, file: _File, keep: bool = True) -> ast.Module | None:
        """The module's tree, parsed once if it imports the repository (else each time it is asked:
        only for a class table, which is kept, or a star re-export). Without `keep`, a tree parsed
        here is not kept for the next question."""
        if file.parsed:
            return file.tree
        raw = file.raw if file.raw is not None else _read_module(path)
        try:
            tree = ast.parse(raw) if raw is not None and len(raw) <= _MAX_MODULE_BYTES else None
        except _PARSE_ERRORS:
            tree = None
        if file.local and keep:
            file.tree, file.parsed = tree, True  # a file that does not parse is not tried again
        return tree

    def holds_anchor(self, path: Path) -> bool:
        """Does the module hold a token without which no rule can fire in it (every module does when
        the graph was given no anchors)?"""
        file = self._file(path)
        return file is not None and file.anchored

    def tree(self, path: Path) -> ast.Module | None:
        """A module's tree while the launch context is built: its summary's, else parsed here once
        and handed to the checker as the summaries' trees are (a loader a launch reaches through an
        import is checked in this run too: it is not parsed twice)."""
        summary = self.summary(path)
        if summary is not None:
            return summary.module
        if path in self._handed:
            return self._handed[path][1]
        raw = _read_module(path)
        try:
            tree = ast.parse(raw) if raw is not None and len(raw) <= _MAX_MODULE_BYTES else None
        except _PARSE_ERRORS:
            return None
        if tree is not None:
            self._handed[path] = (raw, tree)  # type: ignore[assignment]
        return tree

    def kept_tree(self, path: Path) -> ast.Module | None:
        """The tree of a module that imports the repository, which the graph keeps for the propagation
        and hands to the checker: a launched script's, for its launch's setup (its `--deepspeed`
        default, the config it hands DeepSpeed), so it is parsed once a run. None for a module the
        graph keeps no tree of (it imports nothing of the repository, or does not parse). No summary
        is made here: a script launched on one process is not followed."""
        file = self._file(path)
        return self._tree(path, file) if file is not None and file.local else None

    def bytes_of(self, path: Path) -> bytes | None:
        """The bytes of a module the graph read that imports something of the repository, while the
        launch context is built; else None."""
        file = self._files.get(path)
        return file.raw if file is not None else None

    def summary(self, path: Path) -> ModuleSummary | None:
        """What import propagation needs of a module; None when it imports nothing of the repository
        (read, not parsed) or cannot be read."""
        if path not in self._summaries:
            file = self._file(path)
            tree = self._tree(path, file) if file is not None and file.local else None
            self._summaries[path] = ModuleSummary.of(path, tree, self) if tree is not None else None
        return self._summaries[path]

    def source(self, path: Path, constants: bool = False) -> tuple[ast.Module, str] | None:
        """A module's tree and text, for a helper function defined there: parsed once a process, kept
        for every file checked here that calls into it (a helper module too large, not UTF-8 or without
        a `return` or an import is not read). With `constants`, for a name it binds at its top level
        (`DEVICE_MAP = ...` in a settings module, which may hold no `return` nor import)."""
        key = (path, constants)
        if key not in self._sources:
            known = self._sources.get((path, False))
            self._sources[key] = known if known is not None else _source(path, self.bytes_of(path), constants)
        return self._sources[key]

    def class_table(self, path: Path) -> ClassTable | None:
        if path not in self._tables:
            self._tables[path] = self._class_table(path)
        return self._tables[path]

    def _class_table(self, path: Path) -> ClassTable | None:
        file = self._file(path)
        if file is None or file.size > _MAX_CLASS_MODULE_BYTES:
            return None
        # The table is kept, not the tree: a checked file's class lookups are the only question asked of
        # most such modules, and the trees kept for the run (50,000 nodes of transformers' trainer
        # modules) were walked by every collection after them (18 ms in one process).
        tree = self._tree(path, file, keep=False)
        if tree is None:
            return None
        classes = {node.name: [d for d in map(_dotted, node.bases) if d] for node in tree.body if isinstance(node, ast.ClassDef)}
        return ClassTable(classes, bindings_of(top_level(tree.body)))

    def _text_imports(self, raw: bytes, path: Path) -> Iterator[Path]:
        """Every repository module an import line may load (more than the imports a parse would
        follow, never fewer: in functions and strings too, every name of `from x import a, b`)."""
        seen: set[Path] = set()
        for match in import_matches(_IMPORT_STATEMENT, raw):
            level, base, names, plain = match.groups()
            if plain is not None:
                modules = [(n, 0) for n in _names(plain)]
            else:
                dots = len(level)
                parent = base.decode("ascii", "replace")
                modules = [(parent, dots)] + [(f"{parent}.{n}" if parent else n, dots) for n in _names(names)]
            for name, dots in modules:
                target = self.resolve(name, dots, path)
                if target is not None and target not in seen and target != path:
                    seen.add(target)
                    yield target

    def leading_to_anchors(self, starts: Iterable[Path]) -> set[Path] | None:
        """Of the modules the import lines of `starts` reach, those that reach (or are) a module
        holding an anchor: the only ones worth parsing to follow. None: every one (no anchors given)."""
        if self.anchors is None:
            for path in starts:
                self._file(path)  # read all the same: a cached context depends on their import lines
            return None
        importers: dict[Path, list[Path]] = {}
        reached = set(starts)
        pending = list(reached)
        while pending:
            path = pending.pop()
            file = self._file(path)
            for target in (file.leads_to or ()) if file is not None else ():
                importers.setdefault(target, []).append(path)
                if target not in reached:
                    reached.add(target)
                    pending.append(target)
        leading = {path for path in reached if (file := self._file(path)) is not None and file.anchored}
        pending = list(leading)
        while pending:
            for importer in importers.get(pending.pop(), ()):
                if importer not in leading:
                    leading.add(importer)
                    pending.append(importer)
        self._leading = leading
        return leading

    def summarized(self) -> Iterator[tuple[Path, bytes, ModuleSummary, bool, tuple[Path, ...]]]:
        """Each module summarized so far, with its bytes, whether it holds an anchor and the folders it
        adds to `sys.path`: what a cached context's facets are made of (context/facets.py)."""
        for path, summary in self._summaries.items():
            file = self._files.get(path)
            if summary is not None and file is not None and file.raw is not None:
                yield path, file.raw, summary, file.anchored, self._sys_path.get(path, ())

    def release(self) -> None:
        """Drop the summaries once the launch context is built; keep what the checker asks
        (resolutions, class tables, which files were read, and the trees it would parse again)."""
        self._summaries.clear()
        for path, file in self._files.items():
            if file is not None:
                if file.tree is not None and file.raw is not None:  # a kept module's tree is of its kept bytes
                    self._handed[path] = (file.raw, file.tree)
                file.raw, file.tree, file.parsed = None, None, False

    def parsed_tree(self, path: Path, raw: bytes) -> ast.Module | None:
        """The tree the graph parsed of the file at `path` (resolved), if parsed from exactly `raw`:
        handed over once, so a launched script is parsed once a run (its index and parser fields
        come with it), and dropped when taken. Forked workers inherit it."""
        handed = self._handed.pop(path, None)
        return handed[1] if handed is not None and handed[0] == raw else None

    def read(self) -> list[Path]:
        """Every Python file the graph read (for a cached context's inputs)."""
        return [path for path, file in self._files.items() if file is not None]

    def files_looked_at(self) -> int:
        """How many files the graph has looked at so far (see read_since)."""
        return len(self._files)

    def read_since(self, count: int) -> list[tuple[Path, tuple[int, bool, bool] | None]]:
        """What the graph learnt of the files it looked at after the first `count`: each one's size, and
        whether it imports the repository and holds an anchor (None: it could not be read). What a
        forked child sends back for `adopt`."""
        return [
            (path, None if file is None else (file.size, file.local, file.anchored))
            for path, file in list(self._files.items())[count:]
        ]

    def adopt(self, read: list[tuple[Path, tuple[int, bool, bool] | None]], at: int) -> None:
        """The files another process's graph looked at (`read_since`: a forked child that followed the
        returned values), taken as if this graph had looked at them after its first `at` files: the
        context's inputs list them where one process would have."""
        files = list(self._files.items())
        merged = dict(files[:at])
        own = dict(files[at:])
        for path, facts in read:
            if path not in merged:
                merged[path] = (
                    own[path] if path in own else (None if facts is None else _File(None, facts[0], facts[1], facts[2]))
                )
        for path, file in files[at:]:
            merged.setdefault(path, file)
        self._files = merged

    def import_only(self, launched: Iterable[Path]) -> set[Path]:
        """The files read that only their import lines can change the graph of: they import nothing
        of the repository, and whether they hold an anchor cannot change (they hold one, or are
        launched, so no import of them is followed for it)."""
        starts = set(launched)
        return {
            path
            for path, file in self._files.items()
            if file is not None and not file.local and (self.anchors is None or file.anchored or path in starts)
        }

    # -- names -----------------------------------------------------------------------------

    def definitions(self, module: Path, name: str) -> list[tuple[Path, str]]:
        """`module.name`, then where it is defined when `module` only re-exports it (a package's
        `__init__.py`, through any number of them, `from .x import *` too); cycles end the chain.
        Worked out once a name: every importer of a package asks for the same few."""
        key = (module, name)
        found = self._definitions.get(key)
        if found is None:
            found = [key]
            while True:
                origin = self._reexport(*found[-1])
                if origin is None or origin in found:
                    break
                found.append(origin)
            self._definitions[key] = found
        return list(found)

    def _reexport(self, module: Path, name: str) -> tuple[Path, str] | None:
        if self._leading is not None and module not in self._leading:
            return None  # its imports lead to nothing a rule can fire in
        summary = self.summary(module)
        if summary is None:
            return None
        origin = summary.reexport(name)
        if origin is not None or name in summary.defined:
            return origin
        for star in summary.star_imports():  # `from .models import *`: the first that has the name
            target = summary.target(star, star.module or "")
            if target is not None and target != module and self._holds(target, name):
                return (target, name)
        return None

    def _holds(self, path: Path, name: str, seen: frozenset[Path] = frozenset()) -> bool:
        """The module defines `name` or imports it (through its own `import *` too)."""
        summary = self.summary(path)
        if summary is None:
            file = self._file(path)
            tree = self._tree(path, file) if file is not None else None
            return tree is not None and name in _top_level_names(tree)
        if name in summary.defined or summary.reexport(name) is not None:
            return True
        seen = seen | {path}
        for star in summary.star_imports():
            target = summary.target(star, star.module or "")
            if target is not None and target not in seen and self._holds(target, name, seen):
                return True
        return False


_LOOKUPS = frozenset({"get", "values", "items", "pop", "setdefault"})


def _looked_up(node: ast.AST) -> set[str]:
    """The names a value is taken out of inside `node`: `NAME[...]`, `NAME.get(...)`, `NAME.values()`."""
    found: set[str] = set()
    for inner in walk(node):
        if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name):
            found.add(inner.value.id)
        elif isinstance(inner, ast.Attribute) and inner.attr in _LOOKUPS and isinstance(inner.value, ast.Name):
            found.add(inner.value.id)
    return found


# An import statement: `from .x import (a, b as c)` (names across lines in parentheses), or `import a.b as c, d`.
_IMPORT_STATEMENT = LazyPattern(
    rb"^[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n;#]*)|import[ \t]+([^\n;#]*))", re.MULTILINE
)
_NAME = LazyPattern(rb"([\w.]+)(?:[ \t]+as[ \t]+\w+)?")


def text_import_lines(raw: bytes) -> str:
    """A digest of the import statements a module's text holds, as the graph reads them to tell which
    modules it may load (see ModuleGraph._text_imports)."""
    return content_hash(b"\n".join(match.group(0) for match in import_matches(_IMPORT_STATEMENT, raw)))


def _names(written: bytes) -> list[str]:
    """`(a, b as c)` -> ["a", "b"]; `a.b as c, d` -> ["a.b", "d"]."""
    return [m.group(1).decode("ascii", "replace") for m in _NAME.finditer(written.strip(b"()")) if m.group(1) != b"*"]


def _source(path: Path, read: bytes | None = None, constants: bool = False) -> tuple[ast.Module, str] | None:
    """`read`: the module's bytes, when the graph still holds them. `constants`: read a module that
    binds a name to a value too (see ModuleGraph.source)."""
    raw = read if read is not None else _read_module(path)
    if (
        raw is None
        or len(raw) > _MAX_CLASS_MODULE_BYTES
        or not (b"return" in raw or b"import" in raw or (constants and b"=" in raw))
    ):
        return None
    try:
        text = raw.decode("utf-8")
        return ast.parse(text), text
    except (*_PARSE_ERRORS, UnicodeDecodeError):
        return None


def sys_path_additions(raw: bytes, path: Path, root: Path) -> tuple[Path, ...]:
    """The folders of the repository a module adds to `sys.path` at its top level, when they are
    written from its own location (`sys.path.append(os.path.join(os.path.dirname(__file__), ".."))`,
    `sys.path.insert(0, str(Path(__file__).resolve().parents[1]))`, or a name bound to such a path
    first). A path relative to the folder the process runs in (`sys.path.append("..")`) is taken from
    the module's own folder: a script that climbs out of the working folder is written to run from its
    own (its launch scripts `cd` there or sit beside it), and run from elsewhere its import would
    fail. A path computed at run time (`os.getcwd()`, a variable) is not known here: it adds nothing."""
    tree = _sys_path_tree(raw)
    return _additions(tree, path, root) if tree is not None else ()


def _sys_path_tree(raw: bytes) -> ast.Module | None:
    """The module's tree, when it may add a folder known here to `sys.path`: it names `sys.path`, and
    parses."""
    if b"sys.path" not in raw or len(raw) > _MAX_CLASS_MODULE_BYTES:
        return None
    try:
        return ast.parse(raw)
    except _PARSE_ERRORS:
        return None


def _additions(tree: ast.Module, path: Path, root: Path) -> tuple[Path, ...]:
    bound: dict[str, str] = {}
    added: list[Path] = []
    for statement in top_level(tree.body):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            value = _path_from_here(statement.value, str(path), bound)
            if value is not None:
                bound[statement.targets[0].id] = value
            else:
                bound.pop(statement.targets[0].id, None)
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not isinstance(call, ast.Call) or _dotted(call.func) not in ("sys.path.append", "sys.path.insert"):
            continue
        written = call.args[-1] if len(call.args) == (1 if _dotted(call.func) == "sys.path.append" else 2) else None
        folder = _path_from_here(written, str(path), bound) if written is not None else None
        if folder is not None:
            try:
                resolved = Path(os.path.realpath(folder))
            except (OSError, ValueError):
                continue
            if resolved.is_relative_to(root) and resolved.is_dir() and resolved not in added:
                added.append(resolved)
    return tuple(added)


_PATH_CALLS = frozenset({"os.path.abspath", "os.path.realpath", "os.path.normpath", "str", "Path", "pathlib.Path"})


def _path_from_here(node: ast.expr, here: str, bound: dict[str, str], depth: int = 0) -> str | None:
    """The path `node` computes from the module's own location (`here`, its `__file__`), or None.
    `__file__` anchors a path; a relative literal, relative to where the process runs, is taken from
    the module's own folder (see `sys_path_additions`)."""
    if depth > 20:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value and not os.path.isabs(node.value):
        return os.path.normpath(os.path.join(os.path.dirname(here), node.value))

    def inner(value: ast.expr) -> str | None:
        return _path_from_here(value, here, bound, depth + 1)

    if isinstance(node, ast.Name):
        return here if node.id == "__file__" else bound.get(node.id)
    if isinstance(node, ast.Call) and not node.keywords:
        called = _dotted(node.func)
        if called == "os.path.dirname" and len(node.args) == 1:
            value = inner(node.args[0])
            return os.path.dirname(value) if value is not None else None
        if called in _PATH_CALLS and len(node.args) == 1:
            value = inner(node.args[0])
            return os.path.normpath(value) if value is not None else None
        if called == "os.path.join" and node.args:
            first = inner(node.args[0])
            rest = [_path_part(arg) for arg in node.args[1:]]
            if first is None or any(part is None for part in rest):
                return None
            return os.path.normpath(os.path.join(first, *rest))  # type: ignore[arg-type]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute") and not node.args:
            return inner(node.func.value)
        return None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        value = inner(node.value)
        return os.path.dirname(value) if value is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        value = inner(node.value.value)
        index = node.slice
        if value is None or not (isinstance(index, ast.Constant) and isinstance(index.value, int) and index.value >= 0):
            return None
        for _ in range(index.value + 1):
            value = os.path.dirname(value)
        return value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = inner(node.left), _path_part(node.right)
        return os.path.normpath(os.path.join(left, right)) if left is not None and right is not None else None
    return None


def _path_part(node: ast.expr) -> str | None:
    """A relative piece joined onto a path: a literal, or `os.pardir` / `os.path.pardir`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and not os.path.isabs(node.value):
        return node.value
    if _dotted(node) in ("os.pardir", "os.path.pardir"):
        return os.pardir
    return None


def _read_module(path: Path) -> bytes | None:
    """The module's bytes, or as many as tell it is over the size limit."""
    try:
        with open(path, "rb") as handle:
            return handle.read(_MAX_MODULE_BYTES + 1)
    except OSError:
        return None


def _dotted(node: ast.AST) -> str | None:
    from placement_lint.analysis.names import dotted

    return dotted(node)


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for statement in top_level(tree.body):
        if isinstance(statement, _DEFINITIONS):
            names.add(statement.name)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's statements outside functions and classes: `try: from .x import A` counts."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.If, ast.Try, ast.With)):
            for name in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, name, [])
                for item in inner:
                    if isinstance(item, ast.ExceptHandler):
                        yield from top_level(item.body)
                    else:
                        yield from top_level([item])


def bindings_of(nodes: Iterable[ast.AST]) -> dict[str, Binding]:
    """The names imports bind, and what each is bound to."""
    bindings: dict[str, Binding] = {}
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


# The context and operator fields hold shared singletons (a Load, an Add) no name or import is in.


class ModuleSummary:
    """What import propagation needs of one module, from one parse and one walk."""

    def __init__(self, path: Path, module: ast.Module, graph: ModuleGraph) -> None:
        self.path = path
        self.module = module
        self.graph = graph
        self.imports_: list[ast.Import | ast.ImportFrom] = []
        self.attributes: dict[str, set[str]] = {}  # alias head -> attribute chains read off it ("utils.model" -> {"load"})
        # Top-level def/class, or a name a module-level assignment binds (`REGISTRY = {"llama": Loader}`)
        # -> the names it reads.
        self.names_by_definition: dict[str, set[str]] = {}
        # Names bound to a dict literal (a registry of classes). A definition that reads one reaches its
        # classes only if it takes a value out of it (`REGISTRY[name]`, `REGISTRY.get(name)`).
        self.registries: set[str] = set()
        self._definition_nodes: dict[str, ast.AST] = {}
        self._looked_up: dict[str, set[str]] = {}
        self._imports_by_name: dict[str, list[tuple[Path, frozenset[str]]]] = {}
        self.all_names: set[str] = set()
        self.defined: set[str] = set()  # what the module itself defines at the top level
        self._calls_into: dict[Path, dict[str, list[ast.Call]]] | None = None

    @classmethod
    def of(cls, path: Path, module: ast.Module, graph: ModuleGraph) -> ModuleSummary:
        summary = cls(path, module, graph)
        for top in module.body:  # one walk, each name filed under the top-level definition it is in
            if isinstance(top, _DEFINITIONS):
                summary.defined.add(top.name)
                names = summary.names_by_definition.setdefault(top.name, set())
                summary._definition_nodes[top.name] = top
            else:
                names = summary.all_names
            summary._walk(top, names)
            if isinstance(top, (ast.Assign, ast.AnnAssign)) and top.value is not None:
                targets = top.targets if isinstance(top, ast.Assign) else [top.target]
                read = {node.id for node in walk(top.value) if isinstance(node, ast.Name)}
                for target in targets:
                    if isinstance(target, ast.Name):
                        summary.defined.add(target.id)
                        summary.names_by_definition.setdefault(target.id, set()).update(read)
                        summary._definition_nodes[target.id] = top.value
                        if isinstance(top.value, ast.Dict):
                            summary.registries.add(target.id)
        for top in module.body:
            if isinstance(top, _DEFINITIONS):
                summary.all_names |= summary.names_by_definition[top.name]
        return summary

    def _walk(self, top: ast.stmt, names: set[str]) -> None:
        Name, Attribute, Import, ImportFrom, Load = ast.Name, ast.Attribute, ast.Import, ast.ImportFrom, ast.Load
        for node in walk(top):  # most of what a summary costs; by exact type, as a tree's nodes are
            kind = type(node)
            if kind is Name:
                names.add(node.id)  # type: ignore[attr-defined]
            elif kind is Import or kind is ImportFrom:
                self.imports_.append(node)  # type: ignore[arg-type]
            elif kind is Attribute and type(node.ctx) is Load:  # type: ignore[attr-defined]
                chain: list[str] = []
                current: ast.AST = node
                while isinstance(current, ast.Attribute):
                    chain.append(current.attr)
                    current = current.value
                if isinstance(current, ast.Name):
                    chain.append(current.id)
                    chain.reverse()
                    self.attributes.setdefault(".".join(chain[:-1]), set()).add(chain[-1])

    def referenced(self, wanted: frozenset[str]) -> set[str]:
        """The names the wanted definitions read, and the names those read, to any depth (a function
        that reads `REGISTRY`, which holds loader classes)."""
        if "*" in wanted:
            return self.all_names
        names = set(wanted)
        pending = list(wanted)
        while pending:
            definition = pending.pop()
            for name in self.names_by_definition.get(definition, ()):
                if name in names:
                    continue
                names.add(name)
                # `sorted(REGISTRY)` lists the names; `REGISTRY[name]` takes out a class that runs.
                if name not in self.registries or name in self.looked_up(definition):
                    pending.append(name)
        return names

    def looked_up(self, definition: str) -> set[str]:
        """The names `definition` takes values out of (walked only when it reads a registry: rare)."""
        if definition not in self._looked_up:
            node = self._definition_nodes.get(definition)
            self._looked_up[definition] = _looked_up(node) if node is not None else set()
        return self._looked_up[definition]

    def target(self, node: ast.ImportFrom | ast.Import, name: str) -> Path | None:
        return self.graph.resolve(name, getattr(node, "level", 0) or 0, self.path)

    def _from_import(self, node: ast.ImportFrom, alias: ast.alias) -> tuple[Path | None, bool]:
        """Where `from base import name` leads: (the submodule `base.name`, True) when there is one,
        else (the module `base`, False)."""
        base = node.module or ""
        submodule = self.graph.resolve(f"{base}.{alias.name}" if base else alias.name, node.level, self.path)
        if submodule is not None:
            return submodule, True
        return self.graph.resolve(base, node.level, self.path), False

    def star_imports(self) -> list[ast.ImportFrom]:
        return [n for n in self.imports_ if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)]

    def imports(self, wanted: frozenset[str]) -> list[tuple[Path, frozenset[str]]]:
        """The repository modules this one imports, with the names it uses of each (only from the
        definitions `wanted` names, when it is itself an imported module). What a set of names imports
        is what each of them imports: each name's answer is worked out once, however many launches
        reach the module wanting it (diffusers' 76 example scripts each reach its whole package)."""
        merged: dict[Path, set[str]] = {}
        # In the names' order, not the set's: a set of strings iterates in an order the hash seed picks,
        # and this order decides which modules a launch reaches first (and so within its cap).
        for name in ("*",) if "*" in wanted else sorted(wanted):
            if name not in self._imports_by_name:
                self._imports_by_name[name] = self._imports_of(frozenset({name}))
            for target, names in self._imports_by_name[name]:
                merged.setdefault(target, set()).update(names)
        return [(target, frozenset(names)) for target, names in merged.items()]

    def _imports_of(self, wanted: frozenset[str]) -> list[tuple[Path, frozenset[str]]]:
        referenced = self.referenced(wanted)
        found: dict[Path, set[str]] = {}
        for node in self.imports_:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = self.graph.resolve(alias.name, 0, self.path)
                    if target is not None:
                        found.setdefault(target, set()).update(self.attributes.get(alias.asname or alias.name, set()))
                continue
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name == "*":
                    target = self.graph.resolve(node.module or "", node.level, self.path)
                    if target is not None:
                        found.setdefault(target, set()).add("*")
                    continue
                if "*" not in wanted and local not in referenced:
                    continue
                target, is_module = self._from_import(node, alias)
                if target is not None:
                    found.setdefault(target, set()).update(self.attributes.get(local, set()) if is_module else {alias.name})
        return [(target, frozenset(names)) for target, names in found.items() if names and target != self.path]

    def reexport(self, name: str) -> tuple[Path, str] | None:
        """The repository module and name `name` is imported from here (`from .model_utils import get_model`)."""
        for node in self.imports_:
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if (alias.asname or alias.name) != name or alias.name == "*":
                    continue
                target, is_module = self._from_import(node, alias)
                if is_module:
                    return None  # a submodule, not a function
                return (target, alias.name) if target is not None else None
        return None

    def calls_into(self) -> dict[Path, dict[str, list[ast.Call]]]:
        """This module's calls of functions of the repository's modules, by module and function name:
        `load_model(...)` after `from model_utils import load_model`, `utils.load_model(...)` after
        `import utils`. Worked out once: the returned values' flow and the importers' calls both ask."""
        if self._calls_into is None:
            self._calls_into = self._find_calls_into()
        return self._calls_into

    def _find_calls_into(self) -> dict[Path, dict[str, list[ast.Call]]]:
        from placement_lint.analysis.index import index_of
        from placement_lint.analysis.names import dotted

        functions: dict[str, tuple[Path, str]] = {}  # local name -> (module, its function)
        modules: dict[str, Path] = {}  # local dotted name -> module
        for node in self.imports_:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = self.graph.resolve(alias.name, 0, self.path)
                    if target is not None:
                        modules[alias.asname or alias.name] = target
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                target, is_module = self._from_import(node, alias)
                if target is None:
                    continue
                if is_module:
                    modules[alias.asname or alias.name] = target
                else:
                    functions[alias.asname or alias.name] = (target, alias.name)
        found: dict[Path, dict[str, list[ast.Call]]] = {}
        if not functions and not modules:
            return found
        for node in index_of(self.module).calls:  # the index the flow over this module uses too
            func = node.func
            if isinstance(func, ast.Name) and func.id in functions:
                target, name = functions[func.id]
            elif isinstance(func, ast.Attribute) and dotted(func.value) in modules:
                target, name = modules[dotted(func.value)], func.attr  # type: ignore[index]
            else:
                continue
            found.setdefault(target, {}).setdefault(name, []).append(node)
        return found
