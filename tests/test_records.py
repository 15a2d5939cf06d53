"""A Record compares, hashes and shows itself as the frozen dataclass it replaced would."""

from __future__ import annotations

import pickle

import pytest

from placement_lint.analysis.guards import Span
from placement_lint.context.commands import Launch
from placement_lint.context.evidence import Context, Override
from placement_lint.distributed import NAMED_SETUPS
from placement_lint.records import Record


class _Pair(Record):
    __slots__ = ("kept", "ignored")
    compared = ("kept",)

    def __init__(self, kept: int, ignored: object) -> None:
        self.kept = kept
        self.ignored = ignored


def test_equal_and_hashed_by_the_compared_fields_of_the_same_class() -> None:
    assert Span(1, 8) == Span(1, 8) and hash(Span(1, 8)) == hash(Span(1, 8)) == hash((1, 8))
    assert Span(1, 8) != Span(1, 9) and Span(1, 8) != (1, 8), "a tuple is a value of its own"
    assert _Pair(1, "a") == _Pair(1, "b") and hash(_Pair(1, "a")) == hash(_Pair(1, "b"))
    assert _Pair(1, "a") != _Pair(2, "a")
    assert repr(_Pair(1, "a")) == "_Pair(kept=1)" and repr(Span(0, 3)) == "Span(low=0, high=3)"


def test_the_records_that_cross_processes_pickle_and_keep_their_meaning() -> None:
    context = Context(override=Override(NAMED_SETUPS["zero3"], "--context zero3"))
    copy = pickle.loads(pickle.dumps(context))
    assert copy == context and hash(copy) == hash(context) and copy.setup == context.setup
    assert context.replace(evidence=()) == context and Context() != context


def test_a_launch_is_compared_but_never_hashed() -> None:
    assert Launch("torchrun", target="train.py") == Launch("torchrun", target="train.py")
    assert Launch("torchrun", target="train.py") != Launch("torchrun", target="eval.py")
    assert Launch("python").options is not Launch("python").options, "each launch has its own options"
    with pytest.raises(TypeError):
        hash(Launch("python"))
    assert repr(Launch("python")).startswith("Launch(launcher='python', target=None")
