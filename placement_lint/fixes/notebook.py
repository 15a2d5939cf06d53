"""Write fixes back into a notebook: only the `source` values of the changed cells change.

Fixes are applied to the joined, masked Python of the code cells (notebook.py). To get the cells
back, the cell boundaries and the masked lines are carried through every pass's edits; an edit that
touches a masked line or crosses from one cell into another refuses the fix. The new sources are
then spliced into the JSON text in place of the old `source` values, so outputs, metadata, key
order, indentation, escapes and the final newline stay byte for byte. A `source` stored as a list
of lines stays a list, and the lines that did not change keep their exact JSON spelling. Before
anything is written, the result is read back: it must hold the same JSON with only those sources
changed, and must join to exactly the fixed Python.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from placement_lint.edits import Edit
from placement_lint.notebook import Notebook, read_notebook
from placement_lint.source import UTF8_BOM, SourceError, line_starts_of, split_lines

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NON_ASCII_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u(?!00[0-7])[0-9a-fA-F]{4}")
_LINE = re.compile(r"[^\n]*\n|[^\n]+")
_DECODER = json.JSONDecoder()


class NotebookFixError(Exception):
    """The fixes cannot be mapped back to the cells exactly: the notebook is left as it was."""


@dataclass(frozen=True)
class CellChange:
    number: int  # 1-based among all cells
    before: str
    after: str


@dataclass(frozen=True)
class Rewrite:
    raw: bytes  # the whole notebook file, fixed
    changes: tuple[CellChange, ...]
    notebook: Notebook  # the fixed file, as it was read back to prove it


def rewrite(notebook: Notebook, fixed_python: str, passes: Sequence[Sequence[Edit]]) -> Rewrite:
    """The notebook with its code cells replaced by their part of `fixed_python`, which `passes` (the
    edits of each fix pass, in order) made from `notebook.python`."""
    sources = _cell_sources(notebook, fixed_python, passes)
    changes = tuple(
        CellChange(cell.number, cell.source, new) for cell, new in zip(notebook.cells, sources, strict=True) if new != cell.source
    )
    if not changes:
        return Rewrite(notebook.raw, (), notebook)
    text = _splice(notebook, {change.number - 1: change.after for change in changes})
    raw = (UTF8_BOM if notebook.bom else b"") + text.encode("utf-8")
    return Rewrite(raw, changes, _verify(notebook, raw, changes, fixed_python))


def cell_diff(display: str, changes: Sequence[CellChange]) -> str:
    """A unified diff per changed cell, headed by the cell as ruff heads it (`train.ipynb:cell 3`)."""
    out = []
    for change in changes:
        lines = difflib.unified_diff(
            split_lines(change.before),
            split_lines(change.after),
            fromfile=f"a/{display}:cell {change.number}",
            tofile=f"b/{display}:cell {change.number}",
        )
        # A cell's last line usually has no line break: that is how notebooks store cells, not a change.
        out.append("".join(line if line.endswith(("\n", "\r")) else line + "\n" for line in lines))
    return "".join(out)


# -- from the fixed Python back to cells ----------------------------------------------------------


@dataclass
class _Span:
    start: int
    end: int
    pinned: bool = False  # nothing may be inserted at its start (a cell magic's line)
    at_boundary: bool = False  # its start is a cell's start, where an insertion goes to the cell before


def _cell_sources(notebook: Notebook, fixed: str, passes: Sequence[Sequence[Edit]]) -> list[str]:
    cells = notebook.cells
    starts = [cell.start for cell in cells]
    protected: list[_Span] = []
    placeholders: list[list[tuple[_Span, str, int]]] = []  # per cell: (span, original line, placeholder length)
    for index, cell in enumerate(cells):
        line_starts = line_starts_of(cell.python)
        own = []
        for masked in cell.masked:
            start = cell.start + line_starts[masked.row]
            span = _Span(start, cell.start + line_starts[masked.row + 1], masked.pinned, index > 0 and masked.row == 0)
            protected.append(span)
            own.append((span, masked.original, len(masked.placeholder)))
        placeholders.append(own)
    for edits in passes:
        ordered = sorted(set(edits), key=lambda e: (e.start, e.end))
        for edit in ordered:
            _check(edit, protected, starts)
        for span in protected:
            length = span.end - span.start
            span.start = _shifted(span.start, ordered)
            span.end = span.start + length
        # An insertion at a cell's start joins the cell before: it follows that cell's last import.
        starts = [starts[0]] + [_shifted(start, ordered) for start in starts[1:]]
    ends = [*starts[1:], len(fixed)]
    sources = []
    for cell, start, end, own in zip(cells, starts, ends, placeholders, strict=True):
        text = fixed[start:end]
        for span, original, length in sorted(own, key=lambda item: -item[0].start):
            relative = span.start - start
            text = text[:relative] + original + text[relative + length :]
        if cell.synthetic_newline:
            # The line break added after the cell's last line ends the cell still, even when a fix
            # deleted that line with it (the line before then ends the cell).
            if not text.endswith("\n"):
                raise NotebookFixError(f"cell {cell.number}: a fix would leave the cell without its last line break")
            text = text[:-1]
        sources.append(text)
    return sources


def _check(edit: Edit, protected: list[_Span], starts: list[int]) -> None:
    for span in protected:
        inserts_before_pinned = edit.start == edit.end == span.start and span.pinned and not span.at_boundary
        if edit.start < span.end and edit.end > span.start and edit.start != edit.end or inserts_before_pinned:
            raise NotebookFixError("a fix would change an IPython line (a magic or shell escape)")
        if edit.start == edit.end and span.start < edit.start < span.end:
            raise NotebookFixError("a fix would change an IPython line (a magic or shell escape)")
    if any(edit.start < start < edit.end for start in starts):
        raise NotebookFixError("a fix would span two cells")


def _shifted(position: int, edits: Sequence[Edit]) -> int:
    """Where `position` moves to once `edits` are applied; text inserted at it lands before it."""
    delta = 0
    for edit in edits:  # sorted and not overlapping, so their ends are sorted too
        if edit.end > position:
            break
        delta += len(edit.content) - (edit.end - edit.start)
    return position + delta


# -- splicing the JSON text -----------------------------------------------------------------------


@dataclass
class _Source:
    start: int
    end: int
    elements: list[tuple[int, int]] | None  # a list's string tokens; None for a single string
    open_end: int = 0  # just after `[`
    close: int = 0  # at `]`


def _splice(notebook: Notebook, new_sources: dict[int, str]) -> str:
    text = notebook.text
    try:
        found = _source_tokens(text)
    except (ValueError, IndexError, StopIteration) as exc:
        raise NotebookFixError(f"cannot locate the cell sources in the JSON: {exc}") from exc
    default_ascii = _ensure_ascii(text)
    replacements: list[tuple[int, int, str]] = []
    for index, new in new_sources.items():
        token = found.get(index)
        if token is None:
            raise NotebookFixError(f"cannot locate the source of cell {index + 1} in the JSON")
        old = notebook.data["cells"][index]["source"]
        if token.elements is None:
            replacements.append(
                (token.start, token.end, _encode(new, _ensure_ascii(text[token.start : token.end], default_ascii)))
            )
        else:
            replacements += _list_replacements(text, token, old, new, default_ascii)
    for start, end, content in sorted(replacements, reverse=True):
        text = text[:start] + content + text[end:]
    return text


def _list_replacements(text: str, token: _Source, old: list[str], new: str, default_ascii: bool) -> list[tuple[int, int, str]]:
    """Keep the unchanged lines at both ends as they are written; re-spell only the lines between."""
    elements = token.elements or []
    prefix, position = 0, 0
    while prefix < len(old) and new.startswith(old[prefix], position):
        if not old[prefix].endswith("\n") and position + len(old[prefix]) != len(new):
            break  # a last line without a break matches only if the cell still ends there
        position += len(old[prefix])
        prefix += 1
    suffix, end = 0, len(new)
    while suffix < len(old) - prefix and end - len(old[-1 - suffix]) >= position:
        begin = end - len(old[-1 - suffix])
        if new[begin:end] != old[-1 - suffix] or (begin > 0 and new[begin - 1] != "\n"):
            break
        end = begin
        suffix += 1
    middle = _LINE.findall(new[position:end])
    first, last = prefix, len(old) - suffix  # the old elements [first, last) are replaced
    spelled = text[elements[first][0] : elements[last - 1][1]] if first < last else ""
    ascii_ = _ensure_ascii(spelled, default_ascii)
    tokens = [_encode(line, ascii_) for line in middle]
    if len(elements) >= 2:
        separator = text[elements[0][1] : elements[1][0]]
    elif elements:
        separator = "," + text[token.open_end : elements[0][0]]
    else:
        separator = ", "
    if first < last:
        if tokens:
            return [(elements[first][0], elements[last - 1][1], separator.join(tokens))]
        if first > 0:
            return [(elements[first - 1][1], elements[last - 1][1], "")]
        if last < len(elements):
            return [(elements[first][0], elements[last][0], "")]
        return [(token.open_end, token.close, "")]
    if not tokens:
        return []
    if first > 0:
        return [(elements[first - 1][1], elements[first - 1][1], separator + separator.join(tokens))]
    if elements:
        return [(elements[0][0], elements[0][0], separator.join(tokens) + separator)]
    return [(token.open_end, token.close, separator.join(tokens))]


def _encode(value: str, ensure_ascii: bool) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii)


def _ensure_ascii(spelled: str, default: bool = False) -> bool:
    """How the file spells non-ASCII text: as itself (nbformat's default) or as \\uXXXX escapes."""
    if not spelled.isascii():
        return False
    if _NON_ASCII_ESCAPE.search(spelled):
        return True
    return default


def _source_tokens(text: str) -> dict[int, _Source]:
    """Where each cell's `source` value is in the JSON text, by cell index (the last one, as json does)."""
    found: dict[int, _Source] = {}

    def top(key: str, position: int) -> int:
        if key != "cells" or text[position] != "[":
            return _value_end(text, position)
        return _array(text, position, cell)

    def cell(index: int, position: int) -> int:
        if text[position] != "{":
            return _value_end(text, position)
        return _object(text, position, lambda key, at: source(index, key, at))

    def source(index: int, key: str, position: int) -> int:
        end = _value_end(text, position)
        if key == "source":
            if text[position] == '"':
                found[index] = _Source(position, end, None)
            else:
                elements: list[tuple[int, int]] = []
                _array(text, position, lambda _, at: elements.append((at, _value_end(text, at))) or elements[-1][1])
                found[index] = _Source(position, end, elements, position + 1, end - 1)
        return end

    _object(text, _skip(text, 0), top)
    return found


def _skip(text: str, position: int) -> int:
    return _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]


def _value_end(text: str, position: int) -> int:
    return _DECODER.raw_decode(text, position)[1]


def _object(text: str, position: int, member) -> int:  # type: ignore[no-untyped-def]
    if text[position] != "{":
        raise ValueError(f"expected an object at {position}")
    position = _skip(text, position + 1)
    if text[position] == "}":
        return position + 1
    while True:
        key, position = json.decoder.scanstring(text, position + 1)  # type: ignore[attr-defined]
        position = _skip(text, position)
        if text[position] != ":":
            raise ValueError(f"expected ':' at {position}")
        position = _skip(text, member(key, _skip(text, position + 1)))
        if text[position] == "}":
            return position + 1
        if text[position] != ",":
            raise ValueError(f"expected ',' at {position}")
        position = _skip(text, position + 1)


def _array(text: str, position: int, element) -> int:  # type: ignore[no-untyped-def]
    position = _skip(text, position + 1)
    if text[position] == "]":
        return position + 1
    index = 0
    while True:
        position = _skip(text, element(index, position))
        index += 1
        if text[position] == "]":
            return position + 1
        if text[position] != ",":
            raise ValueError(f"expected ',' at {position}")
        position = _skip(text, position + 1)


# -- the proof ------------------------------------------------------------------------------------


def _verify(notebook: Notebook, raw: bytes, changes: Sequence[CellChange], fixed_python: str) -> Notebook:
    """The fixed notebook read back, when it holds exactly the fixed cells and nothing else changed."""
    expected = copy.deepcopy(notebook.data)
    for change in changes:
        cell = expected["cells"][change.number - 1]
        old = cell["source"]
        cell["source"] = _LINE.findall(change.after) if isinstance(old, list) else change.after
    try:
        reread = read_notebook(raw)
    except SourceError as exc:
        raise NotebookFixError(f"the fixed notebook would not read back ({exc})") from exc
    # The read-back notebook becomes the file's source: its changed cells are compared as copies.
    actual = {**reread.data, "cells": list(reread.data["cells"])}
    for change in changes:  # a list may be split differently from _LINE where lines did not change
        cell = actual["cells"][change.number - 1] = dict(actual["cells"][change.number - 1])
        if isinstance(cell["source"], list):
            if "".join(cell["source"]) != change.after:
                raise NotebookFixError(f"cell {change.number} would not hold the fixed source")
            cell["source"] = _LINE.findall(change.after)
    if actual != expected:
        raise NotebookFixError("the fixed notebook would differ in more than the fixed cells")
    if reread.python != fixed_python:
        raise NotebookFixError("the fixed cells would not read back as the fixed code")
    return reread
