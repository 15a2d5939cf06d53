"""Paths a script writes from literals and its own location (analysis/written_paths.py)."""

from __future__ import annotations

import ast

import pytest

from placement_lint.analysis.written_paths import written_path

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
