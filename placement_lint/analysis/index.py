"""One walk over a parsed module, shared by every analysis: nodes, parents, calls, definitions.

Analyses ask many questions of the same tree ("which calls come before this load?", "who is this
node's parent?"); answering each with a fresh `ast.walk` made checking quadratic in file size.
"""

from __future__ import annotations

import ast
from functools import cached_property

from placement_lint.analysis.names import dotted, last_segment

_ATTRIBUTE = "_placement_lint_index"
# Fields left out of the index: the context and operator nodes (a Load, an Add) are singletons CPython
# shares between every node that has one, so they have no one parent; they were a third of the nodes.
_UNINDEXED = frozenset({"ctx", "op", "ops"})
# Fields that hold names, numbers or flags, never a node (`Name.id`, `Attribute.attr`, `keyword.arg`):
# not looked at, as a third of the nodes are names (`names` holds strings only in global/nonlocal;
# `name` a node only in a type alias).
_TEXT_FIELDS = frozenset(
    {"id", "attr", "arg", "name", "asname", "module", "level", "type_comment", "conversion", "is_async", "kind"}
)
_INDEXED_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}  # per node class, filled as classes are met


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node class that hold child nodes worth walking (not the shared context and
    operator singletons): every walk of a tree here reads this one table."""
    fields = _INDEXED_FIELDS.get(kind)
    if fields is None:
        text = _TEXT_FIELDS
        if kind in (ast.Global, ast.Nonlocal):
            text = text | {"names"}
        elif kind.__name__ == "TypeAlias":  # Python 3.12's `type X = ...` names its alias with a Name node
            text = text - {"name"}
        fields = _INDEXED_FIELDS[kind] = tuple(f for f in kind._fields if f not in _UNINDEXED and f not in text)
    return fields


def walk(node: ast.AST) -> list[ast.AST]:
    """`node` and every node under it, breadth first as `ast.walk` gives them, but for the shared
    context and operator nodes: a list built by one loop, where `ast.walk`'s generators cost about
    three times as much (the value flow walks the head of every statement it passes)."""
    nodes = [node]
    append, AST = nodes.append, ast.AST
    for current in nodes:  # the list grows as the walk goes
        for name in child_fields(type(current)):
            value = getattr(current, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        append(item)
            elif isinstance(value, AST):
                append(value)
    return nodes


class ModuleIndex:
    def __init__(self, module: ast.Module) -> None:
        self.module = module
        # One breadth-first pass that records parents as it goes: `ast.walk` plus a second pass for
        # parents walked the tree twice, through generators (a third of the time on large files).
        nodes: list[ast.AST] = [module]
        parents: dict[int, ast.AST] = {}
        # Every analysis asks for the calls and most for the classes: gathered on the way, not by two
        # more passes over every node (a millisecond of each big file's check).
        calls: list[ast.Call] = []
        classes: list[ast.ClassDef] = []
        # Calls and assignments in the walk's order: where device maps are looked for (placements.py),
        # a tenth of the nodes to go through.
        calls_and_assigns: list[ast.Call | ast.Assign] = []
        # The imports and the `def`s, in the walk's order: the import table, the names a helper call can
        # start with and the names imports bind are read from these, not from a pass over every node.
        imports: list[ast.Import | ast.ImportFrom] = []
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        walrus = False
        append, AST, indexed = nodes.append, ast.AST, _INDEXED_FIELDS
        Call, ClassDef, Assign, Import, ImportFrom = ast.Call, ast.ClassDef, ast.Assign, ast.Import, ast.ImportFrom
        FunctionDef, AsyncFunctionDef, NamedExpr = ast.FunctionDef, ast.AsyncFunctionDef, ast.NamedExpr
        for node in nodes:  # the list grows as the walk goes: a list iterator reads to its current end
            kind = type(node)
            fields = indexed.get(kind)
            if fields is None:
                fields = child_fields(kind)
            if kind is Call:
                calls.append(node)  # type: ignore[arg-type]
                calls_and_assigns.append(node)  # type: ignore[arg-type]
            elif kind is Assign:
                calls_and_assigns.append(node)  # type: ignore[arg-type]
            elif kind is FunctionDef or kind is AsyncFunctionDef:
                functions.append(node)  # type: ignore[arg-type]
            elif kind is ClassDef:
                classes.append(node)  # type: ignore[arg-type]
            elif kind is Import or kind is ImportFrom:
                imports.append(node)  # type: ignore[arg-type]
            elif kind is NamedExpr:
                walrus = True
            for name in fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, AST):
                            parents[id(item)] = node
                            append(item)
                elif isinstance(value, AST):
                    parents[id(value)] = node
                    append(value)
        self.nodes = nodes
        self.parents = parents
        self.calls = calls
        self.classes = classes
        self.calls_and_assigns = calls_and_assigns
        self.imports = imports
        self.functions = functions
        self.has_walrus = walrus
        # Nodes an analysis adds to the tree, by what they stand for (a kind and the ids of the nodes they
        # are made of: the resolver's getattr reads, match cases and helper conditions), kept as long as
        # the parents that name them, so that no id there is reused.
        self.added: dict[object, ast.AST] = {}

    @cached_property
    def calls_by_name(self) -> dict[str, list[ast.Call]]:
        """Calls keyed by the last segment of the callee as written (`f(...)`, `x.f(...)` -> `f`)."""
        found: dict[str, list[ast.Call]] = {}
        for call in self.calls:
            found.setdefault(last_segment(dotted(call.func)), []).append(call)
        return found

    @cached_property
    def loads_by_name(self) -> dict[str, list[ast.Name | ast.Attribute]]:
        """Every read of a name or an attribute chain (`model`, `self.model`), keyed by its dotted text."""
        # Each chain's text from its inner chain's, children first (the nodes are breadth first): `dotted`
        # of every node rebuilt each inner chain again, most of what the index cost a module.
        Name, Attribute, Call, Load = ast.Name, ast.Attribute, ast.Call, ast.Load
        texts: dict[int, str] = {}
        for node in reversed(self.nodes):
            kind = type(node)
            if kind is Name:
                texts[id(node)] = node.id  # type: ignore[attr-defined]
            elif kind is Attribute:
                inner = texts.get(id(node.value))  # type: ignore[attr-defined]
                if inner is not None:
                    texts[id(node)] = f"{inner}.{node.attr}"  # type: ignore[attr-defined]
            elif kind is Call:
                inner = texts.get(id(node.func))  # type: ignore[attr-defined]
                if inner is not None:
                    texts[id(node)] = f"{inner}()"  # `PartialState().device`, as `dotted` writes it
        found: dict[str, list[ast.Name | ast.Attribute]] = {}
        for node in self.nodes:
            kind = type(node)
            if (kind is Name or kind is Attribute) and type(node.ctx) is Load:  # type: ignore[attr-defined]
                key = texts.get(id(node))
                if key:
                    found.setdefault(key, []).append(node)  # type: ignore[arg-type]
        return found


def index_of(module: ast.Module) -> ModuleIndex:
    """The module's index, built once and kept on the tree itself."""
    index = getattr(module, _ATTRIBUTE, None)
    if index is None:
        index = ModuleIndex(module)
        setattr(module, _ATTRIBUTE, index)
    return index


def release_index(module: ast.Module) -> None:
    """Drop the index kept on the tree. The index refers back to the tree (its first node, the
    parents), so a tree that keeps its index is freed only by the cycle collector: every checked file's
    tree then piles up until a collection walks them all (46 ms of transformers' run, once). Released,
    the tree goes as soon as its file's check lets go of it; asked again, the index is built again."""
    vars(module).pop(_ATTRIBUTE, None)
