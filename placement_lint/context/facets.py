"""What a launch context takes from a module for the module's own entries, as one digest: its facet.

A launch context is built from every module a launch reaches; most of what it reads of one (the
bodies of its functions: the names they use of the modules it imports, what they do with what those
return, the literals they pass) decides only the entries of the modules it imports, directly or not.
What decides the module's own entries, or those of modules beside it, is small: its import
statements (where its imports and re-exports lead, the folders it adds to `sys.path`), whether it
holds an anchor token, its outline (top-level names, signatures and defaults, class bases, dataclass
fields, the code outside functions), the names its recorded functions rebind, the attribute names
it reads (which parser fields it carries), and for a launched script its parser's fields, whether
it reads an arguments file, which of its options it hands DeepSpeed as the config, and which
sections of a file it loads it hands its training arguments.

So a file edited since the context was built (a pre-commit run after changing one training script)
leaves the cached context good for itself when its facet is unchanged, and no file checked in the
run imports it, directly or not: then the run reuses the context instead of building it again.
The facet is computed at build time from the trees the build parsed, and again at load time from the
edited file alone (one parse); both go through `facet`, so they agree on an unchanged file.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.context.launch_files import MAX_LAUNCHER_BYTES
from placement_lint.source import content_hash

if TYPE_CHECKING:
    from placement_lint.context.module_graph import ModuleGraph, ModuleSummary
    from placement_lint.context.propagation import ParserReads


class Role:
    """What the context asked of a module beyond its outline (JSON: a list, as stored)."""

    __slots__ = ("functions", "carries", "launched", "parsers")

    def __init__(
        self, functions: Sequence[str] = (), carries: bool = False, launched: bool = False, parsers: Sequence[str] = ()
    ) -> None:
        self.functions = sorted(functions)  # top-level functions whose calls the context recorded
        self.carries = carries  # it carries a launched script's parser fields: its attribute names decide which
        self.launched = launched  # launched: its own parser and arguments file count
        self.parsers = list(parsers)  # a launched script's modules that define its parser, in the order read

    def to_json(self) -> list[object]:
        return [self.functions, self.carries, self.launched, self.parsers]

    @classmethod
    def from_json(cls, data: list[object]) -> Role:
        functions, carries, launched, parsers = data
        if not (isinstance(functions, list) and isinstance(parsers, list)):
            raise TypeError("damaged role")
        return cls([str(f) for f in functions], bool(carries), bool(launched), [str(p) for p in parsers])


def facet(
    raw: bytes,
    tree: ast.Module,
    role: Role,
    anchored: bool,
    summary: ModuleSummary,
    sys_path: Sequence[Path],
    text_imports: str,
    attributes: Iterable[str] | None = None,
    parser_table: object = None,
) -> str:
    """The digest of what the context takes from this module for itself, and of what it passes on to
    the modules it imports (which, and the names it uses of each). `summary`: the module's (its import
    statements, in functions too, and the names its definitions read); `text_imports`: what its import lines say read as text
    (module_graph.text_import_lines); `attributes`: its attribute names, when it carries parser fields;
    `parser_table`: a launched script's parser fields."""
    from placement_lint.analysis.dataflow import rebound_names  # only when a facet is worked out
    from placement_lint.context.script_defaults import handed_configs, sections_for_facet

    if not _cut_by_lines(raw):
        return content_hash(raw)  # its tree's columns do not count these bytes: any change counts
    text = _Text(raw)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    rebound = [sorted(rebound_names(functions[name])) if name in functions else None for name in role.functions]
    parts = (
        text_imports,
        anchored,
        [str(path) for path in sys_path],
        [text.of(node) for node in summary.imports_],
        _uses(summary),
        text.outline(tree.body),
        rebound,
        sorted(attributes) if role.carries and attributes is not None else None,
        # Read for a launched script's parser if it may define one (propagation._parser_module).
        (b"dataclass" in raw or b"add_argument" in raw, len(raw) <= MAX_LAUNCHER_BYTES),
        (b"parse_json_file" in raw, b"parse_yaml_file" in raw, repr(parser_table)) if role.launched else None,
        # The options whose value a launched script hands DeepSpeed as its config (`--ds_file`): set in its functions.
        handed_configs(raw, tree) if role.launched else None,
        # The sections of a file it loads that a launched script hands its training arguments (`**config["training_args"]`).
        sections_for_facet(raw, tree) if role.launched else None,
    )
    return content_hash(repr(parts).encode("utf-8", "surrogateescape"))


def _uses(summary: ModuleSummary) -> tuple[object, ...]:
    """What decides the names the module uses of each module it imports (ModuleSummary.imports): the
    names its definitions read that are imported, defined or registries, the attributes read off its
    imported names, and what its registry readers take out: not the rest of its functions' bodies."""
    bound = {alias.asname or alias.name for node in summary.imports_ for alias in node.names}
    relevant = bound | {name.split(".")[0] for name in bound} | summary.defined | summary.registries
    by_definition = sorted((d, sorted(names & relevant)) for d, names in summary.names_by_definition.items())
    attributes = sorted((head, sorted(read)) for head, read in summary.attributes.items() if head in bound)
    readers = sorted(
        (d, sorted(summary.looked_up(d))) for d, names in summary.names_by_definition.items() if names & summary.registries
    )
    return by_definition, sorted(summary.all_names & relevant), sorted(summary.registries), attributes, readers


def _cut_by_lines(raw: bytes) -> bool:
    """Whether the tree's positions are lines cut at b"\\n" and UTF-8 columns of these very bytes: not
    after a BOM, in another encoding, or with a lone carriage return (a line break to Python)."""
    if raw.startswith(b"\xef\xbb\xbf") or raw.count(b"\r") != raw.count(b"\r\n"):
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _Text:
    """A module's bytes, cut where its tree says (ast's columns count UTF-8 bytes, as the slices do)."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.lines = [0, *itertools.accumulate(map(len, raw.splitlines(keepends=True)))]

    def _offset(self, line: int, column: int) -> int:
        return self.lines[line - 1] + column

    def of(self, node: ast.AST) -> bytes:
        return self.raw[self._offset(node.lineno, node.col_offset) : self._offset(node.end_lineno, node.end_col_offset)]  # type: ignore[attr-defined, arg-type]

    def outline(self, body: list[ast.stmt]) -> list[bytes]:
        """The statements' text, each function's body left out (its decorators, signature and defaults
        stay) and each class's methods alike: what the module defines and runs at the top level, and
        its classes' fields. Text, not positions: lines added inside a function move nothing here,
        and a comment between statements is no statement's."""
        pieces: list[bytes] = []
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                pieces += [self.of(decorator) for decorator in statement.decorator_list]
                first = statement.body[0]
                head = self.raw[
                    self._offset(statement.lineno, statement.col_offset) : self._offset(first.lineno, first.col_offset)
                ]
                pieces.append(head)
                if isinstance(statement, ast.ClassDef):
                    pieces.append(b"{")
                    pieces += self.outline(statement.body)
                    pieces.append(b"}")
            else:
                pieces.append(self.of(statement))
        return pieces


def feeds_of(graph: ModuleGraph, edges: Mapping[Path, set[Path]]) -> dict[str, list[str]]:
    """Per importer, the modules its calls' returned values and literals were filed under (each module
    of a re-export chain: graph.definitions): the entries its functions' bodies decide beyond its facet
    (what it passes on along the propagation's edges is in the facet). The summaries and definitions
    asked here were worked out by the build already."""
    feeds: dict[str, list[str]] = {}
    for importer, targets in edges.items():
        summary = graph.summary(importer)
        if summary is None:
            continue
        fed: set[Path] = set()
        for target, by_name in summary.calls_into().items():
            if target in targets:
                for name in by_name:
                    fed.update(module for module, _ in graph.definitions(target, name))
        if fed:
            feeds[str(importer)] = sorted(map(str, fed))
    return feeds


def descendants(starts: Iterable[str], imports_of: Mapping[str, Sequence[str]]) -> set[str]:
    """The modules whose entries the `starts`' calls went into (`imports_of`: feeds_of), directly or
    through others (a start too, when a chain leads back to it): those whose entries a start's
    function bodies can change."""
    found: set[str] = set()
    pending = [target for start in starts for target in imports_of.get(start, ())]
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending.extend(imports_of.get(name, ()))
    return found


def facets_of(
    graph: ModuleGraph,
    launched: Iterable[Path],
    calls: Mapping[Path, Mapping[str, object]],
    reads: ParserReads,
    hard: set[Path],
    read_whole: Iterable[Path] = (),
    root: Path | None = None,
) -> dict[str, list[object]]:
    """For each module the build summarized, but not those in `hard` (read for what the facet does not
    hold: a parser module, a launch file), its facet and role, as stored; and for each launched script
    in `read_whole` the build did not summarize (it imports nothing of the repository, yet its text
    decided its launches' setup: ConfigReader.scripts), its facet as a later load works it out."""
    from placement_lint.context.module_graph import text_import_lines

    scripts = set(launched)
    found: dict[str, list[object]] = {}
    for path, raw, summary, anchored, sys_path in graph.summarized():
        if path in hard:
            continue
        role = Role(
            list(calls.get(path, {})),
            path in reads.attributes,
            path in scripts,
            [str(parser) for parser in reads.parsers.get(path, ())],
        )
        digest = facet(
            raw,
            summary.module,
            role,
            anchored,
            summary,
            sys_path,
            text_import_lines(raw),
            reads.attributes.get(path),
            reads.tables.get(path, ()),
        )
        found[str(path)] = [digest, role.to_json()]
    for path in read_whole:
        if str(path) in found or path in hard or root is None:
            continue
        role = Role(list(calls.get(path, {})), path in reads.attributes, True, [str(p) for p in reads.parsers.get(path, ())])
        now = facet_now(path, role.to_json(), root, graph.anchors or ())
        if now is not None:
            found[str(path)] = [now, role.to_json()]
    return found


def facet_now(path: Path, stored_role: list[object], root: Path, anchors: tuple[bytes, ...]) -> str | None:
    """The facet of the file at `path` as it is now, worked out as the build did (one parse); None
    when it cannot be (unreadable, too large, no longer parses: the context is built again)."""
    from placement_lint.analysis.arguments import parser_fields
    from placement_lint.context.module_graph import _MAX_MODULE_BYTES, ModuleSummary, sys_path_additions, text_import_lines
    from placement_lint.context.propagation import _attribute_names

    try:
        role = Role.from_json(stored_role)
        raw = path.read_bytes()
        if len(raw) > _MAX_MODULE_BYTES:
            return None
        tree = ast.parse(raw)
        table: object = ()
        if role.launched:
            imported = [ast.parse(Path(parser).read_bytes()) for parser in role.parsers]
            table = tuple((key, *field) for key, field in parser_fields(tree, imported).items())
    except (OSError, ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    summary = ModuleSummary.of(path, tree, None)  # type: ignore[arg-type]  # its imports only: no lookup
    return facet(
        raw,
        tree,
        role,
        any(token in raw for token in anchors),
        summary,
        sys_path_additions(raw, path, root),
        text_import_lines(raw),
        _attribute_names(path, raw) if role.carries else None,
        table,
    )
