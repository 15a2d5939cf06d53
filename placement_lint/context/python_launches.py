"""Launch commands written in Python: `subprocess.run(["torchrun", "--nproc_per_node", "8", "train.py"])`,
`os.system("deepspeed train.py ...")`, `subprocess.Popen(cmd)` where `cmd` is assembled from literals
(bound once, then grown with `+`, `+=`, `.append`, `.extend`, f-strings of known names, `" ".join`).

Parsed with `ast`, never run. Each command found becomes a launch line at the call's file:line, read
as a shell script's line is. A part whose value is only known when the script runs (`str(args.gpus)`)
is an unknown word (`$UNKNOWN`), as an unset shell variable is: a launcher option we cannot see, never
a guess.
"""

from __future__ import annotations

import ast
import functools
import os
import shlex
from collections.abc import Iterator
from pathlib import Path

from placement_lint.records import NamedTuple

_UNKNOWN = "$UNKNOWN"
# Calls that run their first argument as a command: by the module they come from, then the name.
_RUNNERS = {
    "subprocess": {"run", "call", "check_call", "check_output", "Popen", "getoutput", "getstatusoutput"},
    "os": {"system", "popen"},
}
_EXEC = {"execv", "execvp", "execve", "execvpe"}  # os.execvp(file, argv): the argv is the command


class PythonCommand(NamedTuple):
    line: int  # of the call that runs it
    words: tuple[str, ...] = ()  # given as its words (`subprocess.run([...])`)
    script: str = ""  # or as a shell script (`os.system("...")`, `shell=True`)


def python_commands(path: Path, text: str) -> list[PythonCommand]:
    """The launch commands a Python file runs, each at the line of the call that runs it."""
    return list(_read_commands(path, text))


@functools.lru_cache(maxsize=64)
def _read_commands(path: Path, text: str) -> tuple[PythonCommand, ...]:
    # Asked twice for a launch file: whether it is one (launcher_names), then for its lines.
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()  # the file's own check names the problem
    return tuple(_Reader(path, tree).commands())


class _Reader:
    def __init__(self, path: Path, tree: ast.Module) -> None:
        self.path = path
        self.tree = tree
        self.folder = str(path.parent)
        self.modules, self.functions = _imported_runners(tree)
        self._known_module_values: dict[str, object] | None = None
        self._returning: set[str] = set()  # the functions whose returned value is being worked out

    def commands(self) -> Iterator[PythonCommand]:
        running = self._scopes_running_commands()
        module_values: dict[str, object] | None = None
        for scope in _scopes(self.tree):
            if id(scope) not in running:
                continue  # no call in it can run a command: nothing to read
            conditional: set[int] = set()
            statements = _in_order(scope, conditional)
            if scope is not self.tree and module_values is None:
                module_values = self._known_module_values = self._module_values()
            values: dict[str, object] = {} if scope is self.tree else dict(module_values or {})
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                _forget_parameters(scope, values)
            for node in statements:
                if isinstance(node, ast.Call):
                    command = self._command(node, values)
                    if command is not None:
                        yield command
                self._bind(node, values, id(node) in conditional)

    def _scopes_running_commands(self) -> set[int]:
        """The ids of the scopes (as `_scopes` and `_own_nodes` cut them) holding a call of a runner,
        found in one walk: a file of many functions reads only those that may start a process."""
        found: set[int] = set()
        pending: list[tuple[ast.AST, ast.AST | None]] = [(self.tree, self.tree)]
        while pending:
            node, scope = pending.pop()
            if scope is not None and isinstance(node, ast.Call) and self._runner(node) is not None:
                found.add(id(scope))
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    pending.append((child, child))
                elif isinstance(child, (ast.Lambda, ast.ClassDef)):
                    pending.append((child, None))  # read by no scope; the functions in a class are their own
                else:
                    pending.append((child, scope))
        return found

    def _runner(self, call: ast.Call) -> tuple[str, str] | None:
        """(module, function) of the call, when it names one of `subprocess`'s or `os`'s functions."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module = self.modules.get(func.value.id)
            return (module, func.attr) if module is not None else None
        if isinstance(func, ast.Name):
            return self.functions.get(func.id)
        return None

    def _module_values(self) -> dict[str, object]:
        values: dict[str, object] = {}
        for node in self.tree.body:
            self._bind(node, values)
        return {name: value for name, value in values.items() if value is not None}

    def _bind(self, node: ast.AST, values: dict[str, object], conditional: bool = False) -> None:
        """What a statement does to the names the scope knows: an assignment binds (a second binding
        of a name not built from itself makes it unknown), `+=`, `.append` and `.extend` grow a list.
        A list grown only on some paths (`conditional`: under an `if`, in a loop) grows by one unknown
        word, as an unset shell variable: options we cannot see, never both branches' at once."""
        if conditional and self._grows(node, values):
            name = self._grown_name(node)
            current = values.get(name)
            values[name] = [*current, _UNKNOWN] if isinstance(current, list) else None
            return
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            uses_itself = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
            if name in values and not uses_itself:
                values[name] = None
            else:
                values[name] = self._value(node.value, values)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values[node.target.id] = None if node.target.id in values else self._value(node.value, values)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            values[node.target.id] = _added(values.get(node.target.id), self._value(node.value, values))
        elif isinstance(node, (ast.For, ast.With, ast.AsyncFor)) or isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _bound_names(node):
                values[target] = None
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id in values
        ):
            name, method, args = node.value.func.value.id, node.value.func.attr, node.value.args
            current = values[name]
            if method == "append" and len(args) == 1 and isinstance(current, list):
                values[name] = [*current, _word(self._value(args[0], values))]
            elif method == "extend" and len(args) == 1 and isinstance(current, list):
                more = self._value(args[0], values)
                values[name] = [*current, *more] if isinstance(more, list) else None
            elif method in ("insert", "remove", "pop", "clear", "reverse", "sort"):
                values[name] = None

    def _grown_name(self, node: ast.AST) -> str:
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            return node.target.id
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
        return node.value.func.value.id  # type: ignore[attr-defined, no-any-return]

    def _grows(self, node: ast.AST, values: dict[str, object]) -> bool:
        """`cmd += [...]`, `cmd = cmd + [...]`, `cmd.append(...)`, `cmd.extend(...)` of a name known here."""
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            return node.target.id in values
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            return name in values and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
        return (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr in ("append", "extend", "insert")
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id in values
        )

    def _value(self, node: ast.expr, values: dict[str, object]) -> object:
        """A literal value: a str, a number, a list of words; None when not known statically."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            words: list[str] = []
            for item in node.elts:
                if isinstance(item, ast.Starred):
                    inner = self._value(item.value, values)
                    if not isinstance(inner, list):
                        return None
                    words += inner
                else:
                    words.append(_word(self._value(item, values)))
            return words
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return str(self.path)
            return values.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts: list[str] = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    parts.append(str(part.value))
                elif isinstance(part, ast.FormattedValue):
                    parts.append(_word(self._value(part.value, values)))
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return _added(self._value(node.left, values), self._value(node.right, values))
        if isinstance(node, ast.Call):
            return self._call_value(node, values)
        if isinstance(node, ast.Attribute) and node.attr == "executable" and _is_name(node.value, "sys"):
            return "python"
        return None

    def _call_value(self, node: ast.Call, values: dict[str, object]) -> object:
        func = node.func
        if isinstance(func, ast.Name) and func.id in self._functions and func.id not in self._returning:
            return self._returned(self._functions[func.id], values)
        args = [self._value(arg, values) for arg in node.args]
        if isinstance(func, ast.Name) and func.id == "str" and len(args) == 1 and isinstance(args[0], (str, int, float)):
            return str(args[0])
        if isinstance(func, ast.Attribute):
            # " ".join([...]), shlex.join([...]): the words as one command
            if func.attr == "join" and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str):
                return func.value.value.join(args[0]) if len(args) == 1 and isinstance(args[0], list) else None
            if func.attr == "join" and _is_name(func.value, "shlex") and len(args) == 1 and isinstance(args[0], list):
                return " ".join(args[0])
            if func.attr == "split" and _is_name(func.value, "shlex") and len(args) == 1 and isinstance(args[0], str):
                try:
                    return shlex.split(args[0]) or None
                except ValueError:  # an unclosed quote
                    return None
            if func.attr == "split" and not node.args and not node.keywords:  # "torchrun ... train.py".split()
                text = self._value(func.value, values)
                return text.split() if isinstance(text, str) and text.strip() else None
            if _dotted(func) in ("os.path.dirname", "os.path.abspath", "os.path.realpath") and len(args) == 1:
                if not isinstance(args[0], str):
                    return None
                return os.path.dirname(args[0]) if func.attr == "dirname" else args[0]
            if _dotted(func) == "os.path.join" and args and all(isinstance(arg, str) for arg in args):
                return os.path.join(*args)  # type: ignore[arg-type]
        return None

    @functools.cached_property
    def _functions(self) -> dict[str, ast.FunctionDef]:
        """The module's own functions, by name (one defined twice is not known)."""
        found: dict[str, ast.FunctionDef] = {}
        twice: set[str] = set()
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                if node.name in found:
                    twice.add(node.name)
                found[node.name] = node
        return {name: function for name, function in found.items() if name not in twice}

    def _returned(self, function: ast.FunctionDef, calling: dict[str, object]) -> object:
        """What a function of the module returns, when it builds a command from literals
        (`def build_command(): return ["deepspeed", ...]`): its statements read in order, as a scope's
        are, up to a `return` that runs on every path; its parameters are unknown. It sees the module's
        names, or, while those are not known yet (a call at the top level), the caller's (`calling`)."""
        self._returning.add(function.name)
        try:
            conditional: set[int] = set()
            values = dict(self._known_module_values if self._known_module_values is not None else calling)
            _forget_parameters(function, values)
            for node in _in_order(function, conditional):
                if isinstance(node, ast.Return):
                    if id(node) in conditional or node.value is None:
                        return None  # returns on some paths only: which, is not known here
                    return self._value(node.value, values)
                self._bind(node, values, id(node) in conditional)
            return None
        finally:
            self._returning.discard(function.name)

    def _command(self, call: ast.Call, values: dict[str, object]) -> PythonCommand | None:
        """The commands a call runs, or None when it runs none (or none we can read)."""
        runner = self._runner(call)
        if runner is None or not call.args:
            return None
        module, name = runner
        if module == "os" and name in _EXEC and len(call.args) > 1:
            argument = call.args[1]
        elif name in _RUNNERS.get(module, ()):
            argument = call.args[0]
        else:
            return None
        value = self._value(argument, values)
        line = call.lineno
        if isinstance(value, list) and value and value[0] != _UNKNOWN:
            if any(keyword.arg == "shell" and _true(keyword.value) for keyword in call.keywords):
                return PythonCommand(line, script=" ".join(value))
            return PythonCommand(line, words=tuple(value))
        if isinstance(value, str) and value.strip():
            return PythonCommand(line, script=value)
        return None


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _own_nodes(scope: ast.AST, conditional: set[int]) -> Iterator[ast.AST]:
    """The nodes of a scope, not those of the functions and classes defined in it (their own scopes);
    the ids of those that run only on some paths (in a branch, a loop, an exception handler) are put
    in `conditional`."""
    pending = [(child, False) for child in ast.iter_child_nodes(scope)]
    while pending:
        node, maybe = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.stmt, ast.Call)):
            if maybe:
                conditional.add(id(node))
            yield node
        branches = _branch_bodies(node)
        pending.extend((child, maybe or id(child) in branches) for child in ast.iter_child_nodes(node))


def _in_order(scope: ast.AST, conditional: set[int]) -> list[ast.AST]:
    """A scope's own nodes (`_own_nodes`) in the order they are written, as its statements run."""
    return sorted(_own_nodes(scope, conditional), key=lambda node: (node.lineno, node.col_offset))


def _forget_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef, values: dict[str, object]) -> None:
    """Drop from `values` the names a function's parameters shadow: its caller gives them."""
    for parameter in ast.walk(function.args):
        if isinstance(parameter, ast.arg):
            values.pop(parameter.arg, None)


def _branch_bodies(node: ast.AST) -> set[int]:
    """The ids of the statements of `node` that run only on some paths."""
    if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While)):
        return {id(statement) for statement in (*node.body, *node.orelse)}
    if isinstance(node, ast.Try):
        return {id(handler) for handler in node.handlers} | {id(statement) for statement in node.orelse}
    if isinstance(node, ast.Match):
        return {id(case) for case in node.cases}
    return set()


def _imported_runners(tree: ast.Module) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """The names the file gives `subprocess` and `os` (`import subprocess as sp`), and the runner
    functions it imports by name (`from subprocess import run`)."""
    modules: dict[str, str] = {}
    functions: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _RUNNERS:
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in _RUNNERS and node.level == 0:
            for alias in node.names:
                if alias.name in _RUNNERS[node.module] or (node.module == "os" and alias.name in _EXEC):
                    functions[alias.asname or alias.name] = (node.module, alias.name)
    return modules, functions


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    targets: list[ast.AST] = []
    if isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, ast.With):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    return [n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)]


def _added(left: object, right: object) -> object:
    if isinstance(left, list) and isinstance(right, list):
        return [*left, *right]
    if isinstance(left, str) and isinstance(right, str):
        return left + right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left + right
    return None


def _word(value: object) -> str:
    if isinstance(value, (str, int, float)):
        return str(value)
    return _UNKNOWN


def _true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""
