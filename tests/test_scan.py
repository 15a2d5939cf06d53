"""The pre-check's one pass (placement_lint/scan.py) gives the answers `bytes in` gives, with the
compiled automaton and without it, and knows every token the pre-check asks about."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement_lint.checker import FileChecker
from placement_lint.results import RunOptions
from placement_lint.scan import TOO_COMMON, Present, TokenScanner, _hiding_offsets
from placement_lint.settings import Settings

from helpers import CODES

ROOT = Path(__file__).parent.parent
# Every fixture and example, and a real tree of library code (libcst's own source, installed beside us).
FILES = sorted(
    path
    for folder in (ROOT / "tests" / "fixtures", ROOT / "examples", Path(importlib.util.find_spec("libcst").origin).parent)
    for path in folder.rglob("*")
    if path.suffix in (".py", ".ipynb")
)
COMPILED = TokenScanner([b"x"]).compiled


def _text(min_size: int, max_size: int, alphabet: str) -> st.SearchStrategy[bytes]:
    return st.text(alphabet, min_size=min_size, max_size=max_size).map(str.encode)


_tokens = st.lists(_text(1, 4, "ab("), min_size=1, max_size=8, unique=True)


@settings(max_examples=300, deadline=None)
@given(tokens=_tokens, raw=_text(0, 40, "ab(c"), asked=_text(1, 4, "ab("))
def test_every_answer_is_the_bytes_answer(tokens: list[bytes], raw: bytes, asked: bytes) -> None:
    """Overlapping tokens included: a leftmost-first scan hides `ab` inside a reported `(ab`."""
    for compiled in (True, False):
        scanner = TokenScanner(tokens, compiled=compiled)
        present = Present(raw, scanner.found(raw), scanner)
        for token in [*tokens, asked]:
            assert (token in present) == (token in raw), (compiled, tokens, raw, token)
        assert present == raw and present.find(b"a") == raw.find(b"a")


@settings(max_examples=300, deadline=None)
@given(tokens=_tokens, raw=_text(0, 40, "ab(c"), data=st.data())
@example(tokens=[b"(ab", b"ab"], raw=b"(ab", data=None).via("`ab` hidden in a reported `(ab`")
def test_asking_for_any_of_several_tokens_is_the_bytes_answer(
    tokens: list[bytes], raw: bytes, data: st.DataObject | None
) -> None:
    """Ruled out by one set operation only when no token asked, nor one that could hide it, was reported."""
    asked = [b"ab"] if data is None else data.draw(st.lists(st.sampled_from(tokens), min_size=1, max_size=4, unique=True))
    for compiled in (True, False):
        scanner = TokenScanner(tokens, compiled=compiled)
        for question in (tuple(asked), (*asked, b"c(")):  # the scan's tokens, then one it does not look for
            for _ in range(2):  # worked out, then from what was worked out
                assert scanner.holds_any(raw, scanner.found(raw), question) == any(t in raw for t in question)


def test_which_matches_can_hide_a_token_and_where() -> None:
    assert _hiding_offsets(b"deepspeed.initialize", b"deepspeed") == (0,), "both start at the same position"
    assert _hiding_offsets(b"deepspeed", b"speed") == (4,), "within"
    assert _hiding_offsets(b"fsdp_config", b"config=") == (5,), "starts inside, ends after"
    assert _hiding_offsets(b"from_pretrained", b"deepspeed") == (14,), "on the last byte: from_pretrainedeepspeed"
    assert _hiding_offsets(b"speed", b"xspeed") == (), "a token starting before the match would have been reported first"
    assert _hiding_offsets(b"fsdp", b"device_map") == ()


class _CountedSearch:
    """Stands in for `bytes` in the scan module: counts the searches of a whole file."""

    searches = 0

    @staticmethod
    def __contains__(raw: bytes, token: bytes) -> bool:
        _CountedSearch.searches += 1
        return bytes.__contains__(raw, token)


@pytest.mark.skipif(not COMPILED, reason="ahocorasick-rs is not installed here")
def test_a_hidden_token_is_looked_for_only_where_a_match_could_hide_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("placement_lint.scan.bytes", _CountedSearch, raising=False)
    scanner = TokenScanner([b"from_pretrained", b"deepspeed"])
    hidden = b"x = from_pretrainedeepspeed"  # one d: deepspeed starts on the match's last byte
    assert scanner.found(hidden) == {b"from_pretrained"}
    assert scanner.holds(hidden, scanner.found(hidden), b"deepspeed")
    apart = b"from_pretrained(m)\n" * 3  # reported, but followed by no deepspeed
    assert not scanner.holds(apart, scanner.found(apart), b"deepspeed")
    assert _CountedSearch.searches == 0, "answered at the reported matches, not by searching the file"


@pytest.mark.skipif(not COMPILED, reason="ahocorasick-rs is not installed here")
def test_the_compiled_scan_hides_an_overlapped_token_and_the_answer_stays_exact() -> None:
    scanner = TokenScanner([b"deepspeed.initialize", b"deepspeed"])
    raw = b"deepspeed.initialize(model)"
    found = scanner.found(raw)
    assert found == {b"deepspeed.initialize"}, "leftmost-first reports the first pattern at a position"
    assert b"deepspeed" in Present(raw, found, scanner)


class _Recording(Present):
    asked: set[bytes] = set()

    def __contains__(self, token: object) -> bool:
        _Recording.asked.add(token)  # type: ignore[arg-type]
        return super().__contains__(token)


def _checker(tmp_path: Path, compiled: bool = True) -> FileChecker:
    checker = FileChecker(Settings(root=tmp_path, codes=CODES), RunOptions(), tmp_path)
    checker._scanner = TokenScanner(checker.scanner.tokens, compiled=compiled)
    return checker


def test_the_scan_knows_every_token_the_pre_check_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A token the pre-check asks that the scan does not know costs a pass of its own: list it in the
    rule's `pre_check_tokens` (or the in-file evidence literals)."""
    monkeypatch.setattr("placement_lint.precheck.Present", _Recording)
    checker = _checker(tmp_path)
    checker.options = RunOptions(context="ddp")  # every rule's context check runs too
    for path in FILES:
        checker.worth_parsing(path.read_bytes(), path)
    assert _Recording.asked, "the pre-check asked the scan"
    assert _Recording.asked - set(checker.scanner.tokens) - TOO_COMMON == set()


def test_the_fallback_and_the_compiled_scan_pass_the_same_files(tmp_path: Path) -> None:
    compiled, fallback = _checker(tmp_path), _checker(tmp_path, compiled=False)
    assert not fallback.scanner.compiled
    passed = [path for path in FILES if compiled.worth_parsing(path.read_bytes(), path)]
    assert passed == [path for path in FILES if fallback.worth_parsing(path.read_bytes(), path)]
    assert len(passed) > 50, "the fixtures pass the pre-check"


def test_a_checker_pickles_without_its_automaton(tmp_path: Path) -> None:
    import pickle

    checker = _checker(tmp_path)
    copy = pickle.loads(pickle.dumps(checker))
    assert copy._scanner is None and copy.scanner.tokens == checker.scanner.tokens


_OVERLAPPING = st.text(alphabet="ab.", min_size=1, max_size=6).map(str.encode)  # few letters: many overlaps


@given(_OVERLAPPING, _OVERLAPPING)
def test_the_first_byte_filter_keeps_every_overlap(reported: bytes, token: bytes) -> None:
    """`_hiding_offsets` looks only where the match holds the token's first byte: the same answer as trying every offset."""
    every_offset = tuple(
        offset
        for offset in range(len(reported))
        if reported != token and (reported.startswith(token, offset) or token.startswith(reported[offset:]))
    )
    assert _hiding_offsets(reported, token) == every_offset


_LEXICAL_PIECES = [
    "x = 1\n",
    '"""doc from_pretrained"""\n',
    "'''device_map'''\n",
    "# Trainer(model=m)\n",
    '"device_map"',
    "'model='",
    'f"""{from_pretrained}"""\n',
    'rb"""Trainer"""\n',
    "Rf'''{device_map}'''\n",
    '"a \\" from_pretrained"\n',
    '"""a \\""" device_map"""\n',
    "'#' ",
    '\'"""\' ',
    "\"'''\" ",
    "from_pretrained(",
    "device_map=",
    "model=x\n",
    '"""\nTrainer\n"""',
    "\\\n",
    '""""""',
    "''",
    "u'''x'''",
]


@given(st.lists(st.sampled_from(_LEXICAL_PIECES), max_size=10))
@settings(max_examples=400, deadline=None)
def test_code_is_told_from_comments_and_docstrings_as_tokenize_tells_it(pieces: list[str]) -> None:
    """`in_code` against `tokenize`: a token counts when some occurrence is outside every comment and
    every triple-quoted string that is not an f-string."""
    import io
    import tokenize

    from placement_lint.scan import in_code

    raw = "".join(pieces).encode()
    try:
        tokens = list(tokenize.tokenize(io.BytesIO(raw).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return  # not Python: the tool parses it and names the problem
    starts = [0]
    for line in raw.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(row: int, column: int) -> int:  # ASCII pieces: columns are bytes
        return starts[row - 1] + column if row - 1 < len(starts) else len(raw)

    prose = []
    for token in tokens:
        body = token.string.lstrip("rRbBuUfF")
        prefix = token.string[: len(token.string) - len(body)]
        triple = token.type == tokenize.STRING and body[:3] in ('"""', "'''") and "f" not in prefix.lower()
        if token.type == tokenize.COMMENT or triple:
            prose.append((offset(*token.start), offset(*token.end)))
    for word in (b"from_pretrained", b"device_map", b"Trainer", b"model="):
        places = [at for at in range(len(raw)) if raw.startswith(word, at)]
        expected = any(not any(start <= at < end for start, end in prose) for at in places)
        assert in_code(raw, [word]) is expected, (raw, word)
