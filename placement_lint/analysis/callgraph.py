"""Which parts of a file run together: functions joined by calls and references.

A distributed setup in one function says nothing about a loader in an unrelated one: a test file
holds dozens of independent tests, and a utility module holds helpers for several scripts. We
split a file into connected parts of its call graph: module-level code, and every function it
calls or passes on (`notebook_launcher(train_fn)`, `mp.spawn(worker)`, `model_init=make_model`),
transitively, in both directions. Evidence applies to the part it is in.
"""

from __future__ import annotations

import ast

from placement_lint.analysis.index import index_of

MODULE = 0  # the part holding module-level code
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Parts:
    def __init__(self, module: ast.Module) -> None:
        self.index = index_of(module)
        self.module = module
        self._parent: dict[int, int] = {MODULE: MODULE}
        self._locals: dict[int, frozenset[str]] = {}
        self._calls: dict[int, set[int]] = {}  # owner -> owners it calls or passes on (directed)
        # A bare name can only call a module-level function; `self.x` / `cls.x` a method.
        functions = {node.name: node for node in module.body if isinstance(node, _FUNCTIONS)}
        methods: dict[str, list[ast.AST]] = {}
        for cls in self.index.classes:
            for item in cls.body:
                if isinstance(item, _FUNCTIONS):
                    methods.setdefault(item.name, []).append(item)
        for node in self.index.nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in functions:
                if not self._shadowed(node):
                    self._link(self._owner(node), id(functions[node.id]))
            elif isinstance(node, ast.Attribute) and node.attr in methods:
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    for method in methods[node.attr]:
                        self._link(self._owner(node), id(method))

    def _link(self, caller: int, callee: int) -> None:
        self._calls.setdefault(caller, set()).add(callee)
        self._union(caller, callee)

    def owner_of(self, node: ast.AST) -> int:
        return self._owner(node)

    def reachable(self, names: frozenset[str]) -> set[int]:
        """Owners that run when the named module-level functions/classes are used ("__main__": when the
        file is executed), following calls in one direction only: what they call, not who calls them."""
        start: set[int] = {MODULE} if "__main__" in names else set()
        for node in self.module.body:
            if isinstance(node, _FUNCTIONS) and node.name in names:
                start.add(id(node))
            elif isinstance(node, ast.ClassDef) and node.name in names:
                start |= {id(item) for item in node.body if isinstance(item, _FUNCTIONS)}
        seen, stack = set(start), list(start)
        while stack:
            for callee in self._calls.get(stack.pop(), ()):
                if callee not in seen:
                    seen.add(callee)
                    stack.append(callee)
        return seen

    def _owner(self, node: ast.AST) -> int:
        """The top-level function or method holding `node`, or MODULE."""
        owner = MODULE
        current = self.index.parents.get(id(node))
        child: ast.AST = node
        while current is not None:
            if isinstance(child, _FUNCTIONS) and isinstance(current, (ast.Module, ast.ClassDef)):
                owner = id(child)
            child, current = current, self.index.parents.get(id(current))
        return owner

    def _shadowed(self, name: ast.Name) -> bool:
        """The name is a parameter or local of a function around it, not the module-level function."""
        current = self.index.parents.get(id(name))
        while current is not None:
            if isinstance(current, _FUNCTIONS):
                if id(current) not in self._locals:
                    self._locals[id(current)] = _locals(current)
                if name.id in self._locals[id(current)]:
                    return True
            current = self.index.parents.get(id(current))
        return False

    def _find(self, key: int) -> int:
        self._parent.setdefault(key, key)
        root = key
        while self._parent[root] != root:
            root = self._parent[root]
        self._parent[key] = root
        return root

    def _union(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            # MODULE (0) stays the root of its part.
            self._parent[max(ra, rb) if MODULE not in (ra, rb) else (rb if ra == MODULE else ra)] = (
                min(ra, rb) if MODULE not in (ra, rb) else MODULE
            )

    def part_of(self, node: ast.AST) -> int:
        return self._find(self._owner(node))


def _locals(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    args = function.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return frozenset(names)
