"""Records that compare like dataclasses, without the dataclass machinery.

Making a dataclass's class runs its generated methods through `exec` (0.7 ms each for a frozen one),
and importing `dataclasses` costs a run another 0.6 ms: every checking run paid both for a handful of
records. A `Record` subclass names its fields in `__slots__`; it is equal to another of its class with
equal compared fields, hashed by them, and shown as a dataclass is.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, ClassVar


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
