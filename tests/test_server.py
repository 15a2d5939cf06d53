"""`placement-lint server` end to end: the installed command, over stdio, driven by a real LSP client
(pytest-lsp), on repositories whose bug is visible only through a launch script (and an import)."""

from __future__ import annotations

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


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """What an editor does with a code action's edits (UTF-16 columns; these texts are ASCII)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return starts[position.line] + position.character

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
    assert diagnostic.code_description.href.endswith("/rules/DPL006.md")
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
    assert {"**/*.sh", "**/*.yaml", "**/*.json", "**/Makefile", "**/*.py"} <= globs

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
async def test_text_that_does_not_parse_gets_no_diagnostics_and_the_server_carries_on(
    client: LanguageClient, launched: Path
) -> None:
    train = launched / "train.py"
    text = train.read_text(encoding="utf-8")
    train.write_text(text.replace("def main():", "def main(:"), encoding="utf-8")  # half-typed
    assert await _open(client, train) == []
    assert [d.code for d in await _change(client, train, text, 2)] == ["DPL001"]


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
    # The code actions still belong to the findings alone.
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(train.as_uri()), warning.range, types.CodeActionContext(diagnostics=[warning])
        )
    )
    assert not actions


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
