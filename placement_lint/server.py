"""`placement-lint server`: a Language Server on stdio, for editors.

It checks each open Python document as `placement_lint.check_source` does, as the file at its path:
that path's settings and its repository's launch context apply, so a finding that only a launch
script shows appears in the editor, with the chain (launch line, config, importers) as the
diagnostic's related information. What the command line reports as an error is an Error
diagnostic: text that does not parse (while the user types) where the parser stopped, a
configuration that does not load on the first line; a warning about the file is a Warning. Code
actions offer the rule's fix (an unsafe one says so in its title), a `# noqa: CODE` comment for the
line, and `source.fixAll.placement-lint`: every safe fix of the document, as `--fix` (with the
`unsafeFixes` initialization option, the unsafe ones too, as `--unsafe-fixes`). Every range is in
the position encoding negotiated at `initialize` (UTF-16 unless the client offers UTF-8 or UTF-32).
Saving any file, or a change the editor reports to a launch script, a config or a Python file on
disk, re-checks every open document: the launch context is read from disk, so that is when it can
change. A Jupyter notebook the client syncs as a notebook document is checked as its `.ipynb` file
is, each cell getting its own findings.

Needs the `lsp` extra (pygls); the command line imports this module only for `server`.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import os
import warnings
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from placement_lint.api import CheckError, SuppressionWarning, check_source, fix_source
from placement_lint.catalogue import page_url
from placement_lint.context.launcher_names import (
    DOCKER_NAMES,
    MAKE_NAMES,
    MARKDOWN_SUFFIXES,
    RST_SUFFIXES,
    SHELL_SUFFIXES,
    launcher_name,
)
from placement_lint.edits import Edit, applicable
from placement_lint.fixes.noqa import noqa_edits
from placement_lint.notebook import mask, notebook_source, read_notebook
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.results import Finding, display_path
from placement_lint.rules import rule_codes
from placement_lint.settings import ConfigError, settings_for
from placement_lint.source import SourceError, SourceFile, line_starts_of, quoted_lines
from placement_lint.version import __version__

SOURCE = "placement-lint"
# As ruff's server names its own (`source.fixAll.ruff`): an editor's `source.fixAll` on save runs it.
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
NOTEBOOK_FIX_ALL = f"{types.CodeActionKind.Notebook.value}.{FIX_ALL}"  # VS Code's notebook.codeActionsOnSave
CHANGE_DELAY = 0.25  # seconds without a change before a changed document is checked
PYTHON_SUFFIXES = (".py", ".pyi")
# What can change a file's launch context or settings besides the file itself: launchers (as
# `context.launcher_names` knows them), the JSON and YAML configs they name, pyproject.toml, and the
# Python modules that import one another.
_WATCHED_SUFFIXES = (
    *sorted(SHELL_SUFFIXES),
    ".mk",
    ".dockerfile",
    ".yml",
    ".yaml",
    ".json",
    ".toml",
    ".cfg",
    ".ipynb",
    ".py",
    *MARKDOWN_SUFFIXES,
    *RST_SUFFIXES,
)
_WATCHED_NAMES = (*MAKE_NAMES, *DOCKER_NAMES, "Procfile")
WATCHED_GLOBS = tuple(f"**/*{suffix}" for suffix in _WATCHED_SUFFIXES) + tuple(f"**/{name}" for name in _WATCHED_NAMES)


# ---------------------------------------------------------------------------------------------------
# Related locations: the chain behind a finding, as data.


class RelatedLocation(NamedTuple):
    path: Path  # absolute
    row: int  # 1-based
    column: int  # 1-based, in characters
    end_row: int
    end_column: int  # 0 with end_row = row + 1: the whole line
    role: str  # one of rules/spans.py ROLES: "launch", "config", "import", "helper", "origin", "load", "finding", "attached", "consumer"
    message: str


def related_locations(finding: Finding, cwd: Path | None = None) -> list[RelatedLocation]:
    """The places that make `finding` true, in the order the data flows: the launch line, the config,
    the imports, the load, the consumer: the spans the finding carries (`violation.related`), less its
    own. A span in a notebook cell has no line of its own in the file, and is left out."""
    base = cwd or Path.cwd()
    found: list[RelatedLocation] = []
    for span in finding.violation.related:
        if span.cell is not None or (span.row, span.column) == (finding.row, finding.column) and span.path == finding.display:
            continue
        path = _absolute(span.path, base)
        if not span.row:  # only the file is known
            found.append(RelatedLocation(path, 1, 1, 2, 0, span.role, span.message))
            continue
        found.append(RelatedLocation(path, span.row, span.column, span.end_row, span.end_column, span.role, span.message))
    return list(dict.fromkeys(found))


def _absolute(path: str, base: Path) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else base / candidate


# ---------------------------------------------------------------------------------------------------
# Positions: the engine counts lines as Python does (\n, \r\n, \r, as LSP does too) and columns in
# characters; the client counts columns in the encoding it negotiated (UTF-16 unless it said otherwise):
# an emoji is one character, two UTF-16 units, four UTF-8 bytes.

CountUnits = Callable[[str], int]  # how many of the client's code units a piece of text is


class Positions:
    def __init__(self, text: str, count_units: CountUnits) -> None:
        self.text = text
        self.starts = line_starts_of(text)
        self.count_units = count_units

    def at_offset(self, offset: int) -> types.Position:
        row = max(bisect_right(self.starts, offset), 1) - 1
        return types.Position(row, self.count_units(self.text[self.starts[row] : offset]))

    def at(self, row: int, column: int) -> types.Position:
        """`row` and `column` 1-based, in characters, as a Finding has them; a column past the end of
        its line stays on it."""
        if row - 1 >= len(self.starts):
            return types.Position(row - 1, 0)
        start = self.starts[row - 1]
        line_end = start + len(self.text[start : self.starts[row] if row < len(self.starts) else len(self.text)].rstrip("\r\n"))
        return self.at_offset(min(start + max(column, 1) - 1, line_end))

    def range(self, row: int, column: int, end_row: int, end_column: int) -> types.Range:
        return types.Range(self.at(row, column), self.at(end_row, end_column))

    def edit(self, edit: Edit) -> types.TextEdit:
        return types.TextEdit(types.Range(self.at_offset(edit.start), self.at_offset(edit.end)), edit.content)

    def replacing(self, new_text: str) -> types.TextEdit:
        """One edit turning this text into `new_text`: the span between what they share at both ends
        (the editor keeps the cursor, the folds and the undo history of the rest)."""
        old = self.text
        limit = min(len(old), len(new_text))
        start = _shared_prefix(old, new_text, limit)
        end = _shared_prefix(old[::-1], new_text[::-1], limit - start)
        # Never split a \r\n: a position between them is not one the client can name.
        if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
            start -= 1
        if 0 < end < len(old) - start and old[-end - 1] == "\r" and old[-end] == "\n":
            end -= 1
        return self.edit(Edit(start, len(old) - end, new_text[start : len(new_text) - end]))


def _shared_prefix(a: str, b: str, limit: int) -> int:
    """How many characters (at most `limit`) `a` and `b` share at their start: compared a slice at a
    time, the slice halved where they differ (a character loop takes 17 ms on a 10,000-character file)."""
    shared, step = 0, 1 << 12
    while step:
        if shared + step <= limit and a[shared : shared + step] == b[shared : shared + step]:
            shared += step
        else:
            step //= 2
    return shared


class RelatedPositions:
    """Positions in the files a finding's chain passes through, as the check read them: the checked
    text for its own document, the disk for the rest (the launch context was read from there)."""

    def __init__(self, own_path: Path, own: Positions) -> None:
        self.own_path = os.path.normcase(os.path.abspath(own_path))
        self.own = own
        self.others: dict[Path, Positions | None] = {}

    def range(self, location: RelatedLocation) -> types.Range:
        positions = self._positions(location.path)
        if positions is None:  # gone, unreadable or binary: its characters are the best guess
            return types.Range(
                types.Position(location.row - 1, location.column - 1),
                types.Position(location.end_row - 1, max(location.end_column - 1, 0)),
            )
        return positions.range(location.row, location.column, location.end_row, location.end_column)

    def _positions(self, path: Path) -> Positions | None:
        if os.path.normcase(os.path.abspath(path)) == self.own_path:
            return self.own
        if path not in self.others:
            lines = quoted_lines(path)
            self.others[path] = None if lines is None else Positions("\n".join(lines), self.own.count_units)
        return self.others[path]


# ---------------------------------------------------------------------------------------------------
# What a check says of a document besides its findings: that it does not parse, or a warning about it.


class Reported(NamedTuple):
    """An error or a warning the check reported, as the command line prints it."""

    severity: types.DiagnosticSeverity
    message: str  # about the document: its path left out
    about_document: bool  # else about the run (the configuration does not load): nothing was checked


class DocumentProblem(NamedTuple):
    severity: types.DiagnosticSeverity
    message: str  # as the command line prints it after "error: <path>: " or "warning: <path>: "
    row: int  # 1-based; columns in characters, as a finding's
    column: int
    end_row: int
    end_column: int


_NAMED_LINE = LazyPattern(r"\bline (\d+)\b")


def document_problem(reported: Reported, text: str) -> DocumentProblem:
    """Where the user can act on the problem: a syntax error at the token the parser stopped at (as
    ruff's server shows it), another problem on the line it names, else on the first line."""
    severity, message, about_document = reported
    if about_document and message.startswith("cannot parse"):
        span = syntax_error_span(text)
        if span is not None:
            return DocumentProblem(severity, message, *span)
    named = _NAMED_LINE.search(message) if about_document else None
    row = int(named.group(1)) if named else 1
    return DocumentProblem(severity, message, row, 1, row + 1, 1)


def syntax_error_span(text: str) -> tuple[int, int, int, int] | None:
    """Where CPython's parser stops in `text` (1-based rows, columns in characters, the end past the
    last character); None when it parses. `ast.parse` only parses: nothing is run."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # about the checked code (invalid escapes): not ours to show
            ast.parse(text)
    except SyntaxError as exc:
        if not exc.lineno:
            return None
        row, column = exc.lineno, max(exc.offset or 1, 1)
        end_row, end_column = exc.end_lineno or row, exc.end_offset or 0
        if (end_row, end_column) <= (row, column):  # "'(' was never closed": no end, or one before the start
            end_row, end_column = row, column + 1
        return row, column, end_row, end_column
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def _suppression_diagnostic(warning: SuppressionWarning, positions: Positions) -> types.Diagnostic:
    """A mistaken suppression comment, where it is: a warning, as the command line's."""
    return types.Diagnostic(
        range=positions.range(warning.row, warning.column, warning.end_row, warning.end_column),
        message=str(warning),
        severity=types.DiagnosticSeverity.Warning,
        source=SOURCE,
    )


def _problem_diagnostic(problem: DocumentProblem, positions: Positions) -> types.Diagnostic:
    return types.Diagnostic(
        range=positions.range(problem.row, problem.column, problem.end_row, problem.end_column),
        message=problem.message,
        severity=problem.severity,
        source=SOURCE,
    )


# ---------------------------------------------------------------------------------------------------
# The server.


class Checked(NamedTuple):
    """The last check of an open document: the text it read and what it found there, one diagnostic
    per finding (in their order) and one per problem."""

    text: str
    findings: list[Finding]
    diagnostics: list[types.Diagnostic]
    problems: list[types.Diagnostic]


class Outcome(NamedTuple):
    findings: list[Finding]
    problems: list[Reported]
    mistaken: list[SuppressionWarning] = []  # `# noqa` comments naming no rule: warnings at their lines


class NotebookCells(NamedTuple):
    """An open notebook as the command line reads its file: its cells' documents, and its JSON."""

    path: Path
    uris: list[str]  # every cell's document, in order: a finding's `cell` is 1-based among them
    code: list[bool]  # which cells are code
    json: str


class PlacementLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            SOURCE,
            __version__,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        cells=[types.NotebookCellLanguage(language="python")], notebook="jupyter-notebook"
                    )
                ],
                save=True,
            ),
        )
        self.checked: dict[str, Checked] = {}  # by document URI; a notebook's by each cell's URI
        self.unsafe_fixes = False  # the `unsafeFixes` initialization option: `--unsafe-fixes` for fixAll

    @property
    def count_units(self) -> CountUnits:
        return self.workspace.position_codec.client_num_units

    def check_document(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        if not _is_python(document):
            return
        text = document.source
        path = Path(document.path)
        outcome = self._check(text, path)
        positions = Positions(text, self.count_units)
        url_base = _rule_url_base(path)
        related = RelatedPositions(path, positions)
        diagnostics = [_diagnostic(finding, positions, related, url_base) for finding in outcome.findings]
        problems = [_problem_diagnostic(document_problem(reported, text), positions) for reported in outcome.problems]
        problems += [_suppression_diagnostic(warning, positions) for warning in outcome.mistaken]
        self.checked[uri] = Checked(text, outcome.findings, diagnostics, problems)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics + problems)
        )

    def check_notebook(self, notebook_uri: str) -> None:
        """A notebook as its file is checked (the same cells, masks and launch context), each cell
        getting the diagnostics of its findings."""
        cells = self._notebook_cells(notebook_uri)
        if cells is None:
            return
        outcome = self._check(cells.json, cells.path)
        texts = [self.workspace.get_text_document(uri).source for uri in cells.uris]
        positions = [Positions(text, self.count_units) for text in texts]
        url_base = _rule_url_base(cells.path)
        by_cell: list[list[tuple[Finding, types.Diagnostic]]] = [[] for _ in cells.uris]
        related = [RelatedPositions(cells.path, cell) for cell in positions]  # one per cell: its files read once
        for finding in outcome.findings:
            index = (finding.cell or 1) - 1
            if index < len(cells.uris):
                by_cell[index].append((finding, _diagnostic(finding, positions[index], related[index], url_base)))
        problems: list[list[types.Diagnostic]] = [[] for _ in cells.uris]
        for reported in outcome.problems:
            for index, problem in _cell_problems(reported, texts, cells.code):
                problems[index].append(_problem_diagnostic(problem, positions[index]))
        for index, uri in enumerate(cells.uris):
            findings = [finding for finding, _ in by_cell[index]]
            diagnostics = [diagnostic for _, diagnostic in by_cell[index]]
            self.checked[uri] = Checked(texts[index], findings, diagnostics, problems[index])
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics + problems[index])
            )

    def check_open_documents(self) -> None:
        for uri in list(self.workspace.text_documents):
            self.check_document(uri)
        for notebook_uri in list(self.workspace.notebook_documents):
            self.check_notebook(notebook_uri)

    def _notebook_cells(self, notebook_uri: str) -> NotebookCells | None:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        path = _file_path(notebook_uri)
        if notebook is None or path is None:
            return None
        uris, code, cells = [], [], []
        for cell in notebook.cells:
            is_code = cell.kind == types.NotebookCellKind.Code
            text = self.workspace.get_text_document(cell.document).source
            uris.append(cell.document)
            code.append(is_code)
            cell_json: dict[str, object] = {"cell_type": "code" if is_code else "markdown", "metadata": {}, "source": text}
            if is_code:
                cell_json.update(outputs=[], execution_count=None)
            cells.append(cell_json)
        metadata = notebook.metadata if isinstance(notebook.metadata, dict) else {}
        document = {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
        return NotebookCells(path, uris, code, json.dumps(document, ensure_ascii=False))

    def _check(self, text: str, path: Path) -> Outcome:
        """What the command line reports of the file, never an exception: an editor must not lose its
        server over one file. An error of the run (the configuration does not load: nothing was
        checked) is the document's too; a warning about another file (a launch config that does not
        parse) goes to the log."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                findings, errors = check_source(text, path), []
            except CheckError as exc:
                findings, errors = list(exc.findings), exc.errors
            except Exception as exc:  # a bug in a rule must not take the server down
                logging.getLogger(__name__).exception("checking %s failed", path)
                self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"{path}: {exc!r}"))
                return Outcome([], [])
        reported = [(types.DiagnosticSeverity.Error, message) for message in errors]
        mistaken = [warning.message for warning in caught if isinstance(warning.message, SuppressionWarning)]
        reported += [
            (types.DiagnosticSeverity.Warning, str(warning.message))
            for warning in caught
            if not isinstance(warning.message, SuppressionWarning)
        ]
        own = _own_prefixes(path)
        problems = []
        for severity, message in reported:
            prefix = next((prefix for prefix in own if message.startswith(prefix)), None)
            if prefix is not None:
                problems.append(Reported(severity, message.removeprefix(prefix), True))
            elif severity == types.DiagnosticSeverity.Error:
                problems.append(Reported(severity, message, False))
            else:
                kind = types.MessageType.Error if severity == types.DiagnosticSeverity.Error else types.MessageType.Warning
                self.window_log_message(types.LogMessageParams(kind, message))
        return Outcome(findings, problems, mistaken)

    def fixed_text(self, text: str, path: Path) -> str | None:
        """`text` with every fix `--fix` would apply (and the unsafe ones with `unsafeFixes`); None
        when it does not parse (the command line leaves such a file alone)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the check that published the diagnostics logged them
            try:
                return fix_source(text, path, unsafe_fixes=self.unsafe_fixes)[0]
            except CheckError:
                return None
            except Exception:  # a bug in a fix must not take the server down
                logging.getLogger(__name__).exception("fixing %s failed", path)
                return None

    def edit_target(self, uri: str, notebook: types.NotebookDocument | None) -> DocumentEdits | NotebookEdits | None:
        if notebook is not None:
            cells = self._notebook_cells(notebook.uri)
            try:
                return NotebookEdits(cells, self.count_units) if cells is not None else None
            except SourceError:  # a cell the command line cannot read either (a lone surrogate)
                return None
        document = self.workspace.get_text_document(uri)
        return DocumentEdits(uri, Path(document.path or "untitled.py"), document.source, self.count_units)

    def notebook_findings(self, notebook: types.NotebookDocument) -> list[Finding]:
        return [
            finding
            for cell in notebook.cells
            if cell.document in self.checked
            for finding in self.checked[cell.document].findings
        ]

    def fix_all_edits(self, uri: str) -> dict[str, list[types.TextEdit]]:
        """The edits of `source.fixAll.placement-lint` for a document, or for the notebook holding
        the cell `uri`: by the URI of each document they change."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return self._fix_all_notebook(notebook.uri)
        document = self.workspace.get_text_document(uri)
        if not _is_python(document):
            return {}
        text = document.source
        fixed = self.fixed_text(text, Path(document.path))
        if fixed is None or fixed == text:
            return {}
        return {uri: [Positions(text, self.count_units).replacing(fixed)]}

    def _fix_all_notebook(self, notebook_uri: str) -> dict[str, list[types.TextEdit]]:
        cells = self._notebook_cells(notebook_uri)
        if cells is None:
            return {}
        fixed = self.fixed_text(cells.json, cells.path)
        if fixed is None or fixed == cells.json:
            return {}
        fixed_cells = json.loads(fixed)["cells"]
        if len(fixed_cells) != len(cells.uris):
            return {}
        changes = {}
        for uri, cell in zip(cells.uris, fixed_cells, strict=True):
            text = self.workspace.get_text_document(uri).source
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            if source != text:
                changes[uri] = [Positions(text, self.count_units).replacing(source)]
        return changes


def _own_prefixes(path: Path) -> tuple[str, ...]:
    """How the command line names the checked file before a message about it ("train.py: ...")."""
    return tuple(dict.fromkeys((f"{display_path(Path(os.path.abspath(path)), Path.cwd())}: ", f"{path}: ")))


_BROKEN_CELLS = LazyPattern(r"; (?=cell \d+, line \d+: )")
_BROKEN_CELL = LazyPattern(r"cell (\d+), line (\d+): ")
_OTHER_CELLS_CHECKED = " (its other cells were checked)"


def _cell_problems(reported: Reported, texts: list[str], code: list[bool]) -> list[tuple[int, DocumentProblem]]:
    """A problem of a notebook in the cells it names ("cannot parse: cell 2, line 1: invalid syntax;
    cell 4, ..."): a syntax error where its cell's parser stops, another problem on the line it
    names; a problem naming no cell, on the first line of the first code cell."""
    severity, message, about_document = reported
    found = []
    parse = message.startswith("cannot parse: ")
    body = message.removeprefix("cannot parse: ").removesuffix(_OTHER_CELLS_CHECKED)
    for part in (_BROKEN_CELLS.split(body) if parse else [message]) if about_document else []:
        named = _BROKEN_CELL.search(part)
        index = int(named.group(1)) - 1 if named else -1
        if named and 0 <= index < len(texts):
            row = int(named.group(2))
            span = (syntax_error_span(mask(texts[index])[0]) if parse else None) or (row, 1, row + 1, 1)
            found.append((index, DocumentProblem(severity, f"cannot parse: {part}" if parse else part, *span)))
    if found or not texts:
        return found
    first = code.index(True) if True in code else 0
    return [(first, DocumentProblem(severity, message, 1, 1, 2, 1))]


def _file_path(uri: str) -> Path | None:
    from pygls.uris import to_fs_path

    return Path(to_fs_path(uri)) if uri.startswith("file:") else None


def _is_python(document: TextDocument) -> bool:
    """A Python file the client opened: not a notebook's cell (its path is the notebook's), not an
    unsaved buffer (it has no path, so no settings and no launch context)."""
    return (
        document.uri.startswith("file:")
        and document.path is not None
        and (document.language_id == "python" or Path(document.path).suffix.lower() in PYTHON_SUFFIXES)
    )


def _rule_url_base(path: Path) -> str | None:
    try:
        return settings_for(path, None, Path.cwd(), rule_codes()).rule_url_base
    except ConfigError:
        return None  # check_source reported it


def _diagnostic(finding: Finding, positions: Positions, related: RelatedPositions, url_base: str | None) -> types.Diagnostic:
    information = [
        types.DiagnosticRelatedInformation(
            location=types.Location(uri=location.path.as_uri(), range=related.range(location)),
            message=f"{location.role}: {location.message}",
        )
        for location in related_locations(finding)
    ]
    return types.Diagnostic(
        range=positions.range(finding.row, finding.column, finding.end_row, finding.end_column),
        message=finding.message,
        severity=types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=page_url(finding.code, url_base)),
        source=SOURCE,
        related_information=information or None,
        tags=[types.DiagnosticTag.Unnecessary] if finding.code == "DPL100" else None,
    )


# ---------------------------------------------------------------------------------------------------
# Code actions.


def wanted_kind(kind: str, only: Sequence[str] | None) -> bool:
    """Does a request for the kinds `only` (none: every kind) take an action of `kind`? Kinds are
    dotted hierarchies: `source` takes `source.fixAll.placement-lint`."""
    return not only or any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


class DocumentEdits:
    """Where the edits of a document's actions go: its offsets are those of the checked text."""

    def __init__(self, uri: str, path: Path, text: str, count_units: CountUnits) -> None:
        self.uri = uri
        self.source = SourceFile(path, text.encode("utf-8", "surrogatepass"), text, "utf-8", False, line_starts_of(text))
        self.positions = Positions(text, count_units)

    def changes(self, edits: Iterable[Edit]) -> dict[str, list[types.TextEdit]] | None:
        return {self.uri: [self.positions.edit(edit) for edit in edits]}


class NotebookEdits:
    """Where the edits of a notebook's actions go: the rules' offsets are in its code cells joined
    (IPython lines masked, columns kept), each edit lands in its cell's document."""

    def __init__(self, cells: NotebookCells, count_units: CountUnits) -> None:
        self.notebook = read_notebook(cells.json.encode("utf-8"))
        self.uris = cells.uris
        self.source = notebook_source(cells.path, self.notebook)
        self.count_units = count_units

    def changes(self, edits: Iterable[Edit]) -> dict[str, list[types.TextEdit]] | None:
        """None when an edit spans cells (a cell's document cannot take it)."""
        changes: dict[str, list[types.TextEdit]] = {}
        for edit in edits:
            cell = next((c for c in self.notebook.cells if c.start <= edit.start < c.start + len(c.python)), None)
            if cell is None or edit.end > cell.start + len(cell.python) or cell.number > len(self.uris):
                return None
            local = Edit(edit.start - cell.start, edit.end - cell.start, edit.content)
            changes.setdefault(self.uris[cell.number - 1], []).append(Positions(cell.python, self.count_units).edit(local))
        return changes


def code_actions(checked: Checked, wanted: types.Range, target: DocumentEdits | NotebookEdits) -> list[types.CodeAction]:
    """For each finding on the lines of `wanted`: its fix (the safe one preferred; an unsafe one says
    so) and a noqa comment for its line."""
    actions: list[types.CodeAction] = []
    for finding, diagnostic in zip(checked.findings, checked.diagnostics, strict=True):
        if not _overlaps(diagnostic.range, wanted):
            continue
        fix = finding.violation.fix
        changes = target.changes(fix.edits) if fix is not None else None
        if fix is not None and changes:
            title = f"{finding.code}: {fix.message}" + ("" if fix.safe else " (unsafe)")
            actions.append(_action(title, changes, diagnostic, preferred=fix.safe))
        noqa = _noqa_edits(target.source, [(finding.code, finding.violation.start)])
        changes = target.changes(noqa) if noqa else None
        if changes:
            title = f"{finding.code}: add `# noqa: {finding.code}` to this line"
            actions.append(_action(title, changes, diagnostic, preferred=False))
    return actions


def _action(
    title: str, changes: dict[str, list[types.TextEdit]], diagnostic: types.Diagnostic, preferred: bool
) -> types.CodeAction:
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=types.WorkspaceEdit(changes=changes),
        is_preferred=preferred or None,
    )


def fixable(findings: Iterable[Finding], unsafe_fixes: bool) -> bool:
    """Would `--fix` (with `--unsafe-fixes`, if so) change anything?"""
    allowed = applicable(unsafe_fixes)
    return any(finding.violation.fix is not None and finding.violation.fix.applicability in allowed for finding in findings)


def _noqa_edits(source: SourceFile, findings: Iterable[tuple[str, int]]) -> list[Edit]:
    try:
        return noqa_edits(source, findings)
    except (SourceError, SyntaxError, ValueError):  # text that no longer parses gets no comment, not an error
        return []


def _overlaps(a: types.Range, b: types.Range) -> bool:
    """By lines: a cursor anywhere on a finding's line is asking about it (ruff's server does the same)."""
    return a.start.line <= b.end.line and b.start.line <= a.end.line


def _affects_launch_context(uri: str) -> bool:
    name = uri.rsplit("/", 1)[-1]
    return launcher_name(name) or os.path.splitext(name)[1].lower() in _WATCHED_SUFFIXES


def _resolves_edits(capabilities: types.ClientCapabilities) -> bool:
    """Can the client ask for a code action's edit when the user picks it (`codeAction/resolve`)?"""
    code_action = capabilities.text_document and capabilities.text_document.code_action
    support = code_action and code_action.resolve_support
    return bool(support and "edit" in support.properties)


def create_server() -> PlacementLintServer:
    server = PlacementLintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: PlacementLintServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        ls.unsafe_fixes = isinstance(options, dict) and options.get("unsafeFixes") is True

    @server.feature(types.INITIALIZED)
    def initialized(ls: PlacementLintServer, params: types.InitializedParams) -> None:
        capabilities = ls.client_capabilities.workspace
        watching = capabilities and capabilities.did_change_watched_files
        if watching and watching.dynamic_registration:
            watchers = [types.FileSystemWatcher(glob_pattern=glob) for glob in WATCHED_GLOBS]
            ls.client_register_capability(
                types.RegistrationParams(
                    registrations=[
                        types.Registration(
                            id="placement-lint-launch-files",
                            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
                        )
                    ]
                )
            )

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PlacementLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.check_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: PlacementLintServer, params: types.DidChangeTextDocumentParams) -> None:
        # A check reads the repository's launch context (a few hundred ms on a big repository):
        # while the user types, only the text they pause on is checked.
        uri, version = params.text_document.uri, params.text_document.version
        await asyncio.sleep(CHANGE_DELAY)
        if ls.workspace.get_text_document(uri).version == version:
            ls.check_document(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PlacementLintServer, params: types.DidSaveTextDocumentParams) -> None:
        # A saved launcher, config or imported module can change any open file's launch context.
        # (Editors without file watching, Neovim on Linux, hear of launchers this way only: the
        # editor guide attaches the server to their file types.)
        ls.check_open_documents()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PlacementLintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.checked.pop(uri, None) is not None:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open_notebook(ls: PlacementLintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.check_notebook(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    async def did_change_notebook(ls: PlacementLintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        uri, version = params.notebook_document.uri, params.notebook_document.version
        structure = params.change.cells and params.change.cells.structure
        removed = [cell.document for cell in (structure.did_close or [])] if structure else []
        for cell_uri in removed:  # a deleted cell's diagnostics go with it
            if ls.checked.pop(cell_uri, None) is not None:
                ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))
        await asyncio.sleep(CHANGE_DELAY)
        notebook = ls.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is not None and notebook.version == version:
            ls.check_notebook(uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save_notebook(ls: PlacementLintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.check_open_documents()  # its shell cells may launch an open script

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close_notebook(ls: PlacementLintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            if ls.checked.pop(cell.uri, None) is not None:
                ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: PlacementLintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(_affects_launch_context(change.uri) for change in params.changes):
            ls.check_open_documents()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL], resolve_provider=True
        ),
    )
    def code_action(ls: PlacementLintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        only = params.context.only
        checked = ls.checked.get(uri)
        if checked is None:
            return None
        document = ls.workspace.get_text_document(uri)
        notebook = ls.workspace.get_notebook_document(cell_uri=uri)
        if document.source != checked.text:
            # The actions' offsets must be in the text the editor holds.
            if notebook is not None:
                ls.check_notebook(notebook.uri)
            else:
                ls.check_document(uri)
            checked = ls.checked[uri]
        actions = []
        target = ls.edit_target(uri, notebook) if wanted_kind(types.CodeActionKind.QuickFix, only) else None
        if target is not None:
            actions += code_actions(checked, params.range, target)
        findings = ls.notebook_findings(notebook) if notebook is not None else checked.findings
        kinds = [kind for kind in (FIX_ALL, NOTEBOOK_FIX_ALL) if wanted_kind(kind, only)] if only else [FIX_ALL]
        for kind in kinds if fixable(findings, ls.unsafe_fixes) else []:
            action = types.CodeAction(title=f"{SOURCE}: Fix all auto-fixable problems", kind=kind, data={"uri": uri})
            # Fixing reads the launch context again: when the client can ask for the edit once the
            # user picks the action, that is when it is worked out.
            actions.append(action if _resolves_edits(ls.client_capabilities) else fix_all(ls, action))
        return actions or None

    @server.feature(types.CODE_ACTION_RESOLVE)
    def resolve_code_action(ls: PlacementLintServer, action: types.CodeAction) -> types.CodeAction:
        return fix_all(ls, action) if action.kind in (FIX_ALL, NOTEBOOK_FIX_ALL) else action

    return server


def fix_all(ls: PlacementLintServer, action: types.CodeAction) -> types.CodeAction:
    """The fixAll action with its edits (none when nothing is to fix: the editor applies nothing)."""
    uri = action.data.get("uri") if isinstance(action.data, dict) else None
    changes = ls.fix_all_edits(uri) if isinstance(uri, str) else {}
    return types.CodeAction(title=action.title, kind=action.kind, edit=types.WorkspaceEdit(changes=changes))


def serve() -> None:
    """Run the server on stdin and stdout until the client asks it to exit."""
    create_server().start_io()
