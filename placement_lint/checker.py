"""Checking one file the pre-check let through (precheck.py): parse, context, rules and fixes.
Imported only by a run with such a file: it brings in the analyses."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

# Every check makes a placement analysis, which the rules import only as they check (the pre-check
# imports every rule): imported with the checker, so forked workers share it, not import it each.
import placement_lint.analysis.placements  # noqa: F401
from placement_lint.analysis.arguments import LIBRARY_FIELDS, parser_fields
from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.index import index_of, release_index
from placement_lint.analysis.names import ImportTable
from placement_lint.context.classes import ImportedClasses
from placement_lint.context.configs import ConfigReader
from placement_lint.context.evidence import FileContext, Override
from placement_lint.context.helpers import ImportedFunctions
from placement_lint.context.in_file import InFileEvidence, PragmaError, pragma_override
from placement_lint.context.launches import Launches
from placement_lint.context.module_graph import ModuleGraph
from placement_lint.decode import read_source
from placement_lint.discover import gitignore_spec, real_path, repository_root
from placement_lint.distributed import NAMED_SETUPS, Mode, Setup
from placement_lint.precheck import PreCheck
from placement_lint.process import collect_after_check
from placement_lint.results import FileResult, PlacedWarning, RunOptions, Screened, finding_at, violations_in_cells
from placement_lint.rules import noqa
from placement_lint.rules.base import CheckedFile, Violation
from placement_lint.scan import Present
from placement_lint.settings import Settings
from placement_lint.source import ParseError, SourceError, SourceFile, is_notebook, parse_python

if TYPE_CHECKING:
    from placement_lint.notebook import NotebookSource

_POSSIBLE = Setup(Mode.POSSIBLE)


class FileChecker(PreCheck):
    """The pre-check, then parse, context, rules and fixes for one file; picklable, so worker
    processes can use it."""

    def __init__(self, settings: Settings, options: RunOptions, cwd: Path, launches: Launches | None = None) -> None:
        super().__init__(settings, options, cwd, launches)
        self._configs_read: list[Path] = []  # the configs the last file's in-file evidence looked at
        self._classes: ImportedClasses | None = None  # the last file's: the modules it read are dependencies
        self._helpers: ImportedFunctions | None = None  # likewise, for the helper functions it follows
        # Per repository root: its module graph, which the class lookups of every file checked here share
        # (the launch context's, when it built one, with the modules it read).
        self._graphs: dict[Path, ModuleGraph] = {}  # by resolved root
        self._roots: dict[str, Path] = {}
        # The last file's mistaken suppression comments, by the text they were read in (a fix checks
        # each fixed text again: the warnings are the final text's).
        self._directive_problems: dict[str, tuple[noqa.DirectiveProblem, ...]] = {}
        self._per_file_ignores = [(gitignore_spec([pattern]), codes) for pattern, codes in settings.per_file_ignores]
        # Set in pool workers: a fixed file is handed back to be written by the run's process, so an
        # interrupt, which kills the workers, never stops a write half-way (fixes/write.py).
        self.defers_writes = False

    def finish(self, name: Path | str, screened: Screened) -> Screened:
        """Check a file the pre-check let through (`name` may be its path as text, as the pre-check's)."""
        if screened.raw is None:
            return screened
        path = Path(name)
        result = self.check(path, screened.raw, prechecked=True)
        self._classes = self._helpers = None  # the file's own: its tree goes with them
        collect_after_check()
        if not result.reports_anything:
            # Only the configs and modules it read are needed, for the cache. Its source would live for
            # the run and cross the pipe from a worker: text, bytes and line table, 8 MiB a copy of
            # transformers, so 4 copies peaked at 116-120 MiB.
            result = FileResult(result.display, path=path, dependencies=result.dependencies) if result.dependencies else None
        # A mistaken suppression is warned about on every run, as ruff does: its file is not cached.
        cacheable = result is None or (result.error is None and not result.placed_warnings)
        return Screened(screened.digest, result, cacheable=cacheable)

    def check(self, path: Path, raw: bytes | None = None, prechecked: bool = False, write: bool = True) -> FileResult:
        """Check one file; `prechecked`: the caller already ran the text pre-check on `raw`. Without
        `write`, fixes are applied to the result's source only (stdin, the API), never to the disk."""
        result = FileResult(self.display(path), path=path)
        self._directive_problems = {}
        try:
            if raw is None:
                raw = path.read_bytes()
            if not prechecked and not self.worth_parsing(raw, path):
                return result
            source = read_source(path, raw)
            try:
                violations, _ = self._lint(source, result.display)
            except ParseError:
                # A notebook with a broken cell is checked without it (never when fixing: the emptied
                # cell would be written back); the cell is still named as an error.
                notebook = None if self.options.fixing else _as_notebook(source)
                if notebook is None:
                    raise
                from placement_lint.notebook import without_broken_cells

                partial = without_broken_cells(notebook)
                if partial is None:
                    raise
                source, module, broken = partial
                # No fix is offered: --fix leaves a notebook that does not parse alone.
                violations = [v._replace(fix=None) for v in self._lint(source, result.display, module)[0]]
                result.error = f"cannot parse: {'; '.join(broken)} (its other cells were checked)"
            result.dependencies = [
                *self._configs_read,
                *(self._classes.read if self._classes else ()),
                *(self._helpers.read if self._helpers else ()),
            ]
        except OSError as exc:
            result.error = f"cannot read: {exc.strerror or exc}"
            return result
        except (SourceError, PragmaError) as exc:
            result.error = str(exc)
            return result
        except RecursionError:
            result.error = "cannot check: the file nests too deeply"
            return result
        except Exception as exc:  # a bug of ours must cost one file, not the run
            result.error = f"internal error, please report it: {type(exc).__name__}: {exc}"
            return result
        if self.options.fixing and violations and any(v.fix and v.fix.applicability in self.options.allowed for v in violations):
            from placement_lint.fixing import fix_file  # only a run that fixes or diffs

            def lint(changed: SourceFile) -> list[Violation]:
                return self._lint(changed, result.display)[0]

            violations = fix_file(path, source, violations, result, write, self.options, lint, self.defers_writes)
        result.source = result.source or source
        notebook = _as_notebook(result.source)
        if notebook is not None:
            # Once, on the source the violations belong to: after --fix, the cells of the fixed notebook.
            violations = violations_in_cells(notebook, violations, result.display)
        result.findings = [finding_at(result.source, result.display, v) for v in violations]
        problems = self._directive_problems.get(result.source.text, ())
        result.placed_warnings = [placed_warning(result.source, result.display, problem) for problem in problems]
        return result

    def _lint(self, source: SourceFile, display: str, module: ast.Module | None = None) -> tuple[list[Violation], FileContext]:
        """`module`: the source's tree, when the caller has parsed it already."""
        module = module or self._parsed_by_context(source) or parse_python(source)
        try:
            return self._lint_tree(source, module, display)
        finally:
            release_index(module)

    def _lint_tree(self, source: SourceFile, module: ast.Module, display: str) -> tuple[list[Violation], FileContext]:
        imports = ImportTable.of(module, index_of(module).imports)
        contexts = self._context(source, module, imports, display)
        checked = CheckedFile(source, module, imports, contexts, display, self._classes, self._helpers, self.cwd)
        violations: list[Violation] = []
        ignored = self._ignored_codes(source.path)
        present = self._present(source)
        for rule in self.rules:
            if rule.checks_suppressions or rule.code in ignored or not (contexts.distributed_anywhere or rule.context_free):
                continue
            if present is not None and not (rule.could_fire(present) or rule.could_fire_when_launched(present)):
                continue  # the pre-check's question, asked of each rule: its flow is not worked out for nothing
            try:
                violations += rule.check(checked)
            except Exception as exc:  # one broken rule must not end the run
                raise SourceError(f"internal error in {rule.code}: {type(exc).__name__}: {exc}") from exc
        if not self.options.ignore_noqa:
            suppressions = noqa.read_suppressions(source, module, self.known_codes)
            if suppressions.problems:
                self._directive_problems[source.text] = suppressions.problems
            judged = frozenset(rule.code for rule in self.rules if rule.code not in ignored)
            for rule in self.rules:
                if rule.checks_suppressions and rule.code in judged:
                    try:
                        violations += rule.check_suppressions(checked, suppressions, violations, judged, self.known_codes)
                    except Exception as exc:
                        raise SourceError(f"internal error in {rule.code}: {type(exc).__name__}: {exc}") from exc
            if suppressions.present:  # finding a comment's line tokenizes the file: only when there are comments to find
                violations = [v for v in violations if not suppressions.suppresses(source, v.start, v.code)]
        violations.sort(key=lambda v: (v.start, v.code))
        return violations, contexts

    def _present(self, source: SourceFile) -> Present | None:
        """The file's bytes as the rules' token checks read them, from one scan; None for a notebook,
        whose checks read its code cells (every rule runs there)."""
        if is_notebook(source.path):
            return None
        raw = source.raw
        return Present(raw, self.scanner.found(raw), self.scanner)

    def _parsed_by_context(self, source: SourceFile) -> ast.Module | None:
        """The tree the launch context parsed of this file already (a launched script that imports
        the repository), from the same bytes: one parse a run."""
        if not self.launches or source.encoding != "utf-8" or is_notebook(source.path):
            return None
        tree: ast.Module | None = self.launches.parsed_tree(real_path(source.path), source.raw)
        return tree

    def context_of(self, source: SourceFile, module: ast.Module, display: str) -> FileContext:
        return self._context(source, module, ImportTable.of(module, index_of(module).imports), display)

    def _context(self, source: SourceFile, module: ast.Module, imports: ImportTable, display: str) -> FileContext:
        override = self._override(source, display)
        root = self._root_of(source.path.parent)
        configs = ConfigReader(root, resolved=True)
        self._configs_read = configs.read
        graph = self._graph(root)
        self._classes = ImportedClasses(module, source.path, graph)
        self._helpers = ImportedFunctions(module, source.path, graph, self.display)
        resolver = Resolver(module, _POSSIBLE)
        found = InFileEvidence(module, source, imports, resolver, display, configs).collect()
        external, used, consumers, calls = self._launch_evidence(source.path)
        if not external:
            return FileContext(module, found, override, external, used, remote_consumers=consumers, remote_calls=calls)
        # What the module reads of its arguments, and the library fields TRL reads for it (get_quantization_config).
        read = frozenset(n.attr for n in index_of(module).nodes if isinstance(n, ast.Attribute)) | LIBRARY_FIELDS.keys()
        fields = parser_fields(module)
        read |= {name for name, field in fields.items() if field.origin == "fire"}  # read as parameters, not attributes
        return FileContext(module, found, override, external, used, read, fields, consumers, calls)

    def _root_of(self, folder: Path) -> Path:
        """The resolved repository root of a checked file's folder, worked out once per folder: a run
        checks thousands of files in a few hundred folders."""
        key = str(folder)
        root = self._roots.get(key)
        if root is None:
            root = self._roots[key] = (repository_root(folder) or folder).resolve()
        return root

    def _graph(self, root: Path) -> ModuleGraph:
        if root not in self._graphs:
            self._graphs[root] = self.launches.graph(root) or ModuleGraph(root)
        return self._graphs[root]

    def _override(self, source: SourceFile, display: str) -> Override | None:
        if self.options.context:
            return Override(NAMED_SETUPS[self.options.context], f"--context {self.options.context}")
        pragma = pragma_override(source.text, display)
        if pragma is not None:
            return pragma
        configured = self._configured_context(source.path)
        if configured:
            return Override(NAMED_SETUPS[configured], f"per-file-context in {self.settings.config_file}")
        if self.settings.context:
            return Override(NAMED_SETUPS[self.settings.context], f"context in {self.settings.config_file}")
        return None

    def _ignored_codes(self, path: Path) -> set[str]:
        if not self._per_file_ignores:
            return set()
        relative = self._relative(path)
        ignored: set[str] = set()
        for spec, selectors in self._per_file_ignores:
            if spec.match_file(relative):
                ignored |= {rule.code for rule in self.rules if any(rule.code.startswith(s) or s == "ALL" for s in selectors)}
        return ignored


def placed_warning(source: SourceFile, display: str, problem: noqa.DirectiveProblem) -> PlacedWarning:
    """A mistaken directive's warning, worded as ruff's, at its place (in a notebook, by cell)."""
    cell, row, column = source.location(problem.start)
    _, end_row, end_column = source.location(problem.end)
    where = f"{display}:{row}" if cell is None else f"{display}:cell {cell}:{row}"
    return PlacedWarning(f"{problem.head} at {where}{problem.tail}", row, column, end_row, end_column, cell)


def _as_notebook(source: SourceFile) -> NotebookSource | None:
    """The source as a notebook's, if it is one: notebook.py is imported only by a run that reads one
    (2 ms of every other run)."""
    if not is_notebook(source.path):
        return None
    from placement_lint.notebook import NotebookSource

    return source if isinstance(source, NotebookSource) else None
