"""Which parts of a file run together: functions joined by calls and references.

A distributed setup in one function says nothing about a loader in an unrelated one: a test file
holds dozens of independent tests, and a utility module holds helpers for several scripts. We
split a file into connected parts of its call graph: module-level code, and every function it
calls or passes on (`notebook_launcher(train_fn)`, `mp.spawn(worker)`, `model_init=make_model`),
transitively, in both directions. Evidence applies to the part it is in.
"""

from __future__ import annotations

import ast

from placement_lint.analysis.index import index_of, walk
from placement_lint.analysis.names import dotted, last_segment

MODULE = 0  # the part holding module-level code
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Calls that start processes running the function they are given: (callee's last name, its keyword).
_PROCESS_STARTERS = {
    "spawn": "fn",
    "start_processes": "fn",
    "notebook_launcher": "function",
    "TorchTrainer": "train_loop_per_worker",
}


class Parts:
    def __init__(self, module: ast.Module) -> None:
        self.index = index_of(module)
        self.module = module
        self._parent: dict[int, int] = {MODULE: MODULE}
        self._locals: dict[int, frozenset[str]] = {}
        self._owners: dict[int, int] = {}  # node -> its owner, as _owner works them out
        self._calls: dict[int, set[int]] = {}  # owner -> owners it calls or passes on (directed)
        # A bare name can only call a module-level function; `self.x` / `cls.x` a method.
        functions = {node.name: node for node in module.body if isinstance(node, _FUNCTIONS)}
        self._functions = functions
        self._unguarded_module_calls: set[int] = set()  # what module-level code outside `__main__` calls
        methods: dict[str, list[ast.AST]] = {}
        for cls in self.index.classes:
            for item in cls.body:
                if isinstance(item, _FUNCTIONS):
                    methods.setdefault(item.name, []).append(item)
        Name, Attribute, Load = ast.Name, ast.Attribute, ast.Load
        for node in self.index.nodes:  # by exact type: a parsed tree's nodes are never subclassed
            kind = type(node)
            if kind is Name and type(node.ctx) is Load and node.id in functions:  # type: ignore[attr-defined]
                if not self._shadowed(node):
                    owner = self._owner(node)
                    self._link(owner, id(functions[node.id]))
                    if owner == MODULE and not self.under_main_guard(node):
                        self._unguarded_module_calls.add(id(functions[node.id]))
            elif kind is Attribute and node.attr in methods:  # type: ignore[attr-defined]
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

    def started_processes_run(self, call: ast.AST) -> tuple[int, set[int]] | None:
        """The functions of this file that the processes a call like `mp.spawn(worker, ...)` starts run:
        the worker and what it calls, and what module-level code outside `if __name__ == "__main__":`
        calls (a spawned child re-imports the script, and runs that code too). None: not such a call, or
        a worker that is no module-level function here (an import, a lambda): unknown, so all of it.
        Returned with the worker itself."""
        if not isinstance(call, ast.Call):
            return None
        keyword_name = _PROCESS_STARTERS.get(last_segment(dotted(call.func) or ""))
        if keyword_name is None:
            return None
        given = next((kw.value for kw in call.keywords if kw.arg == keyword_name), None)
        target = call.args[0] if call.args else given
        if not isinstance(target, ast.Name) or target.id not in self._functions or self._shadowed(target):
            return None
        start = {id(self._functions[target.id])} | self._unguarded_module_calls
        seen, stack = set(start), list(start)
        while stack:
            for callee in self._calls.get(stack.pop(), ()):
                if callee not in seen and callee != MODULE:
                    seen.add(callee)
                    stack.append(callee)
        return id(self._functions[target.id]), seen

    def under_main_guard(self, node: ast.AST) -> bool:
        """Inside `if __name__ == "__main__":`: code a spawned child, which imports the script under
        another name, does not run."""
        child: ast.AST = node
        current = self.index.parents.get(id(node))
        while current is not None:
            if isinstance(current, ast.If) and _is_main_test(current.test) and child in current.body:
                return True
            child, current = current, self.index.parents.get(id(current))
        return False

    def _owner(self, node: ast.AST) -> int:
        """The top-level function or method holding `node`, or MODULE: the outermost function that is
        a module's or a class's own. Kept per node on the way up, so a file's thousands of names walk
        each stretch of their ancestors once (20 ms of four transformers modules, walked name by name)."""
        owners, parents = self._owners, self.index.parents
        chain: list[ast.AST] = []
        current: ast.AST | None = node
        while current is not None and id(current) not in owners:
            chain.append(current)
            current = parents.get(id(current))
        owner = owners[id(current)] if current is not None else MODULE
        for child in reversed(chain):  # from the top down: an owner found above wins
            if (
                owner == MODULE
                and isinstance(child, _FUNCTIONS)
                and isinstance(parents.get(id(child)), (ast.Module, ast.ClassDef))
            ):
                owner = id(child)
            owners[id(child)] = owner
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


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _locals(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    args = function.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return frozenset(names)
