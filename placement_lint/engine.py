"""The pipeline for one run: discover -> read/decode -> pre-check -> parse -> context -> rules -> fixes.

Reporting is the caller's job (`report/`); this module returns data.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.index import index_of
from placement_lint.analysis.names import ImportTable
from placement_lint.cache import Cache, content_hash, load_repo_context, save_repo_context
from placement_lint.context.classes import ImportedClasses
from placement_lint.context.configs import ConfigReader
from placement_lint.context.evidence import Context, Evidence, FileContext, Override
from placement_lint.context.in_file import IN_FILE_EVIDENCE, InFileEvidence, PragmaError, pragma_override
from placement_lint.context.repo import NOT_LAUNCHED, Launched, Launches, RepoContext, build_repo_context, launcher_name
from placement_lint.discover import Discovered, discover, gitignore_spec, real_folder, real_name, real_path, repository_root
from placement_lint.distributed import NAMED_SETUPS, Mode, Setup
from placement_lint.edits import Applicability
from placement_lint.notebook import MAX_NOTEBOOK_BYTES, NotebookSource, is_notebook, python_bytes, read_source
from placement_lint.process import collect_garbage_rarely
from placement_lint.rules import all_rules, noqa
from placement_lint.rules.base import CheckedFile, Rule, Violation
from placement_lint.settings import Settings
from placement_lint.source import SourceError, SourceFile, line_starts_of, parse_python, split_lines

if TYPE_CHECKING:  # the fixing layer is imported only by a run that fixes, diffs or adds noqa
    from placement_lint.fixes.apply import AppliedFix, Fixable

_POSSIBLE = Setup(Mode.POSSIBLE)
# Script arguments that library dataclasses read (TRL's ModelConfig), which no file of the repository declares.
_LIBRARY_FIELDS = frozenset({"load_in_4bit", "load_in_8bit"})
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")
# A Python file this large is generated data, not a training script: it is not parsed (a 10 MB
# one-line list takes CPython's parser seconds and millions of nodes).
MAX_PYTHON_BYTES = 4 * 1024 * 1024
# Below this many bytes of files to parse, a process pool costs more than it saves (measured on
# transformers' 5 candidate files, 0.8 MB: 1.05 s in one process, 0.84 s in two).
POOL_THRESHOLD_BYTES = 200_000
# Below this many bytes of files to read and pre-check, the pre-check runs in this process and only
# the parsing may be shared. Measured: on trl's 3.6 MB sharing the pre-check too changes nothing
# (0.24 s either way); on transformers' 53 MB it takes the run from 1.26 s to 0.84 s.
SCREEN_POOL_BYTES = 4_000_000


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    context: str | None = None  # --context
    jobs: int | None = None
    ignore_noqa: bool = False  # report what noqa comments suppress
    force_exclude: bool = False  # the configured excludes apply to paths named explicitly too

    @property
    def allowed(self) -> set[Applicability]:
        return {Applicability.SAFE, Applicability.UNSAFE} if self.unsafe_fixes else {Applicability.SAFE}

    @property
    def fixing(self) -> bool:
        return self.fix or self.diff


@dataclass(frozen=True)
class _NoqaRow:
    """A finding's noqa line, worked out when asked (it tokenizes the file); picklable for the pool."""

    source: SourceFile
    offset: int

    def row(self) -> int:
        return self.source.location(self.source.line_starts[noqa.noqa_row(self.source, self.offset) - 1])[1]


@dataclass(frozen=True)
class Finding:
    display: str
    violation: Violation
    context: Context
    row: int
    column: int
    end_row: int
    end_column: int
    # The line whose comment can suppress it (0: its first line); a function when it is worked out on
    # demand: it tokenizes the file, which only the JSON output asks for.
    noqa_row_of: int | _NoqaRow = 0
    cell: int | None = None  # in a notebook: the cell (1-based among all cells); rows and columns are in it

    @property
    def noqa_row(self) -> int:
        if isinstance(self.noqa_row_of, _NoqaRow):
            object.__setattr__(self, "noqa_row_of", self.noqa_row_of.row())
        return self.noqa_row_of  # type: ignore[return-value]

    @property
    def code(self) -> str:
        return self.violation.code

    @property
    def message(self) -> str:
        return self.violation.message


@dataclass
class FileResult:
    display: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    fixed: list[AppliedFix] = field(default_factory=list)  # with --fix: written; with --diff: would be
    diff: str | None = None
    warnings: list[str] = field(default_factory=list)
    source: SourceFile | None = None
    path: Path | None = None
    dependencies: list[Path] = field(default_factory=list)  # configs the file's own evidence read


@dataclass(frozen=True)
class Screened:
    """What reading and pre-checking a file (and checking it, if that was due) gave."""

    digest: str | None  # its content hash, for the cache
    result: FileResult | None = None  # findings, an error or a warning; None: nothing to report
    raw: bytes | None = None  # a rule could fire in it: the bytes still to check
    cacheable: bool = True


@dataclass
class RunResult:
    files: list[FileResult]
    checked: int
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    interrupted: int = 0  # files not checked because the run was interrupted
    noqa_added: int = 0  # --add-noqa: comments written
    baselined: list[Finding] = field(default_factory=list)  # --add-noqa: the findings they suppress

    @property
    def findings(self) -> list[Finding]:
        return [finding for result in self.files for finding in result.findings]


class FileChecker:
    """Everything needed to check one file; picklable, so worker processes can use it."""

    def __init__(
        self,
        settings: Settings,
        options: RunOptions,
        cwd: Path,
        launches: Launches | None = None,
    ) -> None:
        self.settings = settings
        self._root = settings.root.resolve()  # per-file patterns match paths relative to it
        self.options = options
        self.cwd = cwd
        # Evidence from the repository's launch scripts, per resolved file path, what of the file runs
        # under it ("__main__": its module-level code; other names: what importers use of it), and
        # what importers do with what its functions return.
        self.launches = launches or Launches()
        self._configs_read: list[Path] = []  # the configs the last file's in-file evidence looked at
        self._classes: ImportedClasses | None = None  # the last file's: the modules it read are dependencies
        self._modules_parsed: dict[Path, object] = {}  # for the class lookups of every file this checker checks
        enabled = set(settings.enabled_codes())
        self.rules: list[Rule] = [rule() for rule in all_rules() if rule.code in enabled]
        self.known_codes = frozenset(rule.code for rule in all_rules())
        self.anchors = tuple({token for rule in self.rules for token in rule.anchor_tokens()})
        # The rules the pre-check asks: with --ignore-noqa, DPL100 has no comments to judge.
        self._prechecked = [rule for rule in self.rules if not (rule.checks_suppressions and options.ignore_noqa)]
        self._per_file_ignores = [(gitignore_spec([pattern]), codes) for pattern, codes in settings.per_file_ignores]
        self._per_file_context = [(gitignore_spec([pattern]), name) for pattern, name in settings.per_file_context]

    # -- per file --------------------------------------------------------------------------

    def display(self, path: Path) -> str:
        return _display(path, self.cwd)

    def worth_parsing(self, raw: bytes, path: Path) -> bool:
        """The text pre-check: could any enabled rule fire in this file?"""
        if is_notebook(path):
            try:
                raw = python_bytes(path, raw)  # the code cells, not the JSON (which escapes quotes)
            except SourceError:
                return True  # check() names the problem
        if not any(anchor in raw for anchor in self.anchors):
            return False
        # Which rules could fire depends on the context, so the context is decided first: it is
        # rare, and the rules' token checks are then run only in the form that can matter.
        rules = self._prechecked
        launched = bool(self._launch_evidence(path).evidence)
        if launched or self._context_without_launch(raw, path):
            if any(rule.could_fire(raw) for rule in rules):
                return True
        elif any(rule.could_fire_without_context(raw) for rule in rules):
            return True
        return launched and any(rule.could_fire_when_launched(raw) for rule in rules if not rule.checks_suppressions)

    def has_context_tokens(self, raw: bytes, path: Path) -> bool:
        """Could this file be distributed: an override, launch evidence, or a token of in-file evidence."""
        return bool(self._launch_evidence(path).evidence) or self._context_without_launch(raw, path)

    def _context_without_launch(self, raw: bytes, path: Path) -> bool:
        if self.options.context or self.settings.context or self._configured_context(path):
            return True
        return IN_FILE_EVIDENCE.search(raw) is not None

    def _launch_evidence(self, path: Path) -> Launched:
        if not self.launches:
            return NOT_LAUNCHED
        return self.launches.get(real_path(path))

    def launch_key(self, path: Path) -> str:
        """What the cache must see unchanged besides the file: the evidence its launchers give it, and
        what its importers do with what its functions return."""
        return self.launches.digest(real_name(path)) if self.launches else ""

    def from_cache(self, path: Path, violations: list[Violation]) -> FileResult:
        result = FileResult(self.display(path), path=path)
        try:
            source = read_source(path, path.read_bytes())
        except (OSError, SourceError) as exc:
            result.error = str(exc)
            return result
        result.source = source
        result.findings = [self._finding(source, result.display, v) for v in violations]
        return result

    def pre_check(self, path: Path, raw: bytes | None, hashing: bool, digest: str | None = None) -> Screened:
        """Read a file (unless `raw` holds it) and run the text pre-check; `hashing`: the cache needs
        its digest (`digest`, when the caller already hashed `raw`)."""
        try:
            if raw is None:
                with open(path, "rb") as handle:  # cheaper than Path.read_bytes, for thousands of files
                    raw = handle.read()
        except OSError as exc:
            return Screened(
                None, FileResult(self.display(path), error=f"cannot read: {exc.strerror or exc}", path=path), cacheable=False
            )
        if hashing and digest is None:
            digest = content_hash(raw)
        if not self.worth_parsing(raw, path):
            return Screened(digest)
        limit = MAX_NOTEBOOK_BYTES if is_notebook(path) else MAX_PYTHON_BYTES
        if len(raw) > limit:
            warning = f"{self.display(path)}: skipped, larger than {limit // 1024 // 1024} MiB"
            return Screened(digest, FileResult(self.display(path), path=path, warnings=[warning]), cacheable=False)
        return Screened(digest, raw=raw)

    def finish(self, path: Path, screened: Screened) -> Screened:
        """Check a file the pre-check let through."""
        if screened.raw is None:
            return screened
        result = self.check(path, screened.raw, prechecked=True)
        return Screened(screened.digest, result, cacheable=result.error is None)

    def check(self, path: Path, raw: bytes | None = None, prechecked: bool = False, write: bool = True) -> FileResult:
        """Check one file; `prechecked`: the caller already ran the text pre-check on `raw`. Without
        `write`, fixes are applied to the result's source only (stdin, the API), never to the disk."""
        result = FileResult(self.display(path), path=path)
        try:
            if raw is None:
                raw = path.read_bytes()
            if not prechecked and not self.worth_parsing(raw, path):
                return result
            source = read_source(path, raw)
            violations, _ = self._lint(source, result.display)
            result.dependencies = [*self._configs_read, *(self._classes.read if self._classes else ())]
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
            violations = self._fix(path, source, violations, result, write)
        result.source = result.source or source
        if isinstance(result.source, NotebookSource):
            # Once, on the source the violations belong to: after --fix, the cells of the fixed notebook.
            violations = _in_notebook(result.source, violations, result.display)
        result.findings = [self._finding(result.source, result.display, v) for v in violations]
        return result

    def _lint(self, source: SourceFile, display: str) -> tuple[list[Violation], FileContext]:
        module = parse_python(source)
        imports = ImportTable.of(module, index_of(module).nodes)
        contexts = self._context(source, module, imports, display)
        checked = CheckedFile(source, module, imports, contexts, display, self._classes)
        violations: list[Violation] = []
        ignored = self._ignored_codes(source.path)
        for rule in self.rules:
            if rule.checks_suppressions or rule.code in ignored or not (contexts.distributed_anywhere or rule.context_free):
                continue
            try:
                violations += rule.check(checked)
            except Exception as exc:  # one broken rule must not end the run
                raise SourceError(f"internal error in {rule.code}: {type(exc).__name__}: {exc}") from exc
        directives = noqa.directives(source, module)
        noqa.check_known_codes(source, directives, self.known_codes)
        if not self.options.ignore_noqa:
            judged = frozenset(rule.code for rule in self.rules if rule.code not in ignored)
            for rule in self.rules:
                if rule.checks_suppressions and rule.code in judged:
                    try:
                        violations += rule.check_suppressions(checked, directives, violations, judged)
                    except Exception as exc:
                        raise SourceError(f"internal error in {rule.code}: {type(exc).__name__}: {exc}") from exc
            if directives:  # finding a comment's line tokenizes the file: only when there are comments to find
                violations = [v for v in violations if not noqa.suppressed(directives, noqa.noqa_row(source, v.start), v.code)]
        violations.sort(key=lambda v: (v.start, v.code))
        return violations, contexts

    def context_of(self, source: SourceFile, module: ast.Module, display: str) -> FileContext:
        return self._context(source, module, ImportTable.of(module, index_of(module).nodes), display)

    def _context(self, source: SourceFile, module: ast.Module, imports: ImportTable, display: str) -> FileContext:
        override = self._override(source, display)
        root = repository_root(source.path) or source.path.parent
        configs = ConfigReader(root)
        self._configs_read = configs.read
        self._classes = ImportedClasses(module, source.path, root, self._modules_parsed)  # type: ignore[arg-type]
        resolver = Resolver(module, _POSSIBLE)
        found = InFileEvidence(module, source, imports, resolver, display, configs).collect()
        external, used, consumers = self._launch_evidence(source.path)
        fields = frozenset(resolver.field_defaults()) | _LIBRARY_FIELDS if external else frozenset()
        return FileContext(module, found, override, external, used, fields, consumers)

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

    def _relative(self, path: Path) -> str:
        try:
            return real_path(path).relative_to(self._root).as_posix()
        except ValueError:
            return path.name

    def _configured_context(self, path: Path) -> str | None:
        if not self._per_file_context:
            return None
        relative = self._relative(path)
        for spec, name in self._per_file_context:
            if spec.match_file(relative):
                return name
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

    def _fix(
        self, path: Path, source: SourceFile, violations: list[Violation], result: FileResult, write: bool
    ) -> list[Violation]:
        import difflib

        from placement_lint.fixes.apply import FixFailed, fix_to_fixed_point
        from placement_lint.fixes.notebook import NotebookFixError, cell_diff
        from placement_lint.fixes.notebook import rewrite as rewrite_notebook
        from placement_lint.fixes.write import ChangedOnDisk, NotLossless, verify_lossless, write_atomically

        if not source.round_trips:
            result.warnings.append(f"{result.display}: not fixed: its text does not encode back to the same bytes")
            return violations

        def relint(text: str) -> list[Fixable]:
            nonlocal latest
            try:
                latest = self._lint(_with_text(source, text), result.display)[0]
            except SourceError as exc:
                raise FixFailed(str(exc)) from exc
            return [(v.code, v.fix, v.start) for v in latest]

        latest = violations
        try:
            outcome = fix_to_fixed_point(
                source.text, relint, self.options.allowed, [(v.code, v.fix, v.start) for v in violations]
            )
        except FixFailed as exc:
            result.warnings.append(f"{result.display}: fixes reverted, the fixed file would not parse ({exc})")
            return violations
        if not outcome.converged:
            result.warnings.append(f"{result.display}: fixes did not converge after several passes")
        if isinstance(source, NotebookSource):  # a fix is listed by its cell and line, as findings are
            outcome.applied = [_in_cell(source, applied) for applied in outcome.applied]
        if outcome.text == source.text:
            return violations
        new_source = _with_text(source, outcome.text)
        # What is written: the fixed text, or for a notebook its JSON with only the changed cells' sources.
        data, expected, cell_changes = new_source.raw, source.raw, None
        notebook = source.notebook if isinstance(source, NotebookSource) else None
        if notebook is not None:
            try:
                rewritten = rewrite_notebook(notebook, outcome.text, outcome.passes)
            except NotebookFixError as exc:
                result.warnings.append(f"{result.display}: not fixed: {exc}")
                return violations
            data, expected, cell_changes = rewritten.raw, notebook.raw, rewritten.changes
        if self.options.diff and cell_changes is not None:
            result.diff = cell_diff(result.display, cell_changes)
            result.fixed = outcome.applied
            return violations
        if self.options.diff:
            lines = difflib.unified_diff(
                split_lines(source.text),
                split_lines(outcome.text),
                fromfile=f"a/{result.display}",
                tofile=f"b/{result.display}",
            )
            # As `diff -u` does, mark a last line without a newline instead of running into the next file.
            result.diff = "".join(
                line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines
            )
            result.fixed = outcome.applied
            return violations
        try:
            verify_lossless(source.raw, new_source.raw)
            if write:
                write_atomically(path, data, expected)
        except NotLossless as exc:
            result.warnings.append(f"{result.display}: fixes reverted, the fixed file would not parse ({exc})")
            return violations
        except ChangedOnDisk:
            result.warnings.append(f"{result.display}: not fixed: the file changed while it was being checked")
            return violations
        except OSError as exc:
            result.error = f"cannot write fix: {exc.strerror or exc}"
            return violations
        result.fixed = outcome.applied
        result.source = read_source(path, data) if notebook is not None else new_source
        return latest

    @staticmethod
    def _finding(source: SourceFile, display: str, violation: Violation) -> Finding:
        cell, row, column = source.location(violation.start)
        _, end_row, end_column = source.location(violation.end)
        noqa_row = _NoqaRow(source, violation.start)
        return Finding(display, violation, violation.context or Context(), row, column, end_row, end_column, noqa_row, cell)


def _with_text(source: SourceFile, text: str) -> SourceFile:
    return replace(source, text=text, raw=source.encode(text), line_starts=line_starts_of(text))


def _in_cell(source: NotebookSource, applied: AppliedFix) -> AppliedFix:
    cell, row, _ = source.location(applied.offset)
    return replace(applied, cell=cell, row=row)


def _in_notebook(source: NotebookSource, violations: list[Violation], display: str) -> list[Violation]:
    """ "TrainingArguments(...), line 9" names a row of the joined cells: say which cell, as ruff does."""
    return [
        replace(
            v,
            message=_LINE_REFERENCE.sub(lambda m: source.describe_row(int(m.group(1))), v.message),
            context=_in_cells(source, v.context, display) if v.context is not None else None,
        )
        for v in violations
    ]


def _in_cells(source: NotebookSource, context: Context, display: str) -> Context:
    """A notebook's own evidence located by cell (`train.ipynb:cell 4:2`) instead of a row of the joined cells."""

    def located(evidence: Evidence) -> Evidence:
        if evidence.origin != "file" or evidence.path != display or source.notebook is None or not source.notebook.cells:
            return evidence
        cell = source.notebook.cell_at(evidence.line)
        return replace(evidence, cell=cell.number, line=evidence.line - cell.first_row + 1)

    return replace(context, evidence=tuple(located(e) for e in context.evidence))


# -- what `placement-lint context` shows -------------------------------------------------------


@dataclass(frozen=True)
class FileContextReport:
    display: str
    contexts: list[Context]  # one per distinct setup among the file's parts, strongest evidence first
    error: str | None = None


def explain_contexts(paths: Iterable[Path], settings: Settings, cwd: Path, show_all: bool = False) -> list[FileContextReport]:
    """The context every Python file gets, with its evidence chain, without running the rules."""
    given = list(paths)
    found = discover(given, settings, also=launcher_name)
    repos = repo_contexts(found, settings, cwd, given)
    checker = FileChecker(settings, RunOptions(), cwd, Launches(repos))
    named = {Path(os.path.abspath(p)) for p in given if Path(p).is_file()}
    reports = []
    for path in found.files:
        display = checker.display(path)
        try:
            raw = path.read_bytes()
            if not (checker.has_context_tokens(python_bytes(path, raw), path) or path in named or show_all):
                continue
            source = read_source(path, raw)
            module = parse_python(source)
            contexts = checker.context_of(source, module, display)
        except OSError as exc:
            reports.append(FileContextReport(display, [], f"cannot read: {exc.strerror or exc}"))
            continue
        except (SourceError, PragmaError) as exc:
            reports.append(FileContextReport(display, [], str(exc)))
            continue
        distinct = contexts.distinct()
        if isinstance(source, NotebookSource):
            distinct = [_in_cells(source, context, display) for context in distinct]
        if distinct or path in named or show_all:
            reports.append(FileContextReport(display, distinct))
    return reports


# -- the run ---------------------------------------------------------------------------------


def repo_contexts(
    found: Discovered, settings: Settings, cwd: Path, given: Iterable[Path] = (), cache_folder: Path | None = None
) -> list[RepoContext]:
    """The launch context of every repository the files belong to, each built once. The folders
    given on the command line (or holding a file given there) are searched for launchers even when
    the configuration excludes them, as their Python files are checked."""

    base = cwd.resolve()
    display = functools.partial(_display, cwd=base)

    @functools.cache
    def root_of(name: str) -> Path:
        # Outside any repository, the folder the user named is the root.
        folder = Path(name)
        repository = repository_root(folder)
        if repository is not None:
            return repository
        resolved = real_folder(folder)
        return next((w for w in found.walked if resolved.is_relative_to(w)), resolved)

    roots = sorted({root_of(os.path.dirname(path)) for path in found.files})  # strings: thousands of files, few folders
    folders = tuple(sorted({Path(os.path.abspath(p if Path(p).is_dir() else Path(p).parent)) for p in given}))
    contexts = []
    for root in roots:
        # When the walk covered the whole root, its launcher candidates are already known.
        covered = any(root.is_relative_to(w) for w in found.walked)
        launchers = [p for p in found.others if real_path(p).is_relative_to(root)] if covered else None
        if not covered and repository_root(root) is None:
            # A file named alone outside any repository (/tmp/train.py): only the launchers beside it
            # speak for it, or a file in a home folder would make us read the whole home folder.
            launchers = _launchers_beside(root)
        cached = load_repo_context(cache_folder, root, launchers, base) if cache_folder is not None else None
        if cached is None:
            cached = build_repo_context(root, settings, display, folders, launchers)
            if cache_folder is not None:
                save_repo_context(cache_folder, cached, base)
        contexts.append(cached)
    return contexts


def _launchers_beside(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if launcher_name(p.name) and p.is_file())
    except OSError:
        return []


def run(
    paths: Iterable[Path],
    settings: Settings,
    options: RunOptions,
    cwd: Path | None = None,
    cache_folder: Path | None = None,
    restrict: Callable[[list[Path], list[RepoContext]], list[Path]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Check `paths`. With `cache_folder`, results of unchanged files come from the cache (lint mode only).
    `restrict` picks, from the files found and their repositories' launch contexts, the ones to check
    (`--changed-since`); `progress(done, total)` hears of every file as it is done."""
    cwd = cwd or Path.cwd()
    paths = list(paths)
    found = discover(paths, settings, also=launcher_name, force_exclude=options.force_exclude)
    repos = repo_contexts(found, settings, cwd, paths, cache_folder)
    files = found.files if restrict is None else restrict(found.files, repos)
    checker = FileChecker(settings, options, cwd, Launches(repos))
    cache = None if cache_folder is None or options.fixing else Cache(cache_folder, _settings_key(settings, options))
    results: list[FileResult] = []
    errors = [f"{path}: no such file or directory" for path in found.missing]
    errors += [
        f"{checker.display(path)}: {'cannot list this folder' if path.is_dir() else 'not a regular file, not read'}"
        for path in found.unreadable
    ]
    pending: list[_Pending] = []
    for path in files:
        try:
            status = found.statuses.get(path) or path.stat()  # a Discovered built by hand has no statuses
            launch_key = checker.launch_key(path) if cache else ""
            cached = cache.lookup(path, status, launch_key) if cache else None
            raw = digest = None
            if cached is None and cache is not None and cache.knows(path):
                # Touched but maybe unchanged (a checkout, a formatter): its bytes decide.
                with open(path, "rb") as handle:
                    raw = handle.read()
                digest = content_hash(raw)
                cached = cache.lookup(path, status, launch_key, digest)
        except OSError as exc:
            results.append(FileResult(checker.display(path), error=f"cannot read: {exc.strerror or exc}", path=path))
            continue
        if cached is not None:
            if cached:
                results.append(checker.from_cache(path, cached))
            continue
        pending.append(_Pending(path, status, launch_key, raw, digest))
    done = len(files) - len(pending)
    if progress is not None:
        progress(done, len(files))
    interrupted = 0
    try:
        for item, screened in _screen_all(checker, pending, options, hashing=cache is not None):
            done += 1
            if progress is not None:
                progress(done, len(files))
            if screened.result is not None:
                results.append(screened.result)
            if cache is not None and screened.cacheable:
                findings = screened.result.findings if screened.result else []
                dependencies = screened.result.dependencies if screened.result else []
                cache.store(
                    item.path, item.status, screened.digest, item.launch_key, [f.violation for f in findings], dependencies
                )
    except KeyboardInterrupt:
        # Every file written so far was replaced whole (atomic writes); the rest are untouched.
        interrupted = len(files) - done
    if cache is not None:
        cache.save()
    results.sort(key=lambda r: r.display)
    return RunResult(results, len(files), errors, [w for repo in repos for w in repo.warnings], interrupted)


def add_noqa_comments(result: RunResult) -> None:
    """`--add-noqa`: suppress every remaining finding with a comment on its line, written like a fix
    (atomically, only if the file is unchanged since it was read, LibCST round trip first)."""
    from placement_lint.fixes.noqa import add_noqa
    from placement_lint.fixes.write import ChangedOnDisk, NotLossless, verify_lossless, write_atomically

    for file in result.files:
        source = file.source
        if not file.findings or source is None or file.path is None or file.error:
            continue
        if isinstance(source, NotebookSource):  # its source is the cells' text, not the file's bytes
            file.warnings.append(f"{file.display}: no noqa added: --add-noqa writes Python files only")
            continue
        if not source.round_trips:
            file.warnings.append(f"{file.display}: no noqa added: its text does not encode back to the same bytes")
            continue
        text, added = add_noqa(source, [(f.code, f.violation.start) for f in file.findings])
        if not added:
            continue
        raw = source.encode(text)
        try:
            verify_lossless(source.raw, raw)
            write_atomically(file.path, raw, source.raw)
        except NotLossless as exc:
            file.warnings.append(f"{file.display}: no noqa added, the file would not parse ({exc})")
            continue
        except ChangedOnDisk:
            file.warnings.append(f"{file.display}: no noqa added: the file changed while it was being checked")
            continue
        except OSError as exc:
            file.error = f"cannot write noqa comments: {exc.strerror or exc}"
            continue
        result.noqa_added += added
        result.baselined += file.findings
        file.source = _with_text(source, text)
        file.findings = []


def run_source(raw: bytes, path: Path, settings: Settings, options: RunOptions, cwd: Path | None = None) -> RunResult:
    """Check source that is not (or not yet) on disk, an editor's buffer or stdin, as the file at
    `path`: its configuration, per-file settings and its repository's launches apply. Nothing is
    written, not even the cache; with `options.fix` the fixed text is the result's `source`."""
    cwd = cwd or Path.cwd()
    path = Path(os.path.abspath(path))
    root = repository_root(path) or real_path(path).parent
    # As for a file named on the command line, its folder's launchers count even if excluded.
    base = cwd.resolve()
    repo = build_repo_context(root, settings, lambda p: _display(p, base), (path.parent,))
    result = FileChecker(settings, options, cwd, Launches([repo])).check(path, raw, write=False)
    return RunResult([result], 1, [], list(repo.warnings))


def _display(path: Path, cwd: Path) -> str:
    """A path as messages name it: relative to the working folder when inside it (a resolved path
    needs the resolved folder)."""
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return str(path)


def _settings_key(settings: Settings, options: RunOptions) -> str:
    return Cache.settings_key(
        settings.enabled_codes(),
        settings.per_file_ignores,
        settings.context,
        settings.per_file_context,
        options.context,
        options.ignore_noqa,
        str(settings.root.resolve()),
    )


@dataclass(frozen=True)
class _Pending:
    """A file the cache could not answer for."""

    path: Path
    status: os.stat_result
    launch_key: str
    raw: bytes | None = None  # already read, for the cache's content check...
    digest: str | None = None  # ...which hashed it
    screened: Screened | None = None  # already pre-checked, waiting to be parsed


def _screen_all(
    checker: FileChecker, pending: list[_Pending], options: RunOptions, hashing: bool
) -> Iterator[tuple[_Pending, Screened]]:
    """Each pending file read, pre-checked and, if a rule could fire in it, checked. Big runs share
    all of it among processes; small ones pre-check here and share only the parsing, if that is big."""
    jobs = options.jobs or os.cpu_count() or 1
    # A run that writes fixes checks one file after the other, so an interrupt stops between files.
    pooling = not options.fix and jobs >= 2 and len(pending) >= 2
    if pooling and sum(item.status.st_size for item in pending) >= SCREEN_POOL_BYTES:
        yield from _pooled(checker, pending, jobs, hashing)
        return
    worth: list[_Pending] = []
    for item in pending:
        screened = checker.pre_check(item.path, item.raw, hashing, item.digest)
        if screened.raw is None:
            yield item, screened
        else:
            worth.append(replace(item, raw=None, screened=screened))
    if (
        pooling
        and len(worth) >= 2
        and sum(len(item.screened.raw or b"") for item in worth if item.screened) >= POOL_THRESHOLD_BYTES
    ):
        yield from _pooled(checker, worth, jobs, hashing)
        return
    for item in worth:
        yield item, checker.finish(item.path, item.screened)  # type: ignore[arg-type]


_WORKER_CHECKER: FileChecker | None = None


def _start_worker(checker: FileChecker) -> None:
    global _WORKER_CHECKER
    _WORKER_CHECKER = checker
    collect_garbage_rarely()


def _screen_batch(batch: list[_Pending], hashing: bool) -> list[tuple[_Pending, Screened]]:
    checker = _WORKER_CHECKER
    assert checker is not None, "_start_worker runs first in every worker"
    done = []
    for item in batch:
        screened = checker.finish(item.path, item.screened or checker.pre_check(item.path, item.raw, hashing, item.digest))
        done.append((replace(item, raw=None, screened=None), screened))  # the bytes need not travel back
    return done


def _pooled(checker: FileChecker, pending: list[_Pending], jobs: int, hashing: bool) -> Iterator[tuple[_Pending, Screened]]:
    from concurrent.futures import ProcessPoolExecutor, as_completed  # only when there is enough work to share

    # Big files first, dealt out evenly; small batches, so a worker that finishes early takes more.
    ordered = sorted(pending, key=lambda item: -item.status.st_size)
    count = min(len(ordered), jobs * 8)
    batches = [ordered[i::count] for i in range(count)]
    # The checker reaches each worker once (inherited, where processes fork), not with every batch.
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(checker,))
    try:
        futures = [pool.submit(_screen_batch, batch, hashing) for batch in batches]
        # As each batch ends, so a progress bar moves; the run sorts the results afterwards.
        for future in as_completed(futures):
            yield from future.result()
    except BaseException:  # Ctrl-C, or the caller stopped reading: drop the batches not started
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
