"""Where an import that a fix adds goes: where isort, and ruff's I001 with its default settings, would
put it, so a file whose imports were sorted stays sorted after `--fix`.

As they sort: the first import block at the top of the module (after its docstring) holds sections
in the order future, standard library, third party, first party, local, one blank line apart; in a
section the `import x` statements come first, then the `from x import y` ones, each by module name
regardless of case; a module imported from twice is one statement, whose names are ordered constants,
then classes, then the rest (ruff's `order-by-type`). So a name goes into the file's statement for
its module if there is one; else a new statement goes to its place in its section, or opens the
section where it belongs.

First party is told as ruff tells it by default: a module found in the project root (the nearest
folder with a pyproject.toml, ruff.toml or .git above the file) or in its `src` folder.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from placement_lint.edits import Edit
from placement_lint.source import SourceFile

FUTURE, STANDARD_LIBRARY, THIRD_PARTY, FIRST_PARTY, LOCAL = range(5)
_PROJECT_MARKERS = ("pyproject.toml", "ruff.toml", ".ruff.toml", ".git")


def import_edit(source: SourceFile, module: ast.Module, imported: str, name: str) -> Edit:
    """The edit that imports `name` from the module `imported` (which the file does not import it from yet)."""
    body = module.body
    start = 1 if body and _is_docstring(body[0]) else 0
    # A notebook's IPython lines (`%%capture`, `!pip install x`) read as `pass`: nothing goes before them.
    while start < len(body) and isinstance(body[start], ast.Pass):
        start += 1
    block: list[ast.Import | ast.ImportFrom] = []
    for statement in body[start:]:
        if not isinstance(statement, (ast.Import, ast.ImportFrom)):
            break
        block.append(statement)
    newline = source.newline
    statement_text = f"from {imported} import {name}"
    if not block:
        return _first_import(source, body, start, statement_text)
    for statement in block:
        if isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module == imported:
            if not any(alias.name == "*" for alias in statement.names):
                return _into(source, statement, name)
    roots = _project_roots(source.path)
    wanted = _section(imported, 0, roots)
    key = _statement_key(True, imported)
    sections = [_section(s.module or "" if isinstance(s, ast.ImportFrom) else s.names[0].name, _level(s), roots) for s in block]
    same = [s for s, section in zip(block, sections, strict=True) if section == wanted]
    if same:
        for statement in same:
            if _statement_key(isinstance(statement, ast.ImportFrom), _module_of(statement)) > key:
                return Edit(_line_start(source, statement), _line_start(source, statement), statement_text + newline)
        return _after(source, same[-1], statement_text + newline)
    # A section of its own: one blank line from its neighbours.
    later = next((s for s, section in zip(block, sections, strict=True) if section > wanted), None)
    if later is None:
        return _after(source, block[-1], newline + statement_text + newline)
    offset = _line_start(source, later)
    return Edit(offset, offset, statement_text + newline + newline)


def _into(source: SourceFile, statement: ast.ImportFrom, name: str) -> Edit:
    """`name` among the names of `from module import ...`, in ruff's order; on a line of its own when
    the statement lists one name a line."""
    names = statement.names
    key = _member_key(name)
    following = next((alias for alias in names if _member_key(alias.name) > key), None)
    one_a_line = len({alias.lineno for alias in names}) == len(names) and names[0].lineno != statement.lineno
    if following is not None:
        offset = source.offset(following.lineno, following.col_offset)
        if one_a_line:
            line_start = source.line_starts[following.lineno - 1]
            indent = source.text[line_start:offset]
            return Edit(offset, offset, f"{name},{source.newline}{indent}")
        return Edit(offset, offset, f"{name}, ")
    last = names[-1]
    end = source.offset(last.end_lineno or last.lineno, last.end_col_offset or 0)
    if one_a_line:
        line_start = source.line_starts[last.lineno - 1]
        indent = source.text[line_start : source.offset(last.lineno, last.col_offset)]
        return Edit(end, end, f",{source.newline}{indent}{name}")
    return Edit(end, end, f", {name}")


def _first_import(source: SourceFile, body: list[ast.stmt], start: int, statement_text: str) -> Edit:
    """The file's first import: after its docstring, or above its first statement (below a shebang,
    an encoding cookie, the comments that open the file), followed by the blank lines isort keeps
    after imports: two before a function or class, one before other code."""
    newline = source.newline
    following = body[start] if len(body) > start else None
    if start:  # after the docstring, or a notebook's IPython lines
        edit = _after(source, body[start - 1], statement_text + newline)
    elif following is not None:
        offset = source.line_starts[_first_line(following) - 1]
        edit = Edit(offset, offset, statement_text + newline)
    else:
        edit = _after(source, None, statement_text + newline)
    if following is None:
        return edit
    wanted = 2 if isinstance(following, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else 1
    blank = 0
    for row in range(
        source.position(edit.start)[0] if edit.start < len(source.text) else source.line_count + 1, _first_line(following)
    ):
        if source.line(row).strip():
            break
        blank += 1
    return edit._replace(content=edit.content + newline * max(wanted - blank, 0))


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", ())
    return min([statement.lineno, *(decorator.lineno for decorator in decorators)])


def _after(source: SourceFile, anchor: ast.stmt | None, text: str) -> Edit:
    if anchor is None:
        end = len(source.text)
        if source.text and not source.text.endswith(("\n", "\r")):
            return Edit(end, end, source.newline + text.removesuffix(source.newline))
        return Edit(end, end, text)
    end_row = anchor.end_lineno or anchor.lineno
    offset = source.line_starts[end_row] if end_row < source.line_count else len(source.text)
    if offset == len(source.text) and not source.text.endswith(("\n", "\r")):
        return Edit(offset, offset, source.newline + text.removesuffix(source.newline))
    return Edit(offset, offset, text)


def _line_start(source: SourceFile, statement: ast.stmt) -> int:
    return source.line_starts[statement.lineno - 1]


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
    )


def _level(statement: ast.Import | ast.ImportFrom) -> int:
    return statement.level if isinstance(statement, ast.ImportFrom) else 0


def _module_of(statement: ast.Import | ast.ImportFrom) -> str:
    return (statement.module or "") if isinstance(statement, ast.ImportFrom) else statement.names[0].name


def _statement_key(is_from: bool, module: str) -> tuple[bool, str, str]:
    """isort's order in a section (ruff's default `force-sort-within-sections = false`): `import x`
    before `from x import y`, each by module name, case aside."""
    return (is_from, module.lower(), module)


def _member_key(name: str) -> tuple[int, str, str]:
    """ruff's `order-by-type`: CONSTANTS, then Classes, then the rest; each by name, case aside."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return (kind, name.lower(), name)


def _section(module: str, level: int, roots: tuple[Path, ...]) -> int:
    if level:
        return LOCAL
    top = module.split(".")[0]
    if top == "__future__":
        return FUTURE
    if top in sys.stdlib_module_names:
        return STANDARD_LIBRARY
    if any((root / top).is_dir() or (root / f"{top}.py").is_file() for root in roots):
        return FIRST_PARTY
    return THIRD_PARTY


def _project_roots(path: Path) -> tuple[Path, ...]:
    """The folders ruff's default `src = [".", "src"]` names: the project root and its `src`."""
    folder = path.resolve().parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in _PROJECT_MARKERS):
            return (candidate, candidate / "src")
    return (folder, folder / "src")
