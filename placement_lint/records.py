"""Records that compare like dataclasses, without the dataclass machinery; and named tuples made
without compiling their annotations.

Making a dataclass's class runs its generated methods through `exec` (0.7 ms each for a frozen one),
and importing `dataclasses` costs a run another 0.6 ms: every checking run paid both for a handful of
records. A `Record` subclass names its fields in `__slots__`; it is equal to another of its class with
equal compared fields, hashed by them, and shown as a dataclass is.
"""

from __future__ import annotations

from collections import namedtuple
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar


class Record:
    __slots__ = ()
    # The fields equality, hashing and repr look at: all of `__slots__` unless a subclass says fewer
    # (a device map's weak proxy to its analysis is no part of what it says).
    compared: ClassVar[tuple[str, ...]] = ()
    _values: ClassVar[Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = cls.__dict__.get("compared") or cls.__dict__.get("__slots__", ())
        cls.compared = tuple(names)
        getter = attrgetter(*names)  # one C call for all of them
        cls._values = staticmethod(getter if len(names) > 1 else lambda record: (getter(record),))

    def __eq__(self, other: object) -> bool:
        return other.__class__ is self.__class__ and self._values(self) == self._values(other)

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self.compared, self._values(self), strict=True))
        return f"{type(self).__name__}({shown})"


# typing.NamedTuple checks each field's annotation, and in a module with `from __future__ import
# annotations` every annotation is a string it compiles into a ForwardRef: 75-120 us a class, where
# the named tuple itself costs 30-45 us. A run imported thirty of them with 134 fields (5 ms).
# This one builds the same class (collections.namedtuple, the class body's methods, properties and
# docstring, the annotations as written), and does not look at the annotations. Type checkers see
# typing's.
_FIXED = frozenset(
    {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults", "_make", "_replace", "_asdict"}
)
_MADE_BY_NAMEDTUPLE = frozenset({"__module__", "__annotations__"})


class _NamedTupleMeta(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        if bases != (NamedTuple,):
            raise TypeError("a NamedTuple derives from NamedTuple alone")
        annotations = namespace.get("__annotations__", {})
        fields = tuple(annotations)
        with_default = [field for field in fields if field in namespace]
        if with_default != list(fields[len(fields) - len(with_default) :]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        made = namedtuple(name, fields, defaults=[namespace[field] for field in with_default], module=namespace["__module__"])
        made.__annotations__ = made.__new__.__annotations__ = dict(annotations)
        for key, value in namespace.items():
            if key in _FIXED:
                raise AttributeError(f"{name}: cannot overwrite the named tuple's {key}")
            if key not in _MADE_BY_NAMEDTUPLE and key not in fields:
                setattr(made, key, value)
                if hasattr(type(value), "__set_name__"):  # as a class statement (and typing, from 3.12) does
                    value.__set_name__(made, key)
        return made


if TYPE_CHECKING:
    from typing import NamedTuple
else:
    NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {"__module__": __name__})
