"""The text pre-check's single pass: which of a fixed set of byte strings a file holds.

The pre-check asks a file's bytes about some forty strings (loader names, rule triggers, the literals
of in-file evidence). Asked one by one with `bytes in`, that is forty passes over every file; a
compiled Aho-Corasick automaton (ahocorasick-rs, leftmost-first) answers them all in one pass. Without
the wheel, every question is a `bytes in` search again: the same answers, only slower.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

try:  # a compiled wheel for Linux, macOS and Windows; optional, so a platform without one still works
    import ahocorasick_rs as _ahocorasick
except ImportError:  # pragma: no cover - exercised by the fallback test, which hides the module
    _ahocorasick = None


# Words that fill every Python file: the automaton would report each of their thousands of occurrences
# (46,000 `return`s in transformers) to answer a question asked of a handful of files. Those few ask
# the bytes instead.
TOO_COMMON = frozenset({b"return", b".to("})


def _hiding_offsets(reported: bytes, token: bytes) -> tuple[int, ...]:
    """Where in a reported match of `reported` an occurrence of `token` may start unreported. A
    leftmost-first scan reports, at each position, the first pattern that matches there and then
    resumes after it; an occurrence it does not report starts inside a reported match (one starting
    after it would have been reported at its own start instead). So `token` starts at some offset of
    `reported`: it lies within, or it begins with the rest of it."""
    if reported == token or not token:
        return ()
    # Only where `reported` holds the token's first byte (a pre-check asks some thirty tokens about
    # forty others: looking at every offset of each made ten thousand `startswith` calls a run).
    first = token[:1]
    offsets = []
    offset = reported.find(first)
    while offset >= 0:
        if reported.startswith(token, offset) or token.startswith(reported[offset:]):
            offsets.append(offset)
        offset = reported.find(first, offset + 1)
    return tuple(offsets)


class Found(frozenset):  # type: ignore[type-arg]
    """The tokens a scan reported in a file, with the matches it reported (pattern, start, end)."""

    matches: list[tuple[int, int, int]]


class TokenScanner:
    """Built once per run from every string the pre-check may ask about."""

    def __init__(self, tokens: Iterable[bytes], compiled: bool = True) -> None:
        self.tokens = tuple(dict.fromkeys(token for token in tokens if token and token not in TOO_COMMON))
        self._automaton = None
        if compiled and _ahocorasick is not None and self.tokens:
            self._automaton = _ahocorasick.BytesAhoCorasick(list(self.tokens), matchkind=_ahocorasick.MatchKind.LeftmostFirst)
        # A leftmost-first scan reports matches that do not overlap: a token it did not report can still
        # be in the file where it overlaps a reported one. Only there is the file asked again.
        # Worked out for a token when first asked: a run over a few files asks about a few tokens.
        self._hidden_by: dict[bytes, dict[bytes, tuple[int, ...]]] = {}
        self._scanned = frozenset(self.tokens)
        self._ruled_out_by: dict[tuple[bytes, ...], frozenset[bytes]] = {}
        # Per token of the scan asked about (`_witnesses`): read by `Present` inline.
        self.witnesses: dict[bytes, frozenset[bytes]] = {}

    @property
    def compiled(self) -> bool:
        return self._automaton is not None

    def found(self, raw: bytes) -> Found | None:
        """The scan's tokens in `raw` (None without the compiled automaton: nothing is known yet)."""
        if self._automaton is None:
            return None
        tokens = self.tokens
        matches = self._automaton.find_matches_as_indexes(raw)
        found = Found(tokens[index] for index, _, _ in matches)
        found.matches = matches
        return found

    def holds_any(self, raw: bytes, found: Found | None, tokens: tuple[bytes, ...]) -> bool:
        """`any(token in raw for token in tokens)`: for most files one set operation, as none of the
        tokens, nor any that could hide one, was reported (2,000 of transformers' 2,860 files)."""
        if found is not None:
            ruled_out = self._ruled_out_by.get(tokens)
            if ruled_out is None:
                ruled_out = self._ruled_out_by[tokens] = self._ruling_out(tokens)
            if ruled_out and ruled_out.isdisjoint(found):
                return False
        return any(self.holds(raw, found, token) for token in tokens)

    def _ruling_out(self, tokens: tuple[bytes, ...]) -> frozenset[bytes]:
        """The scan's tokens whose absence from a file rules out all of `tokens` (empty when the scan
        cannot rule out some token: one it does not look for)."""
        if not all(token in self._scanned for token in tokens):
            return frozenset()
        return frozenset().union(*(self._witnesses(token) for token in tokens))

    def _witnesses(self, token: bytes) -> frozenset[bytes]:
        """The scan's tokens one of which a file's scan must report for the file to hold `token`
        (itself, or one whose match may hide it): most questions end when none was reported."""
        witnesses = self.witnesses.get(token)
        if witnesses is None:
            witnesses = self.witnesses[token] = frozenset({token, *self._hiders(token)})
        return witnesses

    def _hiders(self, token: bytes) -> dict[bytes, tuple[int, ...]]:
        """The tokens whose reported matches may hide an occurrence of `token`, with the offsets in
        them where it would start."""
        hidden_by = self._hidden_by.get(token)
        if hidden_by is None:
            hidden_by = self._hidden_by[token] = {
                other: offsets for other in self.tokens if (offsets := _hiding_offsets(other, token))
            }
        return hidden_by

    def holds(self, raw: bytes, found: Found | None, token: bytes) -> bool:
        """`token in raw`, from `found` (what `self.found(raw)` gave) where that settles it."""
        if found is None:
            return bytes.__contains__(raw, token)  # the bytes' own search, for a Present too
        if token in found:
            return True
        if token not in self._scanned:  # not a token of the scan: ask the bytes
            return bytes.__contains__(raw, token)
        if self._witnesses(token).isdisjoint(found):
            return False
        hidden_by = self._hiders(token)
        # Asked only where a match that may hide it was reported: "from_pretrained" may hide "deepspeed"
        # ("from_pretrainedeepspeed"), and searching every such file for it again cost 40 ms of
        # transformers' pre-check.
        if any(token in reported for reported in hidden_by if reported in found):
            return True  # it lies within a reported match
        tokens = self.tokens
        for index, start, _ in found.matches:
            for offset in hidden_by.get(tokens[index], ()):
                if raw.startswith(token, start + offset):
                    return True
        return False


class Present(bytes):
    """A file's bytes whose `token in present` is answered from the scan where it can be: the rules'
    token checks and the in-file evidence read it as the bytes they always read (regexes included)."""

    def __new__(cls, raw: bytes, found: Found | None, scanner: TokenScanner) -> Present:
        present = super().__new__(cls, raw)
        present._found = found
        present._scanner = scanner
        return present

    def __contains__(self, token: object) -> bool:
        if not isinstance(token, bytes):
            return super().__contains__(token)  # type: ignore[operator]
        found = self._found
        if found is not None:
            # The common answers, without a call: the pre-check asks 33,000 questions of transformers.
            if token in found:
                return True
            witnesses = self._scanner.witnesses.get(token)
            if witnesses is not None and witnesses.isdisjoint(found):
                return False
        return self._scanner.holds(self, found, token)


# One lexical piece of Python source after another: code without a quote or `#`, a comment, a
# triple-quoted string, a one-line string, or a lone character (a quote that never closes). Its
# pieces agree with `tokenize`'s comments and strings (checked on 3,656 files of six repositories).
_PIECE = re.compile(
    rb"""[^#"']+|#[^\r\n]*|\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''"""
    rb"""|"(?:[^"\\\r\n]|\\.)*"|'(?:[^'\\\r\n]|\\.)*'|.""",
    re.DOTALL,
)


def in_code(raw: bytes, tokens: Iterable[bytes]) -> bool:
    """Does one of `tokens` occur in `raw` outside comments and triple-quoted strings (docstrings,
    the examples a library keeps in its string constants)? A one-line string counts as code
    (`kwargs["device_map"]`), and so does a triple-quoted f-string, whose braces hold code. Read up to
    the first occurrence in code only."""
    positions = sorted(at for token in tokens for at in _occurrences(raw, token))
    if not positions:
        return False
    pending = iter(positions)
    at = next(pending)
    for piece in _PIECE.finditer(raw):
        start, end = piece.span()
        while at < end:
            if not _prose(raw, start, end):
                return True
            at = next(pending, None)  # type: ignore[arg-type]
            if at is None:
                return False
    return True  # not reached: the pieces cover every byte


def _prose(raw: bytes, start: int, end: int) -> bool:
    """Is the piece at `start:end` a comment or a triple-quoted string that is not an f-string?"""
    head = raw[start : start + 3]
    if head[:1] == b"#":
        return True
    if head not in (b'"""', b"'''") or end - start < 6:
        return False
    return b"f" not in raw[max(0, start - 2) : start].lower()  # `f"""`, `rf"""`, `Fr"""`: code in braces


def _occurrences(raw: bytes, token: bytes) -> Iterable[int]:
    at = raw.find(token)
    while at >= 0:
        yield at
        at = raw.find(token, at + 1)
