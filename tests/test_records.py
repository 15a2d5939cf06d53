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


def _both(body: str) -> tuple[type, type]:
    """The same class body made by typing.NamedTuple and by records.NamedTuple."""
    made = []
    for source in ("typing", "placement_lint.records"):
        namespace: dict[str, object] = {}
        exec(f"from __future__ import annotations\nfrom {source} import NamedTuple\n{body}", namespace)  # noqa: S102
        made.append(namespace["Row"])
    return made[0], made[1]


_ROW = '''
class Row(NamedTuple):
    """A row."""

    start: int
    end: int = 0
    notes: tuple[str, ...] = ()

    @property
    def width(self) -> int:
        return self.end - self.start

    def moved(self, by: int) -> Row:
        return self._replace(start=self.start + by, end=self.end + by)
'''


def test_a_named_tuple_is_the_one_typing_makes() -> None:
    typed, ours = _both(_ROW)
    assert ours._fields == typed._fields == ("start", "end", "notes")
    assert ours._field_defaults == typed._field_defaults
    assert set(ours.__annotations__) == set(typed.__annotations__)
    assert ours.__annotations__ == {"start": "int", "end": "int", "notes": "tuple[str, ...]"}, "as written, not ForwardRefs"
    assert ours.__doc__ == typed.__doc__ == "A row."
    assert ours.__mro__[1:] == typed.__mro__[1:] == (tuple, object)
    row, same = ours(2, 5), typed(2, 5)
    assert repr(row).replace("Row", "") == repr(same).replace("Row", "") == "(start=2, end=5, notes=())"
    assert row == same == (2, 5, ()) and hash(row) == hash(same) and sorted([ours(3), row]) == [row, ours(3)]
    assert row.width == 3 and row.moved(1) == (3, 6, ()) and type(row.moved(1)) is ours
    assert row._asdict() == same._asdict() and ours._make([1, 2, ("a",)]).notes == ("a",)
    start, end, notes = row
    assert (start, end, notes) == (2, 5, ())
    with pytest.raises(AttributeError):
        row.start = 3  # type: ignore[misc]


def test_a_named_tuple_does_not_compile_its_annotations(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it: typing compiles each string annotation into a ForwardRef when the class is made."""
    import typing

    made: list[object] = []
    real = typing.ForwardRef.__init__

    def counting(self: typing.ForwardRef, *args: object, **kwargs: object) -> None:
        made.append(args[0])
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(typing.ForwardRef, "__init__", counting)
    _both(_ROW)
    assert made == ["int", "int", "tuple[str, ...]"], "typing's made one per field; ours made none"


def test_a_named_tuple_refuses_what_typing_refuses() -> None:
    for body in (
        "class Row(NamedTuple):\n    start: int = 0\n    end: int\n",  # a field without a default after one with
        "class Row(NamedTuple):\n    start: int\n    def _replace(self): ...\n",  # the named tuple's own method
    ):
        for source in ("typing", "placement_lint.records"):
            with pytest.raises((TypeError, AttributeError)):
                exec(f"from __future__ import annotations\nfrom {source} import NamedTuple\n{body}", {})  # noqa: S102


def test_a_named_tuple_of_the_package_pickles() -> None:
    """Results cross processes: a class made by records.NamedTuple must be found by its module and name."""
    from placement_lint.edits import Applicability, Edit, Fix

    fix = Fix(Applicability.SAFE, "set device_map=None", (Edit(3, 9, "None"),))
    assert pickle.loads(pickle.dumps(fix)) == fix and type(pickle.loads(pickle.dumps(fix))) is Fix


def test_a_named_tuple_tells_its_descriptors_their_names() -> None:
    """As a class statement does (and typing's NamedTuple from Python 3.12): `__set_name__` is called."""
    from placement_lint.records import NamedTuple

    told: list[tuple[type, str]] = []

    class Named:
        def __set_name__(self, owner: type, name: str) -> None:
            told.append((owner, name))

    class Row(NamedTuple):
        start: int
        label = Named()

    assert told == [(Row, "label")]
