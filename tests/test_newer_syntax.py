"""A file the running Python cannot parse, but a newer one can: the error says which Python read it."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

from placement_lint.newer_syntax import newer_syntax_hint

from helpers import lint_source

PY311 = (3, 11)


@pytest.mark.parametrize(
    ("text", "needs"),
    [
        ("type X = int\n", "`type` statements need Python 3.12"),
        ("def first[T](items: list[T]) -> T:\n    return items[0]\n", "type parameter lists (`def f[T]`) need Python 3.12"),
        ("class Box[T]:\n    pass\n", "type parameter lists (`class C[T]`) need Python 3.12"),
        ('name = f"{"nested"}"\n', "f-strings that reuse their quotes or hold a backslash need Python 3.12"),
        ("try:\n    pass\nexcept ValueError, TypeError:\n    pass\n", "need Python 3.14"),
        ('greeting = t"hello {name}"\n', 'template strings (`t"..."`) need Python 3.14'),
    ],
)
def test_the_syntax_and_the_python_it_needs_are_named(text: str, needs: str) -> None:
    hint = newer_syntax_hint(text, PY311)
    assert f"Python {platform.python_version()} read it" in hint and needs in hint


def test_a_newer_python_unknown_to_the_tree_gets_the_general_word() -> None:
    # Parsed by LibCST, nothing in it newer than 3.11: said without naming a construct.
    hint = newer_syntax_hint("x = 1\n", PY311)
    assert hint.endswith("the file may use the syntax of a newer Python: run placement-lint under that Python)")


@pytest.mark.parametrize("text", ["def f(:\n    pass\n", "1 = x\n", 'print "python 2"\n'])
def test_a_real_syntax_error_gets_no_hint(text: str) -> None:
    assert newer_syntax_hint(text, PY311) == ""


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="this Python parses the newer syntax")
def test_the_parse_error_of_a_checked_file_names_the_interpreter(tmp_path: Path) -> None:
    source = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")\n'
        "try:\n    model.eval()\nexcept ValueError, TypeError:\n    pass\n"
    )
    result = lint_source(tmp_path, source, context="ddp")
    assert result.error is not None and result.error.startswith("cannot parse: line 5: ")
    assert f"(Python {platform.python_version()} read it; " in result.error and "need Python 3.14 or newer" in result.error
    broken = lint_source(tmp_path, source.replace("except ValueError, TypeError:", "except (:"), context="ddp")
    assert broken.error is not None and "read it" not in broken.error
