"""`placement-lint server`: a Language Server on stdio, for editors.

It checks each open Python document as `placement_lint.check_source` does, as the file at its path:
that path's settings and its repository's launch context apply, so a finding that only a launch
script shows appears in the editor, with the chain (launch line, config, importers) as the
diagnostic's related information. Code actions offer the rule's fix (an unsafe one says so in its
title) and a `# noqa: CODE` comment for the line. Saving any file, or a change the editor reports
to a launch script, a config or a Python file on disk, re-checks every open Python document: the
launch context is read from disk, so that is when it can change.

Needs the `lsp` extra (pygls); the command line imports this module only for `server`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from placement_lint.api import CheckError, SuppressionWarning, check_source
from placement_lint.catalogue import page_url
from placement_lint.context.launcher_names import DOCKER_NAMES, MAKE_NAMES, MARKDOWN_SUFFIXES, SHELL_SUFFIXES
from placement_lint.edits import Edit
from placement_lint.fixes.noqa import noqa_edits
from placement_lint.records import NamedTuple
from placement_lint.results import Finding
from placement_lint.rules import rule_codes
from placement_lint.settings import ConfigError, settings_for
from placement_lint.source import SourceFile, line_starts_of
from placement_lint.version import __version__

SOURCE = "placement-lint"
CHANGE_DELAY = 0.25  # seconds without a change before a changed document is checked
PYTHON_SUFFIXES = (".py", ".pyi")
# What can change a file's launch context or settings besides the file itself: launchers (as
# `context.launcher_names` knows them), the JSON and YAML configs they name, pyproject.toml, and the
# Python modules that import one another.
_WATCHED_SUFFIXES = (*sorted(SHELL_SUFFIXES), ".mk", ".dockerfile", ".yml", ".yaml", ".json", ".toml", ".cfg", ".ipynb", ".py")
_WATCHED_NAMES = (*MAKE_NAMES, *DOCKER_NAMES, "Procfile")
WATCHED_GLOBS = tuple(f"**/*{suffix}" for suffix in (*_WATCHED_SUFFIXES, *MARKDOWN_SUFFIXES)) + tuple(
    f"**/{name}" for name in _WATCHED_NAMES
)


# ---------------------------------------------------------------------------------------------------
# Related locations: the chain behind a finding, as data.


class RelatedLocation(NamedTuple):
    path: Path  # absolute
    row: int  # 1-based
    column: int  # 1-based, in characters
    end_row: int
    end_column: int  # 0 with end_row = row + 1: the whole line
    role: str  # "launch", "config", "import", "load" or "consumer"
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
# characters; the client counts columns in the encoding it negotiated (UTF-16 unless it said otherwise).


class Positions:
    def __init__(self, document: TextDocument, text: str) -> None:
        self.text = text
        self.starts = line_starts_of(text)
        self.count_units = document.position_codec.client_num_units

    def at_offset(self, offset: int) -> types.Position:
        row = max(bisect_right(self.starts, offset), 1) - 1
        return types.Position(row, self.count_units(self.text[self.starts[row] : offset]))

    def at(self, row: int, column: int) -> types.Position:
        """`row` and `column` 1-based, as a Finding has them."""
        if row - 1 >= len(self.starts):
            return types.Position(row - 1, 0)
        return self.at_offset(min(self.starts[row - 1] + column - 1, len(self.text)))

    def edit(self, edit: Edit) -> types.TextEdit:
        return types.TextEdit(types.Range(self.at_offset(edit.start), self.at_offset(edit.end)), edit.content)


# ---------------------------------------------------------------------------------------------------
# The server.


class Checked(NamedTuple):
    """The last check of an open document: the text it read and what it found there."""

    text: str
    findings: list[Finding]
    diagnostics: list[types.Diagnostic]


class PlacementLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.checked: dict[str, Checked] = {}

    def check_document(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        if not _is_python(document):
            return
        text = document.source
        findings, mistaken = self._findings(text, Path(document.path))
        positions = Positions(document, text)
        url_base = _rule_url_base(Path(document.path))
        diagnostics = [_diagnostic(finding, positions, url_base) for finding in findings]
        self.checked[uri] = Checked(text, findings, diagnostics)
        warned = [_suppression_diagnostic(warning, positions) for warning in mistaken]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics + warned)
        )

    def check_open_documents(self) -> None:
        for uri in list(self.workspace.text_documents):
            self.check_document(uri)

    def _findings(self, text: str, path: Path) -> tuple[list[Finding], list[SuppressionWarning]]:
        """The findings and the mistaken suppression comments, never an exception: an editor must not
        lose its server over one file."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                findings = check_source(text, path)
            except CheckError as exc:
                # Mostly text that does not parse yet, while the user types: a log line, not a popup.
                for message in exc.errors:
                    self.window_log_message(types.LogMessageParams(types.MessageType.Log, message))
                findings = list(exc.findings)
            except Exception as exc:  # a bug in a rule must not take the server down
                logging.getLogger(__name__).exception("checking %s failed", path)
                self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"{path}: {exc!r}"))
                return [], []
        mistaken = [warning.message for warning in caught if isinstance(warning.message, SuppressionWarning)]
        for warning in caught:
            if not isinstance(warning.message, SuppressionWarning):
                self.window_log_message(types.LogMessageParams(types.MessageType.Warning, str(warning.message)))
        return findings, mistaken


def _is_python(document: TextDocument) -> bool:
    return document.path is not None and (
        document.language_id == "python" or Path(document.path).suffix.lower() in PYTHON_SUFFIXES
    )


def _rule_url_base(path: Path) -> str | None:
    try:
        return settings_for(path, None, Path.cwd(), rule_codes()).rule_url_base
    except ConfigError:
        return None  # check_source reported it


def _diagnostic(finding: Finding, positions: Positions, url_base: str | None) -> types.Diagnostic:
    related = [
        types.DiagnosticRelatedInformation(
            location=types.Location(
                uri=location.path.as_uri(),
                range=types.Range(
                    types.Position(location.row - 1, location.column - 1),
                    types.Position(location.end_row - 1, max(location.end_column - 1, 0)),
                ),
            ),
            message=f"{location.role}: {location.message}",
        )
        for location in related_locations(finding)
    ]
    return types.Diagnostic(
        range=types.Range(positions.at(finding.row, finding.column), positions.at(finding.end_row, finding.end_column)),
        message=finding.message,
        severity=types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=page_url(finding.code, url_base)),
        source=SOURCE,
        related_information=related or None,
        tags=[types.DiagnosticTag.Unnecessary] if finding.code == "DPL100" else None,
    )


def _suppression_diagnostic(warning: SuppressionWarning, positions: Positions) -> types.Diagnostic:
    """A mistaken suppression comment, where it is: a warning, as the command line's."""
    return types.Diagnostic(
        range=types.Range(positions.at(warning.row, warning.column), positions.at(warning.end_row, warning.end_column)),
        message=str(warning),
        severity=types.DiagnosticSeverity.Warning,
        source=SOURCE,
    )


def code_actions(uri: str, checked: Checked, document: TextDocument, wanted: types.Range) -> list[types.CodeAction]:
    """For each finding on the lines of `wanted`: its fix (the safe one preferred; an unsafe one says
    so) and a noqa comment for its line."""
    positions = Positions(document, checked.text)
    actions: list[types.CodeAction] = []
    for finding, diagnostic in zip(checked.findings, checked.diagnostics, strict=True):
        if not _overlaps(diagnostic.range, wanted):
            continue
        fix = finding.violation.fix
        if fix is not None:
            title = f"{finding.code}: {fix.message}" + ("" if fix.safe else " (unsafe)")
            actions.append(_action(title, uri, [positions.edit(edit) for edit in fix.edits], diagnostic, preferred=fix.safe))
        noqa = _noqa_edits(document, checked.text, [(finding.code, finding.violation.start)])
        if noqa:
            title = f"{finding.code}: add `# noqa: {finding.code}` to this line"
            actions.append(_action(title, uri, [positions.edit(edit) for edit in noqa], diagnostic, preferred=False))
    return actions


def _action(title: str, uri: str, edits: list[types.TextEdit], diagnostic: types.Diagnostic, preferred: bool) -> types.CodeAction:
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=types.WorkspaceEdit(changes={uri: edits}),
        is_preferred=preferred or None,
    )


def _noqa_edits(document: TextDocument, text: str, findings: Iterable[tuple[str, int]]) -> list[Edit]:
    path = Path(document.path or "untitled.py")
    source = SourceFile(path, text.encode("utf-8", "surrogatepass"), text, "utf-8", False, line_starts_of(text))
    try:
        return noqa_edits(source, findings)
    except Exception:  # text that no longer parses gets no comment, not an error
        return []


def _overlaps(a: types.Range, b: types.Range) -> bool:
    """By lines: a cursor anywhere on a finding's line is asking about it (ruff's server does the same)."""
    return a.start.line <= b.end.line and b.start.line <= a.end.line


def _affects_launch_context(uri: str) -> bool:
    from placement_lint.context.launcher_names import launcher_name

    name = uri.rsplit("/", 1)[-1]
    return launcher_name(name) or os.path.splitext(name)[1].lower() in _WATCHED_SUFFIXES


def create_server() -> PlacementLintServer:
    server = PlacementLintServer()

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
        ls.check_open_documents()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PlacementLintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.checked.pop(uri, None) is not None:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: PlacementLintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(_affects_launch_context(change.uri) for change in params.changes):
            ls.check_open_documents()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix], resolve_provider=False),
    )
    def code_action(ls: PlacementLintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        checked = ls.checked.get(uri)
        if checked is None:
            return None
        document = ls.workspace.get_text_document(uri)
        if document.source != checked.text:
            ls.check_document(uri)  # the actions' offsets must be in the text the editor holds
            checked = ls.checked[uri]
        return code_actions(uri, checked, document, params.range) or None

    return server


def serve() -> None:
    """Run the server on stdin and stdout until the client asks it to exit."""
    create_server().start_io()
