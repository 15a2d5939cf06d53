"""From the launched scripts through the module graph: the evidence each module a launch reaches
inherits (breadth first, what of each module is used), the parser fields the scripts define, where
importers send what the modules' functions return, and the literal arguments of their calls.

Each phase reads the graph's summaries, each made once a module and run (one parse, one walk); a
launch reaches every module it imports, to any depth, and what a module imports for a name is
worked out once, however many launches reach it.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.analysis.dataflow import Resolver, constructor
from placement_lint.analysis.flow import ModelFlow, returned_item, unpacked_positions
from placement_lint.analysis.index import index_of
from placement_lint.analysis.names import ImportTable
from placement_lint.context.evidence import Evidence, Kind
from placement_lint.context.launch_files import MAX_LAUNCHER_BYTES
from placement_lint.context.launches import RepoContext
from placement_lint.context.module_graph import ModuleGraph, ModuleSummary
from placement_lint.patterns import LazyPattern

if TYPE_CHECKING:
    from placement_lint.analysis.consumers import Consumer
    from placement_lint.context.classes import ImportedClasses

# -- modules imported by launched scripts -------------------------------------------------------


def propagate_to_imports(
    context: RepoContext,
    launched: dict[Path, list[Evidence]],
    graph: ModuleGraph,
    display: Callable[[Path], str],
    stage: Callable[[str, int, int | None], None] = lambda what, done, total: None,
) -> dict[Path, set[Path]]:
    """Give the modules a launched script imports the script's launch evidence, for what it uses of
    them, and the modules those import, to any depth (a console script's module, for what its
    function reaches). Returns which modules each importer passed evidence to."""
    edges: dict[Path, set[Path]] = {}
    scripts = {
        script: carried for script, items in launched.items() if (carried := tuple(e for e in items if e.kind is not Kind.SINGLE))
    }
    # Modules whose imports cannot lead to a file a rule can fire in are not parsed to follow them.
    # Every launched script is read: the context depends on its import lines, whatever it launches under.
    stage("Following imports", 0, len(scripts))
    imports = _Imports(graph, graph.leading_to_anchors(launched))
    inherited = _Inherited(context, display)
    given: dict[Path, dict[Path, tuple[Evidence, ...]]] = {}
    wide: dict[Path, tuple[Evidence, ...]] = {}
    for number, (script, carried) in enumerate(scripts.items()):
        stage("Following imports", number, len(scripts))
        walked = _propagate_launch(context, script, carried, imports, inherited, edges)
        if walked is None:
            wide[script] = carried
        given[script] = walked or {}
    if wide:
        given.update(_propagate_wide_launches(context, wide, imports, inherited, edges))
    for script, reached in given.items():  # in the launches' order, each in the order its walk reached them
        for module, items in reached.items():
            if module != script:
                inherited.add(module, items)
    inherited.write()
    # What each importer calls of the modules it passes evidence to is asked twice: by the returned
    # values' flow, which a forked child follows, and by the calls' literals, recorded meanwhile here.
    # Worked out once, before the fork, the child inherits it (diffusers: 500 importers, 0.4 s).
    for importer in edges:
        summary = graph.summary(importer)
        if summary is not None:
            summary.calls_into()
    return edges


def summarize_ahead(graph: ModuleGraph, entries: list[tuple[Path, str]], enough: Callable[[], bool]) -> None:
    """Summarize, breadth first from each launched script in turn, the modules it may reach (`entries`:
    each script with what of it a launch runs, "__main__" or a console script's function), until
    `enough()`: what propagate_to_imports asks of the graph, asked while a forked child works out the
    launches' setups, which decide which launches propagate (what a module imports for a name does
    not depend on them). Whatever is not summarized when the child is done is summarized when asked."""
    imports = _Imports(graph, graph.leading_to_anchors(dict.fromkeys(script for script, _ in entries)))
    followed: set[tuple[Path, str]] = set()
    for script, used in entries:
        start = (script, "*" if used == "__main__" else used)
        if start in followed or (script, "*") in followed:
            continue
        followed.add(start)
        pending = deque([start])
        while pending:
            if enough():
                return
            path, name = pending.popleft()
            for module, names in imports.of_name(path, name) or ():
                for each in sorted(names):
                    if (module, each) not in followed and (module, "*") not in followed:
                        followed.add((module, each))
                        pending.append((module, each))


# Breadth first, a launch reaches the modules its script imports, then theirs. A training script's
# loader is a few imports away; a launch that reaches more modules than this is walking a package
# (diffusers' examples import all of src/diffusers), and is walked with the others that do, all at
# once: each module and name is then followed once for all of them, not once a launch.
NEAREST_MODULES = 64


class _Imports:
    """What the modules import, for the names wanted of them: None for a module not worth following
    (no rule can fire in what it leads to) or that imports nothing of the repository."""

    def __init__(self, graph: ModuleGraph, worth_following: set[Path] | None) -> None:
        self._graph = graph
        self._worth_following = worth_following
        self._by_name: dict[tuple[Path, str], list[tuple[Path, frozenset[str]]] | None] = {}

    def of(self, path: Path, wanted: frozenset[str]) -> list[tuple[Path, frozenset[str]]] | None:
        if self._worth_following is not None and path not in self._worth_following:
            return None
        summary = self._graph.summary(path)
        return summary.imports(wanted) if summary is not None else None

    def of_name(self, path: Path, name: str) -> list[tuple[Path, frozenset[str]]] | None:
        """For one name, kept: the launches walked together ask it of a module once a depth."""
        key = (path, name)
        if key not in self._by_name:
            self._by_name[key] = self.of(path, frozenset({name}))
        return self._by_name[key]


def _imported(items: tuple[Evidence, ...], shown: str) -> tuple[Evidence, ...]:
    """An importer's launch evidence as the module it imports gets it: its chain one importer longer."""
    return tuple(e._replace(origin="import", chain=(shown, *e.chain), entry="") for e in items)


class _Inherited:
    """The evidence each module inherits, gathered launch after launch: each launch's items that the
    module does not have yet are added, in order, as `existing + new` did, without copying the
    module's evidence for every launch (2,000 launches importing one module copied 2,000 items 2,000
    times); written to the context once the launches are followed."""

    def __init__(self, context: RepoContext, display: Callable[[Path], str]) -> None:
        self._context = context
        self._display = display
        self._shown: dict[Path, str] = {}
        self._modules: dict[Path, tuple[list[Evidence], set[Evidence]]] = {}

    def shown(self, module: Path) -> str:
        if module not in self._shown:
            self._shown[module] = self._display(module)
        return self._shown[module]

    def add(self, module: Path, items: tuple[Evidence, ...]) -> None:
        known = self._modules.get(module)
        if known is None:
            existing = list(self._context.by_file.get(module, ()))
            known = self._modules[module] = (existing, set(existing))
        evidence, seen = known
        new = [e for e in items if e not in seen]  # a launch's own repeats stay, as they did
        evidence += new
        seen.update(new)

    def write(self) -> None:
        for module, (evidence, _) in self._modules.items():
            self._context.by_file[module] = tuple(evidence)


def _propagate_launch(
    context: RepoContext,
    script: Path,
    items: tuple[Evidence, ...],
    imports: _Imports,
    inherited: _Inherited,
    edges: dict[Path, set[Path]],
) -> dict[Path, tuple[Evidence, ...]] | None:
    """Breadth first from one launched script: the evidence each module it reaches gets, in the order
    reached. Each module gets the script's evidence once, with the shortest chain of importers;
    reached again, it is followed only for the names not yet followed (what a module imports for a
    set of names is what it imports for each), so every module is followed at most once per name
    and cycles end. None, with nothing recorded, when the walk goes past the NEAREST_MODULES."""
    given: dict[Path, tuple[Evidence, ...]] = {script: items}
    used_by: dict[Path, frozenset[str]] = {}
    passed: list[tuple[Path, Path]] = []
    # A launched script runs all of itself; a console script's module, what its function reaches.
    used = context.used.get(script, frozenset({"__main__"}))
    followed: dict[Path, frozenset[str]] = {script: frozenset({"*"}) if "__main__" in used else used}
    queue = deque([(script, followed[script])])
    while queue:
        path, wanted = queue.popleft()
        found = imports.of(path, wanted)
        if found is None:
            continue
        if len(given) > NEAREST_MODULES:
            return None
        for module, names in found:
            if module == script:
                continue  # the launched script itself: launched, not imported
            if module not in given:
                given[module] = _imported(given[path], inherited.shown(module))
            used_by[module] = used_by.get(module, frozenset()) | names
            passed.append((path, module))
            done = followed.get(module, frozenset())
            new = frozenset() if "*" in done else names - done
            if new:
                # Go on through every module: helpers.py may import loader.py. A module that imports
                # nothing of the repository costs a read and a regex, not a parse.
                followed[module] = followed.get(module, frozenset()) | new
                queue.append((module, new))
    for module, names in used_by.items():
        context.used[module] = context.used.get(module, frozenset()) | names
    for path, module in passed:
        edges.setdefault(path, set()).add(module)
    return given


def _propagate_wide_launches(
    context: RepoContext,
    launches: dict[Path, tuple[Evidence, ...]],
    imports: _Imports,
    inherited: _Inherited,
    edges: dict[Path, set[Path]],
) -> dict[Path, dict[Path, tuple[Evidence, ...]]]:
    """The launches that reach more than the NEAREST_MODULES, walked together breadth first: each
    launch is a bit, and a module followed for a name at one depth is followed once for all the
    launches reaching it there (diffusers' 74 example scripts each reach some 400 modules of
    src/diffusers). Each module gets each launch's evidence once, with a shortest chain of
    importers from that launch's script; what a module is used for, and which importers pass to
    it, are what walking the launches one by one finds."""
    scripts = list(launches)
    given: list[dict[Path, tuple[Evidence, ...]]] = [{script: launches[script]} for script in scripts]
    reached: dict[Path, int] = {}  # module -> the launches that gave it their evidence
    followed: dict[tuple[Path, str], int] = {}  # (module, name) -> the launches that followed it
    for bit, script in enumerate(scripts):
        reached[script] = reached.get(script, 0) | 1 << bit  # launched, not imported, by its launch
        used = context.used.get(script, frozenset({"__main__"}))
        for name in sorted({"*"} if "__main__" in used else used):
            followed[(script, name)] = followed.get((script, name), 0) | 1 << bit
    launched_as = dict(reached)
    frontier = dict(followed)
    used_by: dict[Path, set[str]] = {}
    while frontier:
        ahead: dict[tuple[Path, str], int] = {}
        for (path, name), walking in frontier.items():
            for module, names in imports.of_name(path, name) or ():
                carrying = walking & ~launched_as.get(module, 0)
                if not carrying:
                    continue
                new = carrying & ~reached.get(module, 0)
                if new:
                    reached[module] = reached.get(module, 0) | new
                    shown = inherited.shown(module)
                    while new:
                        lowest = new & -new
                        bit = lowest.bit_length() - 1
                        given[bit][module] = _imported(given[bit][path], shown)
                        new ^= lowest
                used_by.setdefault(module, set()).update(names)
                edges.setdefault(path, set()).add(module)
                everything = followed.get((module, "*"), 0)
                for each in sorted(names):
                    state = (module, each)
                    fresh = carrying & ~(followed.get(state, 0) | everything)
                    if fresh:
                        followed[state] = followed.get(state, 0) | fresh
                        ahead[state] = ahead.get(state, 0) | fresh
        frontier = ahead
    for module, names in used_by.items():
        context.used[module] = context.used.get(module, frozenset()) | names
    return dict(zip(scripts, given, strict=True))


class ParserReads:
    """What attach_parsers read, for the facets of a cached context (context/facets.py): each launched
    script's parser modules (in the order read) and fields, the modules read for a parser, and the
    attribute names of each file that carries fields."""

    def __init__(self) -> None:
        self.parsers: dict[Path, list[Path]] = {}
        self.tables: dict[Path, tuple[tuple[object, ...], ...]] = {}
        self.parser_modules: set[Path] = set()
        self.attributes: dict[Path, frozenset[str]] = {}


def attach_parsers(
    context: RepoContext,
    launched: dict[Path, list[Evidence]],
    graph: ModuleGraph,
    display: Callable[[Path], str],
    reads: ParserReads | None = None,
) -> list[Path]:
    """Give each launch's evidence, and what the modules its script imports inherit of it, the
    script's parser fields: `utils.py` reads `args.use_4bit_quantization`, which `train.py`'s
    dataclass defines. Only a script that imports the repository's modules needs this (its summary
    is parsed already); a script on its own reads its parser when it is checked. Returns the modules
    read for their parsers."""
    from placement_lint.analysis.arguments import parser_fields

    read: list[Path] = []
    attributes: dict[Path, frozenset[str]] = {}
    reached: dict[str, list[Path]] | None = None
    carried: dict[Path, dict[str, tuple[tuple[str, ...], ...]]] = {}  # file -> script -> the fields it carries
    # Shared by the scripts that import the same module; a module the graph parsed is not parsed again.
    parsed: dict[Path, ast.Module | None] = {}
    for target in launched:
        summary = graph.summary(target)
        if summary is None:
            continue
        parser_paths = [path for path in _local_imports(summary) if _parser_module(path, graph, parsed, read)]
        fields = parser_fields(summary.module, [parsed[path] for path in parser_paths])  # type: ignore[misc]
        table = tuple((key, *field) for key, field in fields.items())
        if reads is not None:
            reads.parsers[target], reads.tables[target] = parser_paths, table
            reads.parser_modules.update(parser_paths)
        if not fields:
            continue
        table_names = frozenset(row[1] for row in table)
        script = display(target)
        if reached is None:  # which files each launched script's evidence reached, once
            reached = {}
            for path, items in context.by_file.items():
                for name in {e.chain[-1] for e in items if e.chain}:
                    reached.setdefault(name, []).append(path)
        for path in reached.get(script, ()):
            # Each file carries only the fields it reads (`args.use_4bit`): a parser has hundreds.
            if path not in attributes:
                attributes[path] = _attribute_names(path, graph.bytes_of(path))
                read.append(path)  # what it reads decides what it carries: a change must rebuild the context
            # The intersection first: a library module a launch reaches reads few of the fields, if any.
            read_here = attributes[path] & table_names
            carried.setdefault(path, {})[script] = tuple(row for row in table if row[1] in read_here) if read_here else ()
    # Each file's evidence rewritten once, for every script whose fields it carries (once a script, it
    # was copied once for each of the thousands of launched scripts reaching a shared module).
    if reads is not None:
        reads.attributes = attributes
    for path, owns in carried.items():
        context.by_file[path] = tuple(
            e._replace(parser=owns[e.chain[-1]]) if e.chain and e.chain[-1] in owns else e for e in context.by_file[path]
        )
    return read


_ATTRIBUTE = LazyPattern(rb"\.([A-Za-z_][A-Za-z0-9_]*)")


def _attribute_names(path: Path, raw: bytes | None = None) -> frozenset[str]:
    """The attribute names a Python file's text reads (`raw`: its bytes, when the graph read them),
    from a cheap scan (no parse)."""
    try:
        if raw is None:
            raw = path.read_bytes() if path.stat().st_size <= MAX_LAUNCHER_BYTES else b""
    except OSError:
        return frozenset()
    if len(raw) > MAX_LAUNCHER_BYTES:
        return frozenset()
    return frozenset(name.decode("ascii") for name in set(_ATTRIBUTE.findall(raw)))


def _local_imports(summary: ModuleSummary) -> list[Path]:
    return sorted({path for path, _ in summary.imports(frozenset({"*"}))})


def _parser_module(path: Path, graph: ModuleGraph, parsed: dict[Path, ast.Module | None], read: list[Path]) -> ast.Module | None:
    """A module of the repository that may define the script's parser (dataclasses, add_argument),
    parsed (never run); the graph's tree when it parsed the module already."""
    if path not in parsed:
        parsed[path] = None
        try:
            raw = graph.bytes_of(path)
            if raw is None and path.stat().st_size <= MAX_LAUNCHER_BYTES:
                raw = path.read_bytes()
            if raw is not None and len(raw) <= MAX_LAUNCHER_BYTES:
                if b"dataclass" in raw or b"add_argument" in raw:
                    read.append(path)
                    summary = graph.summary(path)
                    parsed[path] = summary.module if summary is not None else ast.parse(raw)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    return parsed[path]


def follow_returns(
    context: RepoContext,
    graph: ModuleGraph,
    edges: dict[Path, set[Path]],
    display: Callable[[Path], str],
    stage: Callable[[str, int, int | None], None] = lambda what, done, total: None,
) -> list[Path]:
    """Fill `context.consumers`: for each module an importer gave evidence to, where the importer sends
    what its calls of the module's functions return. Through a chain too (train.py trains what
    helpers.build returns, which is what loader.load returns): an importer's own remote consumers
    take part, so the passes repeat until nothing new is found (each pass must add a consumer, and
    there are finitely many). Returns the modules read to tell trainer subclasses (inputs of the
    context, like the configs)."""
    calls: dict[Path, dict[Path, dict[str, list[ast.Call]]]] = {}
    parsed: dict[Path, tuple[Resolver, ImportTable, ImportedClasses]] = {}
    pending = set(edges)
    for _ in range(len(edges) + 1):  # a consumer travels one importer per pass, and a chain has at most this many
        if not pending:
            break
        changed: set[Path] = set()
        for number, importer in enumerate(sorted(pending)):
            stage("Following returned values", number, len(pending))
            summary = graph.summary(importer)
            if summary is None:
                continue
            if importer not in calls:
                calls[importer] = summary.calls_into()
            wanted = _calls_that_matter(graph, edges, importer, calls[importer])
            if not wanted:
                continue  # its calls reach no module a rule can fire in, nor one that passes values on
            if importer not in parsed:
                parsed[importer] = _flow_inputs(summary, graph)
            resolver, imports, classes = parsed[importer]
            # A fresh flow each pass: what it finds depends on the importer's own remote consumers.
            flow = ModelFlow(summary.module, imports, resolver, context.consumers.get(importer), classes)
            where = display(importer)
            for target, by_name in wanted.items():
                for name, nodes in by_name.items():
                    for position, found in _returned_uses(flow, nodes, where):
                        # `from alignment import get_model` reaches alignment/__init__.py, which re-exports
                        # model_utils.get_model: the loader is there.
                        for module, function in graph.definitions(target, name):
                            key = function if position is None else returned_item(function, position)
                            known = context.consumers.setdefault(module, {})
                            new = tuple(c for c in found if c not in known.get(key, ()))
                            if new:
                                known[key] = known.get(key, ()) + new
                                changed.add(module)
        pending = {path for path in changed if path in edges}
    context.consumers = {path: uses for path, uses in context.consumers.items() if uses}
    return sorted({path for _, _, classes in parsed.values() for path in classes.read})


def _calls_that_matter(
    graph: ModuleGraph, edges: dict[Path, set[Path]], importer: Path, calls: dict[Path, dict[str, list[ast.Call]]]
) -> dict[Path, dict[str, list[ast.Call]]]:
    """Of an importer's calls into the modules it passes evidence to, those of functions defined
    where what they return matters: a module a rule can fire in, or an importer, which passes it on.
    A library's importers mostly call its helpers (a logger, a version check): their flow is not
    worked out for nothing."""
    wanted: dict[Path, dict[str, list[ast.Call]]] = {}
    for target in sorted(edges[importer]):
        by_name = {
            name: nodes
            for name, nodes in calls.get(target, {}).items()
            if any(graph.holds_anchor(module) or module in edges for module, _ in graph.definitions(target, name))
        }
        if by_name:
            wanted[target] = by_name
    return wanted


def record_importer_calls(context: RepoContext, graph: ModuleGraph, edges: dict[Path, set[Path]]) -> list[Path]:
    """Fill `context.calls`: for each module a launch reaches through imports, per top-level function
    (or class, whose calls are its `__init__`'s), the literal arguments (and the defaults they leave)
    of every call its launched importers make of it; None when an importer also uses the name
    otherwise (a callback, a subclass, a class method: its calls are unknown).
    Returns the modules read for their functions' defaults (inputs of the context, whole)."""
    from placement_lint.analysis.dataflow import call_literals, rebound_names

    trees: dict[Path, ast.Module | None] = {}
    rebound: dict[int, frozenset[str]] = {}  # by function (its node's id: the trees live as long as this)
    listed: dict[tuple[Path, str], set[frozenset[tuple[str, object]]]] = {}
    for importer in sorted(edges):
        summary = graph.summary(importer)
        if summary is None:
            continue
        by_target = summary.calls_into()
        named_otherwise: set[str] | None = None  # worked out once an importer, at its first call that counts
        for target in sorted(edges[importer]):
            for name, nodes in by_target.get(target, {}).items():
                for module, function_name in graph.definitions(target, name):
                    if not graph.holds_anchor(module):
                        continue  # no rule fires there: what its functions are called with decides nothing
                    if named_otherwise is None:
                        named_otherwise = _named_otherwise(summary.module)
                    function = _called_function(_tree(graph, module, trees), function_name)
                    known = context.calls.setdefault(module, {})
                    if function is None or name in named_otherwise or (function_name in known and known[function_name] is None):
                        known[function_name] = None
                        continue
                    bindings = known.setdefault(function_name, [])
                    # What is in `bindings`, hashed: thousands of launched importers calling one loader
                    # with their own literals made the lookup in the list quadratic.
                    had = listed.setdefault((module, function_name), set())
                    if id(function) not in rebound:
                        rebound[id(function)] = rebound_names(function)
                    for call in nodes:
                        literals = call_literals(call, function, rebound[id(function)])
                        literal = {k: v.value for k, v in literals.items() if _plain(v)}
                        key = frozenset(literal.items())  # equal exactly when the dicts are
                        if key not in had:
                            had.add(key)
                            bindings.append(literal)  # type: ignore[union-attr]
    return [path for path, tree in trees.items() if tree is not None]


def _plain(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, (str, int, float, bool)))


def _named_otherwise(module: ast.Module) -> set[str]:
    """The names the importer uses other than as the function of a call (`model_init=load_model`)."""
    index = index_of(module)  # built already for the importer's parser fields
    called = {id(call.func) for call in index.calls}
    named: set[str] = set()
    Name, Attribute = ast.Name, ast.Attribute
    for node in index.nodes:  # by exact type: a name or an attribute is never subclassed in a tree
        kind = type(node)
        if kind is Name:
            if id(node) not in called:
                named.add(node.id)  # type: ignore[attr-defined]
        elif kind is Attribute and id(node) not in called:
            named.add(node.attr)  # type: ignore[attr-defined]
    return named


def _tree(graph: ModuleGraph, module: Path, trees: dict[Path, ast.Module | None]) -> ast.Module | None:
    if module not in trees:
        trees[module] = graph.tree(module)
    return trees[module]


def _called_function(tree: ast.Module | None, name: str) -> ast.FunctionDef | None:
    """What a call of the module's top-level `name` runs with its arguments: the function, or a
    class's `__init__` as the call sees it (without `self`)."""
    if tree is None:
        return None
    found = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and s.name == name]
    if len(found) != 1:
        return None
    if isinstance(found[0], ast.ClassDef):
        return constructor(found[0])
    return found[0] if isinstance(found[0], ast.FunctionDef) else None


def _returned_uses(flow: ModelFlow, calls: list[ast.Call], where: str) -> list[tuple[int | None, tuple[Consumer, ...]]]:
    """Where an importer sends what its `calls` of one function return: the whole value, and each item
    of a tuple it unpacks (`model, tokenizer = utils.load_model(args)`), located in the importer."""
    whole = tuple(dict.fromkeys(c.elsewhere(where) for call in calls for c in flow.consumers(call)))
    found: list[tuple[int | None, tuple[Consumer, ...]]] = [(None, whole)]
    positions = sorted({i for call in calls for i in unpacked_positions(call, flow.resolver)})
    for position in positions:
        items = tuple(dict.fromkeys(c.elsewhere(where) for call in calls for c in flow.consumers(call, 0, position)))
        found.append((position, items))
    return found


def _flow_inputs(summary: ModuleSummary, graph: ModuleGraph) -> tuple[Resolver, ImportTable, ImportedClasses]:
    from placement_lint.context.classes import ImportedClasses  # it imports this module
    from placement_lint.distributed import SINGLE

    resolver = Resolver(summary.module, SINGLE)
    classes = ImportedClasses(summary.module, summary.path, graph)
    return resolver, ImportTable.of(summary.module, resolver.index.imports), classes
