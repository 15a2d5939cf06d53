"""Read and decode: turn a file's bytes into text without losing anything needed to write it back.

Analysis runs on text; fixes are written back as bytes. To keep every byte that a fix does not
touch, we remember the BOM and the encoding and refuse to fix a file whose text would not encode
back to exactly the bytes we read.
"""

from __future__ import annotations

import ast
import io
import tokenize
import warnings
from bisect import bisect_right
from itertools import accumulate
from pathlib import Path

from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple

UTF8_BOM = b"\xef\xbb\xbf"
_NEWLINE = LazyPattern(r"\r\n|\r|\n")


class FileRegion(NamedTuple):
    """Where something is among its file's own lines (1-based rows, columns in characters), for a
    report that points a viewer at the file: a CI annotation, a SARIF region."""

    row: int
    column: int
    end_row: int
    end_column: int


# Where ruff annotates a notebook's findings: its rows are in cells, its file's lines are JSON.
TOP_OF_FILE = FileRegion(1, 1, 1, 1)


class SourceError(Exception):
    """A file that cannot be read, decoded or parsed. The message is shown to the user."""


class ParseError(SourceError):
    """Text that decodes but does not parse as Python; `row`: the line CPython names, if any."""

    def __init__(self, message: str, row: int | None = None) -> None:
        super().__init__(message)
        self.row = row


class SourceFile:
    """A file decoded: its bytes, its text and where its lines start (a plain class: creating a
    dataclass costs every run about 1 ms). Not changed once made: `with_text` makes another."""

    __slots__ = ("path", "raw", "text", "encoding", "bom", "line_starts")

    def __init__(self, path: Path, raw: bytes, text: str, encoding: str, bom: bool, line_starts: tuple[int, ...]) -> None:
        self.path = path
        self.raw = raw
        self.text = text
        self.encoding = encoding
        self.bom = bom
        self.line_starts = line_starts

    def with_text(self, text: str) -> SourceFile:
        """The same file holding `text` instead (a fix's result, before it is written)."""
        import copy  # only a fix gets here: the import (and its probe for Jython) cost every run 0.5 ms

        changed = copy.copy(self)  # a notebook keeps its cells
        changed.text, changed.raw, changed.line_starts = text, self.encode(text), line_starts_of(text)
        return changed

    @property
    def file_bytes(self) -> bytes:
        """What the file holds (for a notebook, its JSON, where `raw` is its Python)."""
        return self.raw

    @property
    def file_text(self) -> str:
        return self.text

    @property
    def round_trips(self) -> bool:
        """True when the text encodes back to the original bytes, so a fix can be written safely."""
        return self.encode(self.text) == self.raw

    @property
    def newline(self) -> str:
        match = _NEWLINE.search(self.text)
        return match.group() if match else "\n"

    def encode(self, text: str) -> bytes:
        return (UTF8_BOM if self.bom else b"") + text.encode(self.encoding)

    def offset(self, line: int, utf8_col: int) -> int:
        """Character offset of an `ast` position (1-based line, column in UTF-8 bytes)."""
        start = self.line_starts[line - 1]
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        line_text = self.text[start:end]
        if line_text.isascii():
            return start + utf8_col
        return start + len(line_text.encode("utf-8")[:utf8_col].decode("utf-8", "ignore"))

    def node_span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def position(self, offset: int) -> tuple[int, int]:
        """1-based row and 1-based column (in characters) of a character offset, as ruff reports them."""
        row = max(bisect_right(self.line_starts, offset), 1)
        return row, offset - self.line_starts[row - 1] + 1

    def line(self, row: int) -> str:
        start = self.line_starts[row - 1]
        end = self.line_starts[row] if row < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    # Where a position is shown to the user; a notebook (notebook.py) shows its cell and the line in it.
    def location(self, offset: int) -> tuple[int | None, int, int]:
        """(cell, row, column) of a character offset; the cell is None outside notebooks."""
        row, column = self.position(offset)
        return None, row, column

    def describe_row(self, row: int) -> str:
        return f"line {row}"

    def frame_source(self, cell: int | None) -> SourceFile:
        """The text a code frame quotes, whose rows are the reported ones."""
        return self


NOTEBOOK_SUFFIX = ".ipynb"
# Outputs (plots, tables) make notebooks far bigger than their code; the code is what is parsed.
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024


def is_notebook(path: Path | str) -> bool:
    return str(path).endswith(NOTEBOOK_SUFFIX)


def read_bytes(name: str | Path) -> bytes:
    """A file's bytes as the pre-check reads thousands of them: by its name as text, unbuffered (one
    read sized by its fstat, no buffer object made for it; transformers' 2,860 files: 99-106 to 92 ms
    of CPU)."""
    with open(name, "rb", buffering=0) as handle:
        return handle.read()


DIGEST_BYTES = 16


def content_hash(data: bytes) -> str:
    """The digest the caches compare: of a file's bytes, of its import lines, of what the launches say of it."""
    return content_digest(data).hex()


def content_digest(data: bytes) -> bytes:
    """content_hash as bytes."""
    import hashlib  # loads OpenSSL (3% of a warm run): only a run with something to hash pays for it

    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest()


def split_lines(text: str) -> list[str]:
    """The lines with their endings, broken where Python breaks them (`\\r\\n`, `\\r`, `\\n`), not
    at the form feeds and Unicode separators `str.splitlines` also breaks at."""
    starts = line_starts_of(text)
    return [text[start:end] for start, end in zip(starts, (*starts[1:], len(text)), strict=True) if start < end]


def line_starts_of(text: str) -> tuple[int, ...]:
    # Python ends a line at \n, \r\n or a lone \r; ast line numbers count the same way.
    if "\r" in text:
        return (0, *(m.end() for m in _NEWLINE.finditer(text)))
    # Without a CR, the line lengths add up in C: 2.4x faster than the pattern on a big file.
    return tuple(accumulate(map((1).__add__, map(len, text.split("\n"))), initial=0))[:-1]


def decode_source(path: Path, raw: bytes) -> SourceFile:
    try:
        # The cookie sits on line 1 or 2; lines may end in a lone CR, which readline would not split.
        first_lines = raw[:4096].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        encoding, _ = tokenize.detect_encoding(io.BytesIO(first_lines).readline)
    except SyntaxError as exc:
        reason = "not valid UTF-8 and no encoding declaration" if "missing encoding" in str(exc.msg) else exc.msg
        raise SourceError(f"cannot decode: {reason}") from None
    bom = raw.startswith(UTF8_BOM)
    body = raw[len(UTF8_BOM) :] if bom else raw
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    try:
        text = body.decode(codec)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"cannot decode as {codec}: {exc}") from None
    return SourceFile(path, raw, text, codec, bom, line_starts_of(text))


def parse_python(source: SourceFile) -> ast.Module:
    try:
        with warnings.catch_warnings():
            # CPython warns about the checked code (invalid escapes, `is` with a literal): not ours to print.
            warnings.simplefilter("ignore")
            return ast.parse(source.text, filename=str(source.path))
    except SyntaxError as exc:
        from placement_lint.newer_syntax import newer_syntax_hint  # only a file that does not parse

        where = f"{source.describe_row(exc.lineno)}: " if exc.lineno else ""
        raise ParseError(f"cannot parse: {where}{exc.msg}{newer_syntax_hint(source.text)}", exc.lineno) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ParseError(f"cannot parse: {exc}") from None


QUOTED_FILE_LIMIT = 2 * 1024 * 1024
# The files findings quote, by path, with the (mtime, size) they were read at: a thousand scripts
# launched by one shell script read it once per process, and a changed file is read again.
_QUOTED: dict[Path, tuple[tuple[int, int], list[str] | None]] = {}


def displayed_path(display: str, cwd: Path) -> Path:
    """The file a finding names as `display`: absolute, or relative to the folder the run started in."""
    path = Path(display)
    return path if path.is_absolute() else cwd / path


def quoted_lines(path: Path) -> list[str] | None:
    """The lines of a file a finding's path passes through (a launch script, a config, an importer),
    for a note or a code frame; None when it cannot be quoted: gone, unreadable, binary (a NUL byte),
    larger than 2 MiB. Never raises: a line that cannot be shown becomes a `path:line` note.
    The list is shared between callers: read it, never change it."""
    try:
        status = path.stat()
    except (OSError, ValueError):
        return None
    key = (status.st_mtime_ns, status.st_size)
    known = _QUOTED.get(path)
    if known is not None and known[0] == key:
        return known[1]
    lines = _read_quoted(path, status.st_size)
    if len(_QUOTED) >= 256:
        _QUOTED.clear()
    _QUOTED[path] = (key, lines)
    return lines


def _read_quoted(path: Path, size: int) -> list[str] | None:
    if size > QUOTED_FILE_LIMIT:
        return None
    try:
        raw = path.read_bytes()
    except (OSError, ValueError):
        return None
    if b"\0" in raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    return [line.rstrip("\r\n") for line in split_lines(text.removeprefix("\ufeff"))]
