"""A LazyPattern answers as the compiled pattern would, and compiles once, at its first use."""

from __future__ import annotations

import re

import pytest

from placement_lint.patterns import LazyPattern


def test_answers_as_the_compiled_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[object] = []
    real_compile = re.compile
    monkeypatch.setattr(re, "compile", lambda *args: compiled.append(args) or real_compile(*args))
    lazy = LazyPattern(r"^(?P<key>\w+)\s*=\s*(\w+)$", re.MULTILINE)
    assert compiled == [], "nothing is compiled until a search"
    text = "a = 1\nb = two\n= nothing\n"
    eager = real_compile(lazy.source, lazy.flags)
    assert lazy.search(text).groupdict() == eager.search(text).groupdict()  # type: ignore[union-attr]
    assert [m.groups() for m in lazy.finditer(text)] == [m.groups() for m in eager.finditer(text)]
    assert lazy.sub(r"\g<key>", text) == eager.sub(r"\g<key>", text)
    assert lazy.match("= x") is None and lazy.fullmatch("k = v").group(2) == "v"  # type: ignore[union-attr]
    assert len(compiled) == 1, "compiled once, at the first search"


def test_bytes_and_unknown_attributes() -> None:
    lazy = LazyPattern(rb"noqa[^\r\n]*DPL")
    assert lazy.search(b"x = 1  # noqa: DPL001\n") is not None
    assert lazy.findall(b"# noqa: DPL1 # noqa: E1") == [b"noqa: DPL"]
    with pytest.raises(AttributeError):
        lazy.groupindex  # noqa: B018 - only the pattern methods are offered
