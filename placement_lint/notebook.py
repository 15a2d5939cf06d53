"""Read Jupyter notebooks: the code cells as one Python text, with a map back to each cell and line.

The JSON is read with `json` and nothing in it is run. IPython syntax is not Python (`%pip install
x`, `!torchrun ...`, `files = !ls`, `model?`, a `%%bash` cell), so each such line is masked with a
placeholder that parses at the same indentation and keeps the line's break: every other line keeps
its row and its columns, and the fix writer can prove that no edit touched a masked line.

Cells are numbered as Jupyter and ruff number them: 1-based among all cells, markdown included.
"""

from __future__ import annotations

import ast
import bisect
import json
from pathlib import Path

from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.source import UTF8_BOM, ParseError, SourceError, SourceFile, is_notebook, line_starts_of, parse_python

PLACEHOLDER = "pass"
SHELL_VALUE = "__ipython_shell__"  # what `x = !ls` binds: a name nothing defines, so never resolved
# Cell magics whose body is Python (ruff keeps the same ones); any other cell magic masks its cell.
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})
SHELL_CELL_MAGICS = frozenset({"bash", "sh", "script"})
_BREAK = LazyPattern(r"(\r\n|\r|\n)")
_ASSIGN_ESCAPE = LazyPattern(r"^([ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*)([!%])")
_SHELL_MAGIC = LazyPattern(r"^%(?:sx|system)\b\s*")
_CD_MAGIC = LazyPattern(r"^%?cd\b(?:\s+-[qb])*\s*")  # `%cd data`, or `cd data` with automagic
# Line magics and shell aliases IPython runs without their `%` (automagic): `cd data`, `pip install x`,
# `load_ext autoreload`. Such a line is masked only when it is not Python (`ls -la` and `cd /x` parse).
_AUTOMAGIC = LazyPattern(
    r"^(?:cd|ls|ll|pwd|pip|conda|mamba|micromamba|uv|run|time|timeit|prun|load_ext|reload_ext|unload_ext|autoreload"
    r"|aimport|matplotlib|pylab|env|set_env|mkdir|rmdir|rm|cp|mv|cat|less|more|man|clear|alias|unalias|who|whos|reset"
    r"|history|pushd|popd|dirs|dhist|bookmark|pdb|debug|xmode|precision|config|tensorboard|store|sx|system|load|pycat"
    r"|psearch|rerun|recall|macro|save|edit|notebook|colors|automagic|autocall|magic|lsmagic|rehashx|killbgscripts"
    r"|doctest_mode|page|pinfo|pinfo2|pdef|pdoc|psource|pfile|logstart|logstop|logon|logoff|tb|sc|wandb)[ \t]+\S"
)


class Masked(NamedTuple):
    row: int  # 0-based line of its cell
    original: str  # the line as written, without its line break
    placeholder: str
    pinned: bool = False  # a cell magic's first line: nothing may be inserted before it


class CodeCell(NamedTuple):
    number: int  # 1-based among all cells
    source: str  # as stored (a list of lines joined)
    python: str  # masked, ending in a line break (a synthetic "\n" when the source has none)
    synthetic_newline: bool
    masked: tuple[Masked, ...]
    start: int  # character offset of the cell in the joined text
    first_row: int  # 1-based row of its first line in the joined text
    magic: str | None  # the cell magic (`%%bash` -> "bash"), if any

    @property
    def rows(self) -> int:
        return len(line_starts_of(self.python)) - 1


class ShellCommand(NamedTuple):
    cell: int  # cell number
    row: int  # 1-based line in the cell
    text: str
    kind: str  # "escape" (`!cmd`, `%sx cmd`), "script" (a %%bash cell's body), "cd" (`%cd path`)


class Notebook(NamedTuple):
    raw: bytes
    text: str  # the JSON text, decoded, without a BOM
    bom: bool
    data: dict  # type: ignore[type-arg]
    cells: tuple[CodeCell, ...]  # the code cells of a Python notebook, in order
    python: str  # the code cells, masked and joined

    def cell_at(self, row: int) -> CodeCell:
        """The code cell holding a row (1-based) of the joined text."""
        index = bisect.bisect_right([cell.first_row for cell in self.cells], row) - 1
        return self.cells[max(0, index)]

    def shell_commands(self) -> list[ShellCommand]:
        """What the notebook runs in a shell, in order: launch commands may hide there."""
        found: list[ShellCommand] = []
        for cell in self.cells:
            if cell.magic is not None:
                name, _, arguments = cell.magic.partition(" ")
                if name in SHELL_CELL_MAGICS and (name != "script" or arguments.split()[:1] in (["bash"], ["sh"])):
                    first = cell.masked[0].row  # the magic's own line
                    body = "\n".join(_BREAK.split(cell.source)[0::2][first + 1 :])
                    found.append(ShellCommand(cell.number, first + 2, body, "script"))
                continue
            masked = list(cell.masked)
            i = 0
            while i < len(masked):
                line = masked[i]
                code = line.original.strip()
                assigned = _ASSIGN_ESCAPE.match(line.original)
                if assigned:
                    code = line.original[assigned.end(1) :].strip()
                lines = [code]
                while lines[-1].endswith("\\") and i + 1 < len(masked) and masked[i + 1].row == masked[i].row + 1:
                    i += 1
                    lines.append(masked[i].original)
                text = "\n".join(lines)
                if text.startswith("!"):
                    found.append(ShellCommand(cell.number, line.row + 1, text.lstrip("!"), "escape"))
                elif _SHELL_MAGIC.match(text):
                    found.append(ShellCommand(cell.number, line.row + 1, _SHELL_MAGIC.sub("", text, count=1), "escape"))
                elif _CD_MAGIC.match(text):
                    found.append(ShellCommand(cell.number, line.row + 1, _CD_MAGIC.sub("", text, count=1).strip("\"'"), "cd"))
                i += 1
        return found

    def markdown_cells(self) -> list[tuple[int, str]]:
        """Each markdown cell's number and text, in order: documentation, whose fenced shell blocks
        are read as a Markdown doc's (a launch command a reader runs in a terminal, not the kernel)."""
        found: list[tuple[int, str]] = []
        for index, cell in enumerate(self.data["cells"]):
            if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
                source = cell.get("source", "")
                if isinstance(source, list):
                    source = "".join(line for line in source if isinstance(line, str))
                if isinstance(source, str):
                    found.append((index + 1, source))
        return found


# The notebooks this process has decoded, by their bytes: the launch context reads a notebook's shell
# cells, the pre-check and the check its code cells, a fix reads its result back, and all of them
# share one JSON decode. Kept within a budget, as outputs can make notebooks large.
_DECODED: dict[bytes, Notebook] = {}
_decoded_bytes = 0  # the bytes of _DECODED's keys, kept as it grows: not summed again on every decode
DECODED_BUDGET_BYTES = 16 * 1024 * 1024


def read_notebook(raw: bytes) -> Notebook:
    """Parse a notebook's JSON; a file that is not a notebook raises SourceError with the reason."""
    known = _DECODED.get(raw)
    if known is not None:
        return known
    global _decoded_bytes
    notebook = _decode(raw)
    if _decoded_bytes + len(raw) > DECODED_BUDGET_BYTES:
        _DECODED.clear()
        _decoded_bytes = 0
    if len(raw) <= DECODED_BUDGET_BYTES:
        _DECODED[raw] = notebook
        _decoded_bytes += len(raw)
    return notebook


def _decode(raw: bytes) -> Notebook:
    bom = raw.startswith(UTF8_BOM)
    try:
        text = raw[len(UTF8_BOM) :].decode("utf-8") if bom else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"cannot decode notebook: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"cannot read notebook: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise SourceError("cannot read notebook: the JSON nests too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SourceError('cannot read notebook: no "cells" list at the top level')
    cells: list[CodeCell] = []
    parts: list[str] = []
    offset, row = 0, 1
    python_notebook = _is_python(data.get("metadata"))
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            raise SourceError(f"cannot read notebook: cell {index + 1} is not an object")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        elif not isinstance(source, str):
            raise SourceError(f'cannot read notebook: cell {index + 1}: "source" is neither a string nor a list of strings')
        if cell.get("cell_type") != "code" or not python_notebook:
            continue
        masked_text, masked, magic = mask(source)
        synthetic = not masked_text.endswith("\n")
        python = masked_text + ("\n" if synthetic else "")
        code_cell = CodeCell(index + 1, source, python, synthetic, masked, offset, row, magic)
        cells.append(code_cell)
        parts.append(python)
        offset += len(python)
        row += code_cell.rows
    return Notebook(raw, text, bom, data, tuple(cells), "".join(parts))


def _is_python(metadata: object) -> bool:
    """As ruff: a notebook whose language_info names another language (R, Julia) has no Python to check."""
    if not isinstance(metadata, dict) or not isinstance(metadata.get("language_info"), dict):
        return True
    name = metadata["language_info"].get("name")
    return not isinstance(name, str) or name.lower() == "python"


# -- masking ------------------------------------------------------------------------------------


def mask(source: str) -> tuple[str, tuple[Masked, ...], str | None]:
    """`source` with its IPython lines replaced by placeholders; the masked lines; the cell magic."""
    pieces = _BREAK.split(source)
    contents, breaks = pieces[0::2], [*pieces[1::2], ""]
    masked: list[Masked] = []
    magic = None
    first = next((i for i, line in enumerate(contents) if line.strip()), None)
    if first is not None and contents[first].startswith("%%"):
        magic = contents[first][2:].strip()
        masked.append(Masked(first, contents[first], PLACEHOLDER, pinned=True))
        if magic.split(" ", 1)[0] not in PYTHON_CELL_MAGICS:
            # Blank lines parse as they are (and the empty text after a final line break is no line).
            masked += [Masked(i, contents[i], PLACEHOLDER) for i in range(first + 1, len(contents)) if contents[i].strip()]
        else:
            masked += _mask_lines(contents, first + 1)
    else:
        masked = _mask_lines(contents, 0)
    for line in masked:
        contents[line.row] = line.placeholder
    return "".join(c + b for c, b in zip(contents, breaks, strict=True)), tuple(masked), magic


def _mask_lines(contents: list[str], start: int) -> list[Masked]:
    """IPython escapes at the start of a statement (never inside brackets, strings or a continued line)."""
    masked: list[Masked] = []
    depth, quote, continued = 0, None, False
    i = start
    while i < len(contents):
        line = contents[i]
        if depth == 0 and quote is None and not continued:
            replacement = _escape_placeholder(line)
            if replacement is not None:
                masked.append(Masked(i, line, replacement))
                indent = line[: len(line) - len(line.lstrip())]
                # `!accelerate launch \` goes on over the next lines: one command, all masked.
                while contents[i].rstrip().endswith("\\") and i + 1 < len(contents) and contents[i + 1].strip():
                    i += 1
                    masked.append(Masked(i, contents[i], indent + PLACEHOLDER))
                i += 1
                continue
        depth, quote, continued = _scan(line, depth, quote)
        i += 1
    return masked


def _escape_placeholder(line: str) -> str | None:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith(("!", "%", "?")):
        return indent + PLACEHOLDER
    assigned = _ASSIGN_ESCAPE.match(line)
    if assigned:
        return assigned.group(1) + SHELL_VALUE
    code = line[: _code_end(line)].rstrip()
    if code.endswith("?") and code.strip():  # `model?`, `model.forward??`: never Python
        return indent + PLACEHOLDER
    if _AUTOMAGIC.match(stripped) and _automagic(code.strip()):
        return indent + PLACEHOLDER
    return None


def _automagic(code: str) -> bool:
    """A line that starts like a magic is one only when it is a whole line that Python cannot read
    (`time = compute(a,` opens a bracket: Python going on over the next lines)."""
    depth, quote, continued = _scan(code, 0, None)
    if depth or quote or continued or code.endswith(":"):
        return False
    try:
        compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST)
    except SyntaxError:
        return True
    except (ValueError, RecursionError, MemoryError):
        return False
    return False


# What a line is scanned for (between them, nothing changes the scan): outside a string, a comment, a
# quote or a bracket; inside one, a backslash (which escapes what follows) or the closing quote. Read
# one character at a time, the notebooks of NeMo's tutorials cost a second of its run.
_OUTSIDE_STRING = LazyPattern(r"""[#"'()\[\]{}]""")
_COMMENT_OR_QUOTE = LazyPattern(r"""[#"']""")
_STRING_END = {quote: LazyPattern(r"\\[\s\S]?|" + quote) for quote in ('"', "'", '"""', "'''")}


def _in_string(line: str, i: int, quote: str) -> tuple[int, str | None] | None:
    """One step inside a string from `i`: past an escaped character (still in it) or past its closing
    quote (out of it); None when the line ends inside it."""
    end = _STRING_END[quote].search(line, i)
    if end is None:
        return None
    return end.end(), quote if end.group()[0] == "\\" else None


def _code_end(line: str) -> int:
    """Where a line's comment starts (its length if none), ignoring `#` in strings."""
    quote = None
    i = 0
    while True:
        if quote:
            step = _in_string(line, i, quote)
            if step is None:
                return len(line)
            i, quote = step
            continue
        found = _COMMENT_OR_QUOTE.search(line, i)
        if found is None:
            return len(line)
        i = found.start()
        if found.group() == "#":
            return i
        quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else found.group()
        i += len(quote)


def _scan(line: str, depth: int, quote: str | None) -> tuple[int, str | None, bool]:
    """Bracket depth and open triple-quoted string after `line`, and whether it ends in a backslash."""
    i = 0
    while True:
        if quote:
            step = _in_string(line, i, quote)
            if step is None:
                break
            i, quote = step
            continue
        found = _OUTSIDE_STRING.search(line, i)
        if found is None:
            break
        char, i = found.group(), found.start()
        if char == "#":
            break
        if char in "\"'":
            quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else char
            i += len(quote)
            continue
        depth = depth + 1 if char in "([{" else max(0, depth - 1)
        i += 1
    continued = line.endswith("\\") and (quote is None or len(quote) == 1)
    if quote is not None and len(quote) == 1 and not continued:
        quote = None  # a one-line string left open is a syntax error, not a string going on
    return depth, quote, continued


# -- the notebook as a source file ----------------------------------------------------------------


class NotebookSource(SourceFile):
    """A notebook seen as its Python: `text` and `raw` are the joined code cells, so rules, fixes
    and the lossless check work as on a .py file; `notebook` maps them back to cells."""

    __slots__ = ("notebook",)

    def __init__(
        self,
        path: Path,
        raw: bytes,
        text: str,
        encoding: str,
        bom: bool,
        line_starts: tuple[int, ...],
        notebook: Notebook | None = None,
    ) -> None:
        super().__init__(path, raw, text, encoding, bom, line_starts)
        self.notebook = notebook

    @property
    def file_bytes(self) -> bytes:
        return self.notebook.raw if self.notebook is not None else self.raw

    @property
    def file_text(self) -> str:
        return self.notebook.text if self.notebook is not None else self.text

    def _cell_and_row(self, row: int) -> tuple[CodeCell, int]:
        assert self.notebook is not None
        cell = self.notebook.cell_at(row)
        return cell, row - cell.first_row + 1

    def location(self, offset: int) -> tuple[int | None, int, int]:
        row, column = self.position(offset)
        if self.notebook is None or not self.notebook.cells:
            return None, row, column
        cell, cell_row = self._cell_and_row(row)
        return cell.number, cell_row, column

    def describe_row(self, row: int) -> str:
        if self.notebook is None or not self.notebook.cells:
            return super().describe_row(row)
        cell, cell_row = self._cell_and_row(row)
        return f"cell {cell.number}, line {cell_row}"

    def frame_source(self, cell: int | None) -> SourceFile:
        """The cell as written (magics included), for a code frame with the cell's own line numbers; a
        markdown cell too (a launch command in its fenced block)."""
        if self.notebook is None or cell is None:
            return self
        found = next((c.source for c in self.notebook.cells if c.number == cell), None)
        if found is None:
            found = next((text for number, text in self.notebook.markdown_cells() if number == cell), None)
        if found is None:
            return self
        text = found
        return SourceFile(self.path, _encode(text), text, "utf-8", False, line_starts_of(text))


# How many broken cells a notebook may have and still be checked for the rest.
MAX_BROKEN_CELLS = 8


def without_broken_cells(source: NotebookSource) -> tuple[NotebookSource, ast.Module, list[str]] | None:
    """The notebook with each code cell that does not parse left empty (its rows kept, so every other
    cell's findings keep their places), its tree, and what is wrong with each; None when it is not
    that (no cells, a cell that breaks the next, more than MAX_BROKEN_CELLS). A notebook is a
    scratchpad: one half-written cell must not hide what the others do."""
    notebook = source.notebook
    if notebook is None or not notebook.cells:
        return None
    lines = source.text.splitlines(keepends=True)
    problems: list[str] = []
    emptied: set[int] = set()
    while len(problems) <= MAX_BROKEN_CELLS:
        changed = source.with_text("".join(lines))
        assert isinstance(changed, NotebookSource)
        try:
            return changed, parse_python(changed), problems
        except ParseError as exc:
            if exc.row is None:
                return None
            cell = notebook.cell_at(exc.row)
            if cell.number in emptied:
                return None
            emptied.add(cell.number)
            problems.append(str(exc).removeprefix("cannot parse: "))
            for row in range(cell.first_row - 1, min(cell.first_row - 1 + cell.rows, len(lines))):
                lines[row] = "\n"
    return None


def decode_notebook(path: Path, raw: bytes) -> NotebookSource:
    return notebook_source(path, read_notebook(raw))


def notebook_source(path: Path, notebook: Notebook) -> NotebookSource:
    """A decoded notebook as the source the rules read."""
    text = notebook.python
    return NotebookSource(path, _encode(text), text, "utf-8", False, line_starts_of(text), notebook=notebook)


def python_bytes(path: Path, raw: bytes) -> bytes:
    """What the text pre-checks should look at: a notebook's joined code, a .py file's bytes."""
    if not is_notebook(path):
        return raw
    return _encode(read_notebook(raw).python)


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # JSON can spell a lone surrogate (\ud800); Python source cannot hold one
        raise SourceError("cannot read notebook: a code cell holds a lone surrogate") from None
