"""A finding's path as data: the launch that runs the script, the config (or the in-file evidence) that
makes the run distributed, the imports that lead to the flagged module, the load, and what trains the
model; each a located span with a role, and each told in one labelled note.

Built only for a finding, from evidence the context already holds; the lines it quotes (a launch
script's, a config's, an importer's) are read once each, and a file that cannot be read gives a span
without a line (row 0), never an error.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING

from placement_lint.analysis.consumers import Consumer
from placement_lint.context.evidence import Context, Evidence
from placement_lint.rules.spans import Note, Related
from placement_lint.source import displayed_path, quoted_lines

if TYPE_CHECKING:
    from placement_lint.rules.checked_file import CheckedFile

COMMAND_LIMIT = 72  # a launch command in a note, shortened
# The keys that make a config distributed, most telling first: accelerate YAML, recipe YAML, DeepSpeed JSON.
_CONFIG_KEYS = (
    "distributed_type",
    "deepspeed_config_file",
    "zero_stage",
    "deepspeed",
    "fsdp",
    "fsdp_config",
    "stage",
)
_IMPORT = re.compile(r"^\s*(?:from\s+[\w.]+\s+import\b|import\s)")


class _Lines:
    """The lines of the files one finding quotes, read once each. The checked file itself is its source."""

    def __init__(self, file: CheckedFile) -> None:
        self.file = file
        self._read: dict[str, list[str] | None] = {}

    def of(self, display: str) -> list[str] | None:
        if display not in self._read:
            self._read[display] = quoted_lines(displayed_path(display, self.file.cwd))
        return self._read[display]

    def line(self, display: str, row: int) -> str | None:
        if display == self.file.display:  # the checked file: its decoded source (a notebook's joined cells)
            source = self.file.source
            return source.line(row) if 1 <= row <= source.line_count else None
        found = self.of(display)
        return found[row - 1] if found is not None and 1 <= row <= len(found) else None

    def span(self, role: str, display: str, row: int, message: str) -> Related:
        """The line's text from its first non-blank character, or the file alone when the line cannot be read."""
        line = self.line(display, row)
        if line is None:
            return Related(role, display, 0, 0, 0, 0, message)
        text = line.rstrip().removesuffix("\\").rstrip()  # a shell line continuation is not the command
        start = len(text) - len(text.lstrip())
        return Related(role, display, row, start + 1, row, max(start + 1, len(text)) + 1, message)


def path_of(
    file: CheckedFile,
    context: Context | None,
    primary: Related,
    consumers: Iterable[Consumer] = (),
    loads: Sequence[tuple[Related, str]] = (),
) -> tuple[tuple[Related, ...], tuple[Note, ...]]:
    """The spans in data-flow order (the flagged one included) and the notes that tell them. `loads`:
    the loads the flagged value reaches when it is written apart from them, each with its callee as written."""
    lines = _Lines(file)
    spans: list[Related] = []
    notes: list[Note] = []
    deciding = context.deciding if context is not None and context.override is None else []
    if context is not None and context.override is not None:
        notes.append(Note("set by", context.override.source))
    if deciding:
        first = deciding[0]
        if first.origin == "file":
            span = lines.span("config", first.path, first.line, first.text)
            spans.append(span)
            notes.append(Note("set up by", f"{first.text}, {span.where if first.path != file.display else _row(first)}"))
        else:
            _launch(lines, first, spans, notes)
        others = [f"{e.text}, {_row(e)}" if e.origin == "file" and e.path == file.display else e.where for e in deciding[1:4]]
        if others:
            more = f" and {len(deciding) - 4} more" if len(deciding) > 4 else ""
            notes.append(Note("also", f"{', '.join(others)}{more}"))
    spans.append(primary)
    if loads:
        spans += (span for span, _ in loads)
        notes.append(Note("loaded by", _loads_text(loads)))
    _consumer(file, lines, list(consumers), spans, notes)
    return tuple(spans), tuple(notes)


def _loads_text(loads: Sequence[tuple[Related, str]]) -> str:
    """`AutoModel.from_pretrained at line 7 and line 9, pipeline at line 12`: each row spelt `line N`,
    which a notebook's findings rewrite as its cell and row."""
    rows: dict[str, list[str]] = {}
    for span, callee in loads:
        rows.setdefault(callee, []).append(f"line {span.row}")
    return ", ".join(
        f"{callee} at {found[0]}" if len(found) == 1 else f"{callee} at {', '.join(found[:-1])} and {found[-1]}"
        for callee, found in rows.items()
    )


def _row(evidence: Evidence) -> str:
    return f"line {evidence.line}" if evidence.cell is None else f"cell {evidence.cell}, line {evidence.line}"


def _launch(lines: _Lines, evidence: Evidence, spans: list[Related], notes: list[Note]) -> None:
    command, details = launch_parts(evidence)
    if evidence.cell is not None:  # a notebook's shell escape: its line is in a cell, not in the file's JSON
        launch = Related("launch", evidence.path, evidence.line, 1, evidence.line, 1, command, evidence.cell)
    else:
        launch = _continued(lines, lines.span("launch", evidence.path, evidence.line, command))
    spans.append(launch)
    shown = command if len(command) <= COMMAND_LIMIT else command[: COMMAND_LIMIT - 3] + "..."
    configs = [_configs(lines, name) for name in evidence.configs]
    # What the config notes below show (`distributed_type DEEPSPEED`) is not said twice; the rest is
    # (a launcher's default, the shipped config it stands for, a console script, a nested project).
    said = [part for part in _parts(details) if not (configs and part.startswith(_CONFIG_PARTS))]
    if said and details not in command:
        shown += f" ({', '.join(said)})"
    notes.append(Note("launched by", f"{launch.where} {shown}"))
    for first, *more in configs:
        spans += (first, *more)
        also = "".join(f"; {span.where} {span.message}" for span in more)
        notes.append(Note("config", f"{first.where} {first.message}{also}" if first.row else first.path))
    chain = evidence.chain
    for position in range(len(chain) - 2, -1, -1):  # from the launched script down to the flagged module
        importer, imported = chain[position + 1], chain[position]
        span = _import(lines, importer, imported)
        spans.append(span)
        notes.append(Note("imported by", f"{span.where} {span.message}" if span.row else f"{importer} (imports {imported})"))
        call = _helper_call(lines, span, _module_name(imported)) if span.row else None
        if call is not None:
            spans.append(call)


_CONFIG_PARTS = ("distributed_type ", "zero_stage ", "--deepspeed ", "--fsdp", "--config")


def _parts(details: str) -> list[str]:
    """A launch's details split at its top-level commas: `a (b, c), d` is `a (b, c)` and `d`."""
    parts: list[str] = []
    depth = start = 0
    for index, char in enumerate(details):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(details[start:index].strip())
            start = index + 1
    parts.append(details[start:].strip())
    return [part for part in parts if part]


CONTINUATION_LIMIT = 8  # lines of one command a frame shows


def _continued(lines: _Lines, span: Related) -> Related:
    """A command continued over several lines (`accelerate launch ... \\`) spans them all, so its frame
    shows the script it runs and the arguments that matter."""
    row = span.row
    while row and row - span.row < CONTINUATION_LIMIT:
        line = lines.line(span.path, row)
        following = lines.line(span.path, row + 1)
        if line is None or following is None or not line.rstrip().endswith("\\") or not following.strip():
            break
        row += 1
    if row == span.row:
        return span
    last = (lines.line(span.path, row) or "").rstrip().removesuffix("\\").rstrip()
    return span._replace(end_row=row, end_column=len(last) + 1)


def launch_parts(evidence: Evidence) -> tuple[str, str]:
    """A launch's command and what it says of the setup, from its text: `run.sh:3 (cmd), details`."""
    prefix = f"{evidence.where} ("
    text = evidence.text
    if not text.startswith(prefix):
        return text, ""
    rest = text[len(prefix) :]
    split = rest.find("), ")  # the first: the details name launchers in parentheses of their own
    if split >= 0:
        return rest[:split], rest[split + 3 :]
    return rest.removesuffix(")"), ""


_STAGE_KEYS = ("zero_stage", "stage")


def _configs(lines: _Lines, display: str) -> list[Related]:
    """The line of a config that makes the run distributed (`distributed_type: DEEPSPEED`), and the
    line with its ZeRO stage when that is another (`zero_stage: 3`, `"stage": 3`); each span starts at
    its key, so a one-line JSON config points at the key too."""
    found = lines.of(display)
    spans: list[Related] = []
    for keys in (_CONFIG_KEYS, _STAGE_KEYS) if found is not None else ():
        for key in keys:
            span = _key_span(found, display, key)  # type: ignore[arg-type]
            if span is not None:
                if not any(known.row == span.row for known in spans):
                    spans.append(span)
                break
    return spans or [lines.span("config", display, 0, "")]


def _key_span(found: list[str], display: str, key: str) -> Related | None:
    """`key: value` (YAML) or `"key": value` (JSON, where several may share a line), as written."""
    pattern = re.compile(rf'(?:^|(?<=[{{,\s]))"?{key}"?\s*:(?:\s*("[^"]*"|[^,}}\s#]+))?')
    for row, line in enumerate(found, 1):
        if line.lstrip().startswith("#"):
            continue
        match = pattern.search(line)
        if match:
            text = match.group()
            shown = text if len(text) <= COMMAND_LIMIT else text[: COMMAND_LIMIT - 3] + "..."
            return Related("config", display, row, match.start() + 1, row, match.end() + 1, shown)
    return None


def _module_name(display: str) -> str:
    path = PurePath(display)
    return path.parent.name if path.stem == "__init__" else path.stem


def _import(lines: _Lines, importer: str, imported: str) -> Related:
    """The import statement in `importer` that names `imported`'s module."""
    name = _module_name(imported)
    word = re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")
    for row, line in enumerate(lines.of(importer) or (), 1):
        if _IMPORT.match(line) and word.search(line):
            return lines.span("import", importer, row, line.strip())
    return lines.span("import", importer, 0, f"imports {imported}")


def _helper_call(lines: _Lines, imported_at: Related, module: str) -> Related | None:
    """The importer's first call into what the import brings in (`model = load_model(...)` after
    `from model_utils import load_model`): where the model comes back from the flagged module."""
    try:
        statement = ast.parse(imported_at.message).body[0]
    except (SyntaxError, ValueError, IndexError):
        return None  # an import over several lines: its line is enough
    if isinstance(statement, ast.ImportFrom):
        brought = [a.asname or a.name for a in statement.names if a.name != "*"]
        # `from pkg import module`: calls go through the module's name; `from module import f`: through f.
        patterns = [rf"{re.escape(name)}\.\w+" if name == module else re.escape(name) for name in brought]
    elif isinstance(statement, ast.Import):
        patterns = [rf"{re.escape(a.asname or a.name)}\.\w+" for a in statement.names]
    else:
        return None
    if not patterns:
        return None
    call = re.compile(rf"(?<![\w.])(?:{'|'.join(patterns)})(?=\s*\()")
    found = lines.of(imported_at.path) if imported_at.path != lines.file.display else None
    for row, line in enumerate(found or (), 1):
        if row <= imported_at.row or line.lstrip().startswith("#"):
            continue
        match = call.search(line)
        if match:
            return Related("helper", imported_at.path, row, match.start() + 1, row, match.end() + 1, f"calls {match.group()}")
    return None


def _consumer(file: CheckedFile, lines: _Lines, consumers: list[Consumer], spans: list[Related], notes: list[Note]) -> None:
    if not consumers:
        return
    training = [c for c in consumers if c.trains]
    chosen = (training or consumers)[0]
    label = "trained by" if chosen.trains else "used by"
    message = f"{label} {chosen.name}"
    if chosen.node is not None:
        node = chosen.node.func if isinstance(chosen.node, ast.Call) else chosen.node
        start, end = file.source.node_span(node)
        row, column = file.source.position(start)  # rows of a notebook's joined cells, as the rules count
        end_row, end_column = file.source.position(end)
        spans.append(Related("consumer", file.display, row, column, end_row, end_column, message))
        notes.append(Note(label, f"{chosen.name} at line {row}"))
        return
    where = chosen.location or ""
    path, _, line = where.rpartition(":")
    if not path or not line.isdigit():
        notes.append(Note(label, f"{chosen.name} in {where or 'another file'}"))
        return
    span = lines.span("consumer", path, int(line), message)
    text = lines.line(path, int(line)) or ""
    for written in (chosen.name, chosen.name.rsplit(".", 1)[-1]):  # the callee, as a consumer in this file is shown
        at = text.find(written) if span.row else -1
        if at >= 0:
            span = span._replace(column=at + 1, end_column=at + len(written) + 1)
            break
    spans.append(span)
    notes.append(Note(label, f"{chosen.name} at {where}"))
