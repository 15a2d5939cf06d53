"""The value flow's state at one point of a scope: what each name, attribute chain and dict key may hold.

The flow (analysis/dataflow.py) keeps the state before every statement of a scope, so that every
question about the scope is answered without walking it again. Copying a dict of every live key at
each statement would make that quadratic in the scope's length (a 2,000-line `main()` binds hundreds
of names), so the state is persistent: a hash array mapped trie (`immutables.Map`) that shares every
entry a statement does not change with the state before it. A change costs O(log n), keeping a state
costs nothing.

Keys are the dataflow's: `name`, `a.b`, and `base[key]` for a dict entry (with the markers
`base[[?]]`, the keys of a display are known, and `base[[*]]`, entries under computed keys). The
entries of one dict are also listed under their base, in the order a dict would keep them, because
rebinding `base` drops them and a spread or a `.update(base)` copies them: both would otherwise scan
every key.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from typing import Any

from immutables import Map

Bindings = list  # list[dataflow.Binding | Carried]: shared between states, never changed once stored


class Carried:
    """Bindings from before an `if`, carried unchanged through a branch of it: read as each binding
    of `bindings` (a stored list, shared) with `guards` added to the end of its path.

    A join marks every binding that reaches it along one branch only with that branch's condition
    (dataflow.Binding.path). Marking each binding anew made a join cost as much as everything that
    reaches it: a name bound under each of a long function's ifs holds one binding per if, so the
    function cost the square of its length. A Carried marks them all at once; the bindings are
    marked when a question reads them (dataflow.Resolver.bindings)."""

    __slots__ = ("bindings", "guards")

    def __init__(self, bindings: Bindings, guards: tuple[Any, ...]) -> None:
        self.bindings = bindings
        self.guards = guards


_JOINED_WHOLE = 4  # a list longer than this joins as one item; shorter ones show their Carried to be folded


def first_binding(bindings: Bindings) -> Any:
    """The first binding a stored list reads as."""
    while type(bindings[0]) is Carried:
        bindings = bindings[0].bindings
    return bindings[0]


def base_of(key: str) -> str:
    """`kw[device_map]` -> `kw`; the dict a key belongs to."""
    return key.split("[", 1)[0]


class _Readable:
    """What a state answers, kept or being changed: `values` and `entries` are maps (or their mutations)."""

    __slots__ = ("values", "entries")

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __getitem__(self, key: str) -> Bindings:
        return self.values[key]

    def keys_under(self, base: str) -> tuple[str, ...]:
        """The keys of the dict bound to `base` (`base[...]`), in the order they were stored."""
        return self.entries.get(base, ())


class FlowState(_Readable):
    """An immutable state: key -> the bindings that may reach, and dict base -> its entries' keys."""

    __slots__ = ()

    def __init__(self, values: Map, entries: Map) -> None:
        self.values = values
        self.entries = entries

    def edit(self) -> Scratch:
        return Scratch(self)


EMPTY = FlowState(Map(), Map())


class Scratch(_Readable):
    """A state being changed by one statement: reads see the changes made so far, and the keys it
    changed are kept (`written`), which is all a merge of two branches has to look at."""

    __slots__ = ("written",)

    def __init__(self, base: FlowState) -> None:
        self.values = base.values.mutate()
        self.entries = base.entries.mutate()
        self.written: set[str] = set()

    def __setitem__(self, key: str, bindings: Bindings) -> None:
        self.values[key] = bindings
        self.written.add(key)
        if "[" in key:
            base = base_of(key)
            known = self.entries.get(base, ())
            if key not in known:
                self.entries[base] = (*known, key)

    def __delitem__(self, key: str) -> None:
        del self.values[key]
        self.written.add(key)
        if "[" in key:
            base = base_of(key)
            left = tuple(k for k in self.entries.get(base, ()) if k != key)
            if left:
                self.entries[base] = left
            else:
                del self.entries[base]

    def drop_entries(self, base: str) -> None:
        """Forget every entry of the dict bound to `base`: `base` is bound to something new."""
        known = self.entries.get(base)
        if not known:
            return
        for key in known:
            del self.values[key]
        self.written.update(known)
        del self.entries[base]

    def freeze(self) -> FlowState:
        return FlowState(self.values.finish(), self.entries.finish())


def merge(
    states: list[FlowState], written: Iterable[str], absent: Any, binding: Any, known_absent: Any, base: int = 0
) -> FlowState:
    """The state where the paths that ended in `states` join: each key holds what it holds on any
    path. `written` holds every key that differs between the states (the keys their paths changed
    since they parted); the others are taken from `states[base]`, so only those are looked at.

    A dict entry that one path's display lacks is absent on that path, not unknown: it gets an
    `absent` binding at that display (`binding(absent, statement, guards)`, with `known_absent(state,
    base)` telling which paths know their dict's keys)."""
    if len(states) == 1 or not written:
        return states[base]
    scratch = states[base].edit()
    for key in written:
        found = [bindings for state in states if (bindings := state.values.get(key)) is not None]
        if len(found) == 1 and len(found[0]) == 1 and _unmarked(key, states):
            # One path holds the key, with one binding: nothing to fold, no path to mark absent (down
            # an elif chain with fresh names in each branch, almost every key written below a branch).
            if scratch.values.get(key) is not found[0]:
                scratch.values[key] = found[0]
            continue
        present = bool(found)
        # In order of first appearance, each once. A path's long list joins as one Carried, read in
        # its place: down an elif chain each link joins what all the links below hand on, and
        # copying that made a chain cost the square of its length.
        merged = dict.fromkeys(
            chain.from_iterable((Carried(bindings, ()),) if len(bindings) > _JOINED_WHOLE else bindings for bindings in found)
        )
        if "[" in key and not key.endswith(("[[?]]", "[[*]]")):
            base = base_of(key)
            for state in states:
                if key not in state.values and known_absent(state, base) and state.values.get(base):
                    first = first_binding(state.values[base])
                    marker = binding(absent, first.statement, first.guards)
                    if present:
                        merged.setdefault(marker)
        if present:
            scratch.values[key] = list(merged)
        elif key in scratch.values:
            del scratch.values[key]
    for base in {base_of(key) for key in written if "[" in key}:
        held = [keys for state in states if (keys := state.entries.get(base))]
        if len(held) == 1:  # one path's dict: its order stands
            if scratch.entries.get(base) is not held[0]:
                scratch.entries[base] = held[0]
            continue
        order: list[str] = []
        seen: set[str] = set()
        for state in states:
            for key in state.entries.get(base, ()):
                if key not in seen:
                    seen.add(key)
                    order.append(key)
        if order:
            scratch.entries[base] = tuple(order)
        elif base in scratch.entries:
            del scratch.entries[base]
    return scratch.freeze()


def _unmarked(key: str, states: list[FlowState]) -> bool:
    """No path that lacks the key gets an absent marker for it: it is no dict entry, or no path lacking
    it has its dict bound at all (what merge() checks first, before the display's keys)."""
    if "[" not in key or key.endswith(("[[?]]", "[[*]]")):
        return True
    base = base_of(key)
    return not any(key not in state.values and state.values.get(base) for state in states)
