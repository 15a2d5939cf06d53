"""Why a file the running Python cannot parse may still be valid Python: a newer Python's syntax.

`ast` parses with the grammar of the interpreter placement-lint runs under, so a Python 3.12 file
(`type X = int`, `def f[T]`) is "invalid syntax" under 3.11. LibCST's parser knows the newer
grammars: when it reads the file, the error names the interpreter that read it and, where the tree
shows it, the syntax and the Python it needs. Asked only of a file that did not parse.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

Version = tuple[int, int]


def newer_syntax_hint(text: str, running: Version | None = None) -> str:
    """A clause for the parse error (empty when LibCST cannot read the text either: a real syntax error)."""
    try:
        import libcst
    except ImportError:  # pragma: no cover - a dependency; the hint is a courtesy
        return ""
    try:
        module = libcst.parse_module(text)
    except Exception:  # ParserSyntaxError, or a failure of LibCST's own: no hint either way
        return ""
    running = running or sys.version_info[:2]
    reader = f"Python {platform.python_version()} read it"
    needed = _newer_than(module, running)
    if needed is None:
        return f" ({reader}; the file may use the syntax of a newer Python: run placement-lint under that Python)"
    version, what = needed
    return f" ({reader}; {what} need Python {version[0]}.{version[1]} or newer: run placement-lint under such a Python)"


def _newer_than(module: Any, running: Version) -> tuple[Version, str] | None:
    """The first construct in the tree that needs a Python newer than `running`, and what it is."""
    import libcst

    found: list[tuple[Version, str]] = []

    def note(version: Version, what: str) -> None:
        if version > running and not found:
            found.append((version, what))

    class Finder(libcst.CSTVisitor):
        def visit_TypeAlias(self, node: libcst.TypeAlias) -> None:
            note((3, 12), "`type` statements")

        def visit_FunctionDef(self, node: libcst.FunctionDef) -> None:
            if node.type_parameters is not None:
                note((3, 12), "type parameter lists (`def f[T]`)")

        def visit_ClassDef(self, node: libcst.ClassDef) -> None:
            if node.type_parameters is not None:
                note((3, 12), "type parameter lists (`class C[T]`)")

        def visit_TypeParam(self, node: libcst.TypeParam) -> None:
            if node.default is not None:
                note((3, 13), "type parameter defaults (`[T = int]`)")

        def visit_FormattedString(self, node: libcst.FormattedString) -> None:
            quote = node.end
            for part in node.parts:
                if isinstance(part, libcst.FormattedStringExpression):
                    code = module.code_for_node(part.expression)
                    if quote in code or "\\" in code:
                        note((3, 12), "f-strings that reuse their quotes or hold a backslash")

        def visit_ExceptHandler(self, node: libcst.ExceptHandler) -> None:
            if isinstance(node.type, libcst.Tuple) and not node.type.lpar:
                note((3, 14), "`except` clauses naming several exceptions without parentheses")

        def visit_ExceptStarHandler(self, node: libcst.ExceptStarHandler) -> None:
            note((3, 11), "`except*` clauses")

        def visit_TemplatedString(self, node: Any) -> None:
            note((3, 14), 'template strings (`t"..."`)')

    module.visit(Finder())
    return found[0] if found else None
