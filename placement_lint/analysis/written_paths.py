"""A file path a script writes from literals and its own location, read without running it.

`os.path.join(ROOT, "configs", "ds_zero3.json")` with `ROOT = os.path.dirname(os.path.abspath(__file__))`,
`str(Path(__file__).parent / "configs" / "ds_zero3.json")`, `f"{ROOT}/configs/ds_zero3.json"`,
`os.path.join("configs", "ds_zero3.json")`: the path each names, relative to the script's folder when
`__file__` anchors it, else as written (relative to where the process runs). Anything computed at
run time (an environment variable, an argument, a call of the script's own) leaves it unknown.
"""

from __future__ import annotations

import ast
import os
import posixpath
from collections.abc import Callable
from typing import TYPE_CHECKING

from placement_lint.analysis.names import dotted

if TYPE_CHECKING:
    from placement_lint.analysis.dataflow import Resolver

# The script's own folder, before anything is joined onto it, deep enough below a made-up root that
# `..` and `.parent` can climb out of it: paths anchored here are returned relative to it. posixpath
# keeps the result the same on every machine.
_ANCHOR = "/<anchor>"
_HERE = _ANCHOR + "/1/2/3/4/5/6/7/8/<script-folder>"
_SCRIPT = f"{_HERE}/<script>"
_MAX_DEPTH = 12

_JOINS = frozenset({"os.path.join", "osp.join", "path.join", "posixpath.join"})
_DIRNAMES = frozenset({"os.path.dirname", "osp.dirname", "path.dirname"})
# Calls that leave a path where it is (made absolute, normalised, a str or a Path of it).
_SAME_PATH = frozenset(
    {
        "os.path.abspath",
        "os.path.realpath",
        "os.path.normpath",
        "osp.abspath",
        "osp.realpath",
        "osp.normpath",
        "os.fspath",
        "str",
        "Path",
        "pathlib.Path",
        "PurePath",
        "PosixPath",
    }
)
_SAME_PATH_METHODS = frozenset({"resolve", "absolute", "as_posix"})

Bound = Callable[[ast.Name], list[ast.expr | None]]


def written_path(node: ast.expr, bound: Bound, folder: str | None = None) -> str | None:
    """The path `node` names (see the module's docstring), or None. `bound(name)`: the values a name
    can hold where it is read (None for one not known); a name whose values disagree is unknown.
    `folder`: the script's folder, to join a path anchored there onto (else it is relative to it)."""
    written = _written(node, bound, 0)
    if written is None or not written.strip():
        return None
    if _anchored(written):
        normal = posixpath.normpath(written)
        if not _anchored(normal):
            return None
        relative = posixpath.relpath(normal, _HERE)
        return os.path.normpath(os.path.join(folder, relative)) if folder is not None else relative
    return None if "<anchor>" in written else written


def _anchored(path: str) -> bool:
    return path.startswith(_ANCHOR + "/")


def _up(path: str) -> str | None:
    """The folder holding `path`; None for one climbing out of the made-up root."""
    folder = posixpath.dirname(posixpath.normpath(path))
    return None if _anchored(path) and not _anchored(folder) else folder


def _written(node: ast.expr | None, bound: Bound, depth: int) -> str | None:
    if node is None or depth > _MAX_DEPTH:
        return None

    def inner(value: ast.expr | None) -> str | None:
        return _written(value, bound, depth + 1)

    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return _SCRIPT
        values = {inner(value) for value in bound(node)} if depth < _MAX_DEPTH else {None}
        return values.pop() if len(values) == 1 else None
    if isinstance(node, ast.JoinedStr):
        parts = [
            inner(part.value)
            if isinstance(part, ast.FormattedValue) and part.conversion in (-1, 115) and part.format_spec is None
            else (part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else None)
            for part in node.values
        ]
        return None if any(part is None for part in parts) else "".join(parts)  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = inner(node.left), inner(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # a pathlib.Path joined on
        left, right = inner(node.left), inner(node.right)
        return _joined(left, [right])
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        value = inner(node.value)
        return _up(value) if value is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        value, index = inner(node.value.value), node.slice
        if (
            value is None
            or not _anchored(value)
            or not (isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0)
        ):
            return None
        for _ in range(index.value + 1):
            value = _up(value) if value is not None else None
        return value
    if isinstance(node, ast.Call) and not node.keywords:
        return _called(node, inner)
    return None


def _called(node: ast.Call, inner: Callable[[ast.expr | None], str | None]) -> str | None:
    called = dotted(node.func)
    if called in _JOINS and node.args and not any(isinstance(arg, ast.Starred) for arg in node.args):
        parts = [inner(arg) for arg in node.args]
        return _joined(parts[0], parts[1:])
    if called in _DIRNAMES and len(node.args) == 1:
        value = inner(node.args[0])
        return _up(value) if value is not None else None
    if called in _SAME_PATH and len(node.args) == 1:
        return inner(node.args[0])
    if isinstance(node.func, ast.Attribute) and not node.args:
        if node.func.attr in _SAME_PATH_METHODS:
            return inner(node.func.value)
    if isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath" and node.args:
        value = inner(node.func.value)
        return _joined(value, [inner(arg) for arg in node.args])
    return None


def _joined(first: str | None, rest: list[str | None]) -> str | None:
    if first is None or any(part is None for part in rest):
        return None
    if any(os.path.isabs(part) for part in rest):  # type: ignore[arg-type]  # an absolute part restarts the path
        return None
    return posixpath.join(first, *rest)  # type: ignore[arg-type]


def opened_by_with(resolver: Resolver, name: ast.Name) -> ast.expr | None:
    """What `with open(path) as f:` opened, for `f` read in its body: the nearest `with` around it in
    its own function that binds the name (the value flow leaves a name a `with` binds unknown inside
    its block)."""
    for ancestor in resolver.ancestors(name):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)):
            for item in ancestor.items:
                if isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == name.id:
                    return item.context_expr
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break
    return None
