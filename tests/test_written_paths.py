"""Paths a script writes from literals and its own location (analysis/written_paths.py)."""

from __future__ import annotations

import ast

import pytest

from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.written_paths import opened_by_with, written_path
from placement_lint.distributed import SINGLE

MODULE = """
import os
from pathlib import Path
ROOT = os.path.dirname(os.path.abspath(__file__))
UP = os.path.dirname(ROOT)
CHOSEN = "a.json" if flag else "b.json"
"""


def _bound() -> dict[str, ast.expr]:
    return {s.targets[0].id: s.value for s in ast.parse(MODULE).body if isinstance(s, ast.Assign)}  # type: ignore[attr-defined]


def _path(expression: str) -> str | None:
    bound = _bound()

    def values(name: ast.Name) -> list[ast.expr | None]:
        value = bound.get(name.id)
        if isinstance(value, ast.IfExp):
            return [value.body, value.orelse]
        return [value]

    return written_path(ast.parse(expression, mode="eval").body, values)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('os.path.join(ROOT, "configs", "ds_zero3.json")', "configs/ds_zero3.json"),
        ('os.path.join(UP, "configs", "ds.json")', "../configs/ds.json"),
        ('f"{ROOT}/configs/ds.json"', "configs/ds.json"),
        ('ROOT + "/ds.json"', "ds.json"),
        ('str(Path(__file__).parent / "configs" / "ds.json")', "configs/ds.json"),
        ('Path(__file__).resolve().parents[1] / "ds.json"', "../ds.json"),
        ('Path(__file__).parent.joinpath("configs", "ds.json").as_posix()', "configs/ds.json"),
        ('os.path.join("configs", "ds.json")', "configs/ds.json"),  # relative to where the process runs, as written
        ('"/abs/ds.json"', "/abs/ds.json"),
    ],
)
def test_paths_written_from_literals_and_the_script_folder(expression: str, expected: str) -> None:
    assert _path(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        'os.path.join(UNKNOWN, "ds.json")',  # a name the script does not bind
        'os.path.join(ROOT, os.environ["CFG"])',  # set at run time
        "CHOSEN",  # two values
        'os.path.join(ROOT, "/etc/ds.json")',  # an absolute part restarts the path
        'Path(__file__).parents[20] / "ds.json"',  # above any folder
        'f"{ROOT!r}/ds.json"',
        'os.path.dirname(__file__)[:-1] + "x.json"',
    ],
)
def test_paths_not_known_here(expression: str) -> None:
    assert _path(expression) is None


def test_opened_by_with_is_the_nearest_with_of_the_same_function_binding_the_name() -> None:
    module = ast.parse(
        "with open('outer.json') as f:\n"
        "    with open('inner.json') as g:\n"
        "        a = json.load(f)\n"
        "        b = json.load(g)\n"
        "    def later():\n"
        "        return json.load(f)\n"
    )
    resolver = Resolver(module, SINGLE)
    reads = [node.args[0] for node in ast.walk(module) if isinstance(node, ast.Call) and ast.unparse(node.func) == "json.load"]

    def opened(read: ast.expr) -> str | None:
        assert isinstance(read, ast.Name)
        found = opened_by_with(resolver, read)
        return ast.unparse(found) if found is not None else None

    # The function reads `f` when it is called, once the file may be closed: not known from the `with`.
    assert [opened(read) for read in reads] == ["open('outer.json')", "open('inner.json')", None]
