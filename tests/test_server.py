"""`placement-lint server` end to end: the installed command, over stdio, driven by a real LSP client
(pytest-lsp), on repositories whose bug is visible only through a launch script (and an import)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp", reason="the editor server's tests need the test extra (pytest-lsp, pygls)")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

LAUNCH = Path(__file__).parent / "fixtures" / "launch"
# model_utils.py moves the model to the GPU; train.py imports it and hands it to SFTTrainer; run.sh
# launches train.py with an FSDP config. Nothing in model_utils.py says "distributed".
IMPORTED = LAUNCH / "bad_helper_module_model_to_trainer_fsdp"
# train.py loads with device_map="auto"; scripts/run_z3.sh launches it with a ZeRO-3 accelerate config.
LAUNCHED = LAUNCH / "bad_accelerate_config_zero3"
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "placement_lint", "server"])


def _repository(tmp_path: Path, source: Path) -> Path:
    repo = tmp_path / source.name
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("expected.txt"))
    (repo / ".git").mkdir()
    return repo


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    return _repository(tmp_path, IMPORTED)


@pytest.fixture
def launched(tmp_path: Path) -> Path:
    return _repository(tmp_path, LAUNCHED)


REGISTERED: list[types.Registration] = []


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path: Path):  # type: ignore[no-untyped-def]
    REGISTERED.clear()

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:  # as VS Code does: it watches the globs for the server
        REGISTERED.extend(params.registrations)

    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=tmp_path.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="repos")],
        )
    )
    yield
    await lsp_client.shutdown_session()


class Editor:
    """A client as a given editor sets it up: its capabilities (pytest-lsp's recordings), the position
    encodings it offers, the initialization options its configuration sends."""

    def __init__(self, name: str, encodings: list[str] | None = None, options: dict[str, object] | None = None) -> None:
        self.name, self.encodings, self.options = name, encodings, options
        self.encoding = "utf-16"  # negotiated at initialize

    def __repr__(self) -> str:
        return f"{self.name}{self.encodings or ''}{self.options or ''}"

    def capabilities(self) -> types.ClientCapabilities:
        capabilities = client_capabilities(self.name)
        if self.encodings is not None:
            capabilities.general = types.GeneralClientCapabilities(position_encodings=self.encodings)
        return capabilities


@pytest_lsp.fixture(config=SERVER)
async def editor(lsp_client: LanguageClient, tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    REGISTERED.clear()
    """A client set up as `request.param` (an Editor) says: parametrize with `indirect=True`; the
    Editor learns the encoding the server chose."""
    setup: Editor = request.param

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        REGISTERED.extend(params.registrations)

    result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=setup.capabilities(),
            root_uri=tmp_path.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="repos")],
            initialization_options=setup.options,
        )
    )
    setup.encoding = result.capabilities.position_encoding or "utf-16"
    yield
    await lsp_client.shutdown_session()


def _setup(request: pytest.FixtureRequest) -> Editor:
    """The Editor a test's `editor` client was set up as."""
    return request.node.callspec.params["editor"]


def _units(text: str, encoding: str) -> int:
    """How long `text` is in the code units of a position encoding."""
    return {"utf-8": len(text.encode("utf-8")), "utf-16": len(text.encode("utf-16-le")) // 2, "utf-32": len(text)}[encoding]


def _position(text: str, row: int, column: int, encoding: str) -> types.Position:
    """The position of 1-based `row` and `column` (in characters) of `text`, as the client counts it."""
    return types.Position(row - 1, _units(text.splitlines()[row - 1][: column - 1], encoding))


async def _open(client: LanguageClient, path: Path) -> list[types.Diagnostic]:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=path.as_uri(), language_id="python", version=1, text=path.read_text(encoding="utf-8"))
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return list(client.diagnostics[path.as_uri()])


async def _change(client: LanguageClient, path: Path, text: str, version: int) -> list[types.Diagnostic]:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=version),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return list(client.diagnostics[path.as_uri()])


def _apply(text: str, edits: list[types.TextEdit], encoding: str = "utf-16") -> str:
    """What an editor does with a code action's edits, their columns counted in `encoding`."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        if position.line == len(lines):
            return len(text)
        line, column = lines[position.line], 0
        while column < len(line) and _units(line[:column], encoding) < position.character:
            column += 1
        assert _units(line[:column], encoding) == position.character, "a position inside a character"
        return starts[position.line] + column

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


@pytest.mark.asyncio
async def test_a_finding_seen_through_a_launch_and_an_import_has_the_chain_and_actions(
    client: LanguageClient, imported: Path
) -> None:
    module = imported / "model_utils.py"
    [diagnostic] = await _open(client, module)
    assert diagnostic.code == "DPL006" and diagnostic.source == "placement-lint"
    assert diagnostic.range == types.Range(types.Position(6, 4), types.Position(6, 20))  # model.to("cuda")
    assert diagnostic.code_description.href.endswith("/rules/DPL006/")
    assert "FSDP" in diagnostic.message
    related = diagnostic.related_information
    assert [(Path(r.location.uri.removeprefix("file://")).name, r.location.range.start.line) for r in related] == [
        ("run.sh", 1),  # the launch line, 0-based
        ("fsdp.yaml", 0),  # the config line that makes it FSDP
        ("train.py", 3),  # the import
        ("train.py", 7),  # the importer's call into model_utils
        ("train.py", 9),  # the trainer that shards the model
    ]
    assert (
        related[0].message.startswith("launch: ") and "accelerate launch --config_file fsdp.yaml train.py" in related[0].message
    )
    assert related[2].message == "import: from model_utils import load_model"

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=module.as_uri()),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    titles = [action.title for action in actions]
    assert titles == ["DPL006: Remove the manual placement (unsafe)", "DPL006: add `# noqa: DPL006` to this line"]
    fix, noqa = actions
    assert fix.kind == types.CodeActionKind.QuickFix and not fix.is_preferred and list(fix.diagnostics) == [diagnostic]

    text = module.read_text(encoding="utf-8")
    suppressed = _apply(text, noqa.edit.changes[module.as_uri()])
    assert '    model.to("cuda")  # noqa: DPL006\n' in suppressed
    assert await _change(client, module, suppressed, 2) == []

    fixed = _apply(text, fix.edit.changes[module.as_uri()])
    assert 'model.to("cuda")' not in fixed
    assert await _change(client, module, fixed, 3) == []


@pytest.mark.asyncio
async def test_a_safe_fix_is_preferred_and_applying_it_clears_the_finding(client: LanguageClient, launched: Path) -> None:
    train = launched / "train.py"
    [diagnostic] = await _open(client, train)
    assert diagnostic.code == "DPL001" and diagnostic.range.start == types.Position(13, 91)
    launch = diagnostic.related_information[0]
    assert launch.location.uri == (launched / "scripts" / "run_z3.sh").as_uri() and launch.location.range.start.line == 3
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=train.as_uri()),
            range=types.Range(types.Position(13, 0), types.Position(13, 0)),  # the cursor on the line
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    fix = actions[0]
    assert not fix.title.endswith("(unsafe)") and fix.is_preferred
    fixed = _apply(train.read_text(encoding="utf-8"), fix.edit.changes[train.as_uri()])
    assert "device_map=None" in fixed
    assert await _change(client, train, fixed, 2) == []


@pytest.mark.asyncio
async def test_a_changed_launch_script_rechecks_the_open_files(client: LanguageClient, launched: Path) -> None:
    train = launched / "train.py"
    launcher = launched / "scripts" / "run_z3.sh"
    command = launcher.read_text(encoding="utf-8")
    launcher.write_text("#!/bin/bash\npython train.py --output_dir out\n", encoding="utf-8")  # one process: fine
    assert await _open(client, train) == []

    [registration] = REGISTERED
    assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    globs = {watcher["globPattern"] for watcher in registration.register_options["watchers"]}
    assert {"**/*.sh", "**/*.yaml", "**/*.json", "**/Makefile", "**/*.py", "**/*.md", "**/*.rst", "**/*.slurm"} <= globs

    launcher.write_text(command, encoding="utf-8")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(uri=launcher.as_uri(), type=types.FileChangeType.Changed)])
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [d.code for d in client.diagnostics[train.as_uri()]] == ["DPL001"]

    launcher.write_text("#!/bin/bash\npython train.py --output_dir out\n", encoding="utf-8")
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=launcher.as_uri())))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[train.as_uri()]) == []


@pytest.mark.asyncio
async def test_while_the_user_types_only_the_text_they_pause_on_is_checked(client: LanguageClient, imported: Path) -> None:
    module = imported / "model_utils.py"
    text = module.read_text(encoding="utf-8")
    assert len(await _open(client, module)) == 1
    for version, typed in ((2, text.replace('model.to("cuda")', "pass")), (3, text)):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=module.as_uri(), version=version),
                [types.TextDocumentContentChangeWholeDocument(text=typed)],
            )
        )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    # The first diagnostics after the burst are those of version 3, not of the clean version 2.
    assert [d.code for d in client.diagnostics[module.as_uri()]] == ["DPL006"]


@pytest.mark.asyncio
async def test_text_that_does_not_parse_gets_an_error_where_the_parser_stopped_and_the_server_carries_on(
    client: LanguageClient, launched: Path
) -> None:
    train = launched / "train.py"
    text = train.read_text(encoding="utf-8")
    train.write_text(text.replace("def main():", "def main(:"), encoding="utf-8")  # half-typed
    [error] = await _open(client, train)
    # As the command line says it (`error: train.py: cannot parse: line 11: invalid syntax`), at the ":".
    assert error.severity == types.DiagnosticSeverity.Error and error.source == "placement-lint" and error.code is None
    assert error.message == "cannot parse: line 11: invalid syntax"
    assert error.range == types.Range(types.Position(10, 9), types.Position(10, 10))
    assert [d.code for d in await _change(client, train, text, 2)] == ["DPL001"]
    # While the user types: the error replaces the findings, and goes once the text parses again.
    unclosed = text.replace('device_map="auto")', 'device_map="auto"')
    [error] = await _change(client, train, unclosed, 3)
    assert error.message == "cannot parse: line 14: '(' was never closed"
    assert error.range == types.Range(types.Position(13, 48), types.Position(13, 49))  # the "(" left open
    assert [d.code for d in await _change(client, train, text, 4)] == ["DPL001"]


@pytest.mark.asyncio
async def test_a_configuration_that_does_not_load_is_an_error_in_the_open_file(client: LanguageClient, launched: Path) -> None:
    # The command line checks nothing and exits 2: the editor must not look clean.
    settings = launched / "pyproject.toml"
    settings.write_text("[tool.placement-lint]\nselect = 5\n", encoding="utf-8")
    train = launched / "train.py"
    [error] = await _open(client, train)
    assert error.severity == types.DiagnosticSeverity.Error
    assert error.message == f"{settings}: [tool.placement-lint] select: expected a list of strings"
    assert error.range == types.Range(types.Position(0, 0), types.Position(1, 0))
    settings.write_text("[tool.placement-lint]\nselect = ['DPL']\n", encoding="utf-8")
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=settings.as_uri())))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [d.code for d in client.diagnostics[train.as_uri()]] == ["DPL001"]


@pytest.mark.asyncio
async def test_an_unknown_noqa_code_is_a_warning_at_its_place_and_the_findings_stay(
    client: LanguageClient, launched: Path
) -> None:
    train = launched / "train.py"
    train.write_text(train.read_text(encoding="utf-8") + "x = 1  # noqa: DPL999\n", encoding="utf-8")
    diagnostics = await _open(client, train)
    assert [d.code for d in diagnostics] == ["DPL001", None]
    warning = diagnostics[1]
    assert warning.severity == types.DiagnosticSeverity.Warning and warning.source == "placement-lint"
    assert warning.message.startswith("Invalid rule code provided to `# noqa` at ") and warning.message.endswith(": DPL999")
    row = len(train.read_text(encoding="utf-8").splitlines()) - 1
    assert warning.range == types.Range(types.Position(row, 15), types.Position(row, 21))
    # The code actions still belong to the findings alone: at the warning, only the file's fix-all.
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(train.as_uri()), warning.range, types.CodeActionContext(diagnostics=[warning])
        )
    )
    assert [action.kind for action in actions or []] == ["source.fixAll.placement-lint"]
    assert not any(action.diagnostics for action in actions or [])


def test_related_locations_name_in_file_evidence_as_the_config(tmp_path: Path) -> None:
    from placement_lint.api import check_source
    from placement_lint.server import related_locations

    (tmp_path / ".git").mkdir()
    script = tmp_path / "train_z3.py"
    text = (
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n\n"
        'args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})\n'
        'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")\n'
        "Trainer(model=model, args=args).train()\n"
    )
    [finding] = check_source(text, script)
    [config] = [location for location in related_locations(finding, tmp_path) if location.role == "config"]
    assert (config.path, config.row) == (script, 3)
    assert "TrainingArguments(deepspeed=" in config.message


# Editors as they offer position encodings: VS Code none (LSP's default, UTF-16), Neovim UTF-8 first,
# Emacs UTF-32 first (and it cannot resolve a code action's edit later: it gets them at once).
ENCODINGS = [
    Editor("visual-studio-code"),
    Editor("neovim"),
    Editor("emacs"),
    Editor("visual-studio-code", ["utf-16", "utf-8"]),
]


async def _fix_all(
    client: LanguageClient, uri: str, only: list[str] | None = None, resolve: bool = True
) -> list[types.CodeAction]:
    """The fixAll actions the server offers for a document, each with its edit (resolved, if the
    server left it for later as a client that can resolve allows, unless not `resolve`)."""
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(0, 0)),
            context=types.CodeActionContext(diagnostics=[], only=only),
        )
    )
    found = []
    for action in actions or []:
        if action.kind.startswith("source.fixAll") or action.kind.startswith("notebook.source.fixAll"):
            found.append(action if action.edit or not resolve else await client.code_action_resolve_async(action))
    return found


@pytest.mark.asyncio
@pytest.mark.parametrize("editor", ENCODINGS, indirect=True, ids=repr)
async def test_every_range_counts_columns_in_the_encoding_negotiated_at_initialize(
    editor: LanguageClient, request: pytest.FixtureRequest, launched: Path
) -> None:
    client, setup = editor, _setup(request)
    encoding = setup.encoding
    assert encoding == {"visual-studio-code": "utf-16", "neovim": "utf-8", "emacs": "utf-32"}[setup.name]
    # Astral characters (two UTF-16 units, four UTF-8 bytes) before every span the server sends.
    train, launcher = launched / "train.py", launched / "scripts" / "run_z3.sh"
    launcher.write_text(
        launcher.read_text(encoding="utf-8").replace("--output_dir out", '--output_dir "🚀🚀/out"'), encoding="utf-8"
    )
    text = (
        train.read_text(encoding="utf-8")
        .replace('device_map="auto"', 'revision="🤗🤗", device_map="auto"')
        .replace("    Trainer(", '    note = "🤗🤗"; Trainer(')
    )
    train.write_text(text, encoding="utf-8")
    launch_text = launcher.read_text(encoding="utf-8")
    row14, row15 = text.splitlines()[13], text.splitlines()[14]
    auto = row14.index('"auto"') + 1

    [diagnostic] = await _open(client, train)
    assert diagnostic.range == types.Range(
        _position(text, 14, auto, encoding), _position(text, 14, auto + len('"auto"'), encoding)
    )
    launch, *_, consumer = diagnostic.related_information
    assert launch.location.uri == launcher.as_uri()
    assert launch.location.range.end == _position(launch_text, 6, len(launch_text.splitlines()[5]) + 1, encoding)
    assert consumer.location.uri == train.as_uri() and consumer.message == "consumer: trained by Trainer"
    assert consumer.location.range.start == _position(text, 15, row15.index("Trainer") + 1, encoding)

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=train.as_uri()),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    fix, noqa, fix_all = actions
    fixed = _apply(text, fix.edit.changes[train.as_uri()], encoding)
    assert fixed == text.replace('device_map="auto"', "device_map=None")
    suppressed = _apply(text, noqa.edit.changes[train.as_uri()], encoding)
    assert suppressed == text.replace('device_map="auto")\n', 'device_map="auto")  # noqa: DPL001\n')
    [fix_all] = await _fix_all(client, train.as_uri(), ["source.fixAll"])
    assert _apply(text, fix_all.edit.changes[train.as_uri()], encoding) == fixed


@pytest.mark.asyncio
@pytest.mark.parametrize("editor", [Editor("visual-studio-code"), Editor("emacs")], indirect=True, ids=repr)
async def test_fix_all_applies_what_check_fix_applies(
    editor: LanguageClient, request: pytest.FixtureRequest, launched: Path
) -> None:
    from placement_lint.api import fix_source

    client, encoding = editor, _setup(request).encoding
    train = launched / "train.py"
    text = train.read_text(encoding="utf-8")
    await _open(client, train)
    # Offered to a request for any kind (the lightbulb), for `source`, `source.fixAll` (an editor's
    # fix-on-save) and its own kind; not to a request for quick fixes only.
    for only in (None, ["source"], ["source.fixAll"], ["source.fixAll.placement-lint"]):
        [action] = await _fix_all(client, train.as_uri(), only)
        assert action.kind == "source.fixAll.placement-lint" and action.title == "placement-lint: Fix all auto-fixable problems"
        assert _apply(text, action.edit.changes[train.as_uri()], encoding) == fix_source(text, train)[0]
    assert await _fix_all(client, train.as_uri(), ["quickfix"]) == []
    # A client that can resolve an action's edit gets it when the user picks the action (fixing
    # reads the launch context again); one that cannot gets it at once.
    [offered] = await _fix_all(client, train.as_uri(), ["source.fixAll"], resolve=False)
    assert (offered.edit is None) == (_setup(request).name == "visual-studio-code")
    fixed = _apply(text, action.edit.changes[train.as_uri()], encoding)
    assert await _change(client, train, fixed, 2) == []
    assert await _fix_all(client, train.as_uri(), ["source.fixAll"]) == []  # nothing left to fix


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "editor", [Editor("visual-studio-code"), Editor("visual-studio-code", options={"unsafeFixes": True})], indirect=True, ids=repr
)
async def test_fix_all_applies_unsafe_fixes_only_when_the_editor_asks_for_them(
    editor: LanguageClient, request: pytest.FixtureRequest, imported: Path
) -> None:
    module = imported / "model_utils.py"  # DPL006: only an unsafe fix (it removes the placement)
    text = module.read_text(encoding="utf-8")
    await _open(editor, module)
    actions = await _fix_all(editor, module.as_uri(), ["source.fixAll"])
    if _setup(request).options is None:  # as `check --fix`
        assert actions == []
    else:  # as `check --fix --unsafe-fixes`
        [action] = actions
        fixed = _apply(text, action.edit.changes[module.as_uri()])
        assert 'model.to("cuda")' not in fixed and await _change(editor, module, fixed, 2) == []


ZERO3_CELL = (
    "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n\n"
    'args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})\n'
    'model = AutoModelForCausalLM.from_pretrained("🤗🤗", device_map="auto")\n'
    "Trainer(model=model, args=args).train()"
)


async def _published(client: LanguageClient, uris: list[str]) -> list[list[types.Diagnostic]]:
    """The diagnostics of every one of `uris`, once each has been published (after they were cleared)."""

    async def arrived() -> None:
        while not all(uri in client.diagnostics for uri in uris):
            await asyncio.sleep(0.01)  # polled: several cells' diagnostics may come in one read

    await asyncio.wait_for(arrived(), 60)
    return [list(client.diagnostics[uri]) for uri in uris]


@pytest.mark.asyncio
async def test_a_notebook_is_checked_as_its_file_each_cell_with_its_own_diagnostics_and_actions(
    client: LanguageClient, tmp_path: Path
) -> None:
    from placement_lint.api import check_source

    repo = tmp_path / "notebooks"
    (repo / ".git").mkdir(parents=True)
    notebook = repo / "finetune.ipynb"
    sources = ["# Fine-tune on ZeRO-3", "!pip install transformers\nimport os", ZERO3_CELL]
    kinds = [types.NotebookCellKind.Markup, types.NotebookCellKind.Code, types.NotebookCellKind.Code]
    uris = [f"vscode-notebook-cell:{notebook}#cell{index}" for index in range(len(sources))]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[types.NotebookCell(kind=kind, document=uri) for kind, uri in zip(kinds, uris, strict=True)],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=uri, language_id="markdown" if index == 0 else "python", version=1, text=text)
                for index, (uri, text) in enumerate(zip(uris, sources, strict=True))
            ],
        )
    )
    markdown, shell, model = await _published(client, uris)
    assert markdown == [] and shell == []
    [finding] = model
    # Where the command line puts it (the cell's own rows), in UTF-16 units: the emoji count twice.
    nbformat = {
        "cells": [{"cell_type": "markdown", "source": sources[0]}] + [{"cell_type": "code", "source": s} for s in sources[1:]]
    }
    [expected] = check_source(json.dumps(nbformat), notebook)
    assert (finding.code, expected.cell) == ("DPL001", 3)
    line = ZERO3_CELL.splitlines()[3]
    assert finding.range.start == types.Position(expected.row - 1, _units(line[: expected.column - 1], "utf-16"))

    # Its quick fix and its noqa comment edit the cell's document.
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uris[2]),
            range=finding.range,
            context=types.CodeActionContext(diagnostics=[finding]),
        )
    )
    fix, noqa, fix_all = actions
    assert list(fix.edit.changes) == [uris[2]] and list(noqa.edit.changes) == [uris[2]]
    assert _apply(ZERO3_CELL, fix.edit.changes[uris[2]]) == ZERO3_CELL.replace('device_map="auto"', "device_map=None")
    assert _apply(ZERO3_CELL, noqa.edit.changes[uris[2]]).splitlines()[3].endswith('device_map="auto")  # noqa: DPL001')
    [fix_all] = await _fix_all(client, uris[2], ["notebook.source.fixAll"])
    assert fix_all.kind == "notebook.source.fixAll.placement-lint"
    assert _apply(ZERO3_CELL, fix_all.edit.changes[uris[2]]) == ZERO3_CELL.replace('device_map="auto"', "device_map=None")

    # A cell that does not parse is an error in that cell; the other cells are still checked.
    client.diagnostics.clear()
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=2, uri=notebook.as_uri()),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=uris[1], version=2),
                            changes=[types.TextDocumentContentChangeWholeDocument(text="!pip install transformers\ndef f(:")],
                        )
                    ]
                )
            ),
        )
    )
    _, [error], [still] = await _published(client, uris)
    assert error.severity == types.DiagnosticSeverity.Error
    assert error.message == "cannot parse: cell 2, line 2: invalid syntax"
    assert error.range == types.Range(types.Position(1, 6), types.Position(1, 7))
    assert still.code == "DPL001"

    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook.as_uri()),
            cell_text_documents=[types.TextDocumentIdentifier(uri=uri) for uri in uris],
        )
    )
    client.diagnostics.clear()
    assert await _published(client, uris) == [[], [], []]


DOCS = Path(__file__).parent.parent / "docs" / "editor.md"
README = Path(__file__).parent.parent / "README.md"
# The Neovim file type of each kind of file a launch context reads.
LAUNCH_FILETYPES = {"run.sh": "sh", "zero3.yaml": "yaml", "ds_config.json": "json", "Makefile": "make"}
LAUNCH_FILETYPES |= {"Dockerfile": "dockerfile", "README.md": "markdown", "pyproject.toml": "toml"}


def _neovim_filetypes(guide: Path) -> list[set[str]]:
    """The `filetypes` of each Neovim setup in a guide."""
    import re

    return [set(re.findall(r'"([\w-]+)"', found)) for found in re.findall(r"filetypes = \{([^}]*)\}", guide.read_text("utf-8"))]


@pytest.mark.parametrize("guide", [DOCS, README], ids=lambda path: path.name)
def test_the_neovim_setups_attach_the_server_to_launch_scripts_and_configs(guide: Path) -> None:
    setups = _neovim_filetypes(guide)
    assert len(setups) == 2 or guide == README  # Neovim 0.11+ and nvim-lspconfig's `configs`; the README may only link the guide
    for filetypes in setups:
        assert {"python", *LAUNCH_FILETYPES.values()} <= filetypes


@pytest.mark.asyncio
@pytest.mark.parametrize("editor", [Editor("neovim")], indirect=True, ids=repr)
async def test_an_editor_that_watches_no_files_hears_of_a_launch_script_when_it_is_saved(
    editor: LanguageClient, launched: Path
) -> None:
    # Neovim on Linux (pytest-lsp's recording) lets no server register file watchers: as its setup
    # in the guide attaches the server to shell scripts, it tells of their saves.
    assert REGISTERED == []
    filetype = "sh"
    assert filetype in _neovim_filetypes(DOCS)[0]
    train, launcher = launched / "train.py", launched / "scripts" / "run_z3.sh"
    assert [d.code for d in await _open(editor, train)] == ["DPL001"]
    editor.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(
                uri=launcher.as_uri(), language_id=filetype, version=1, text=launcher.read_text(encoding="utf-8")
            )
        )
    )
    single_process = "#!/bin/bash\npython train.py --output_dir out\n"
    editor.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=launcher.as_uri(), version=2),
            [types.TextDocumentContentChangeWholeDocument(text=single_process)],
        )
    )
    launcher.write_text(single_process, encoding="utf-8")  # what `:w` does
    editor.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=launcher.as_uri())))
    await editor.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(editor.diagnostics[train.as_uri()]) == []
    assert launcher.as_uri() not in editor.diagnostics  # a launch script is heard of, not checked


def test_a_warning_about_the_document_is_a_warning_diagnostic_on_the_line_it_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As the command line prints a warning about a file (`warning: train.py: line 2: ...`), the
    editor shows it on that line; a warning about another file (a config) goes to the log."""
    import warnings

    from placement_lint import server

    script = tmp_path / "train.py"
    text = "import torch\nx = 1  # noqa: DPL999\n"

    def check_source(text: str, path: Path) -> list[object]:
        warnings.warn(f"{path}: line 2: unknown rule code DPL999 in noqa", RuntimeWarning, stacklevel=1)
        warnings.warn("configs/ds.json: cannot parse config: expected ',' (line 3)", RuntimeWarning, stacklevel=1)
        return []

    monkeypatch.setattr(server, "check_source", check_source)
    ls = server.PlacementLintServer()
    logged: list[types.LogMessageParams] = []
    monkeypatch.setattr(ls, "window_log_message", logged.append)
    outcome = ls._check(text, script)
    assert outcome.problems == [
        server.Reported(types.DiagnosticSeverity.Warning, "line 2: unknown rule code DPL999 in noqa", True)
    ]
    assert [params.message for params in logged] == ["configs/ds.json: cannot parse config: expected ',' (line 3)"]
    [reported] = outcome.problems
    message = reported.message
    problem = server.document_problem(reported, text)
    diagnostic = server._problem_diagnostic(problem, server.Positions(text, len))
    assert diagnostic.severity == types.DiagnosticSeverity.Warning and diagnostic.message == message
    assert diagnostic.range == types.Range(types.Position(1, 0), types.Position(2, 0))  # the whole line


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('m = load("🤗", device_map="auto")\r\nx = 1\r\n', 'm = load("🤗", device_map=None)\r\nx = 1\r\n'),
        ("a = 1\r\nb = 2\r\n", "a = 1\r\nimport os\r\nb = 2\r\n"),  # an insertion between \r and \n would split them
        ("a = 1\r\n", "a = 1\r\n\r\n"),
        ("a = 1\r\nb\r\n", "a = 1\nb\r\n"),  # a removed \r: the edit would end between \r and \n
        ("a\r\nb\r\n", "a\r\r\nb\r\n"),  # an added \r: it would start there
        ("x = 1\n", "import os\nx = 1\n"),
        ("", "x = 1\n"),
    ],
)
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_fix_all_replaces_only_what_changed_and_never_splits_a_line_break(old: str, new: str, encoding: str) -> None:
    from placement_lint.server import Positions

    edit = Positions(old, lambda text: _units(text, encoding)).replacing(new)
    assert _apply(old, [edit], encoding) == new
    for position in (edit.range.start, edit.range.end):  # never inside a \r\n
        lines = old.splitlines(keepends=True)
        assert position.line >= len(lines) or _units(lines[position.line].rstrip("\r\n"), encoding) >= position.character
    assert len(edit.new_text) <= abs(len(new) - len(old)) + len("None")  # not the whole text
