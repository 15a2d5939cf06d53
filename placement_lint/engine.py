"""The pipeline for one run: discover -> read/decode -> pre-check -> parse -> context -> rules -> fixes.

Reporting is the caller's job (`report/`); this module returns data. The checking of one file
(`checker`) is imported only when some file needs it: a run the cache answers never parses.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.context.launcher_names import (
    MAX_PYTHON_LAUNCHER_BYTES,
    launcher_candidates,
    launcher_name,
    python_files,
    python_launch_files,
    tracked_launchers,
)
from placement_lint.context.launches import Launches, RepoContext
from placement_lint.decode import read_source
from placement_lint.discover import (
    Discovered,
    discover,
    forget_listings,
    is_shared_folder,
    launch_excluded_by_settings,
    real_folder,
    real_path,
    repository_root,
)
from placement_lint.process import CAN_FORK, collect_garbage_rarely, collections_paused, leave_alone_what_lives, thaw
from placement_lint.records import NamedTuple
from placement_lint.results import FileResult, RunOptions, RunResult, Screened, display_path, finding_at
from placement_lint.settings import Settings
from placement_lint.source import SourceError, content_hash, read_bytes

if TYPE_CHECKING:
    from placement_lint.cache import Cache
    from placement_lint.checker import FileChecker
    from placement_lint.precheck import PreCheck
    from placement_lint.rules.violation import Violation
    from placement_lint.screen_ahead import ScreeningAhead

# Below this many bytes of files to parse, a process pool costs more than it saves (measured on
# transformers' 5 candidate files, 0.8 MB: 1.05 s in one process, 0.84 s in two).
POOL_THRESHOLD_BYTES = 200_000
# Below this many bytes of files to read and pre-check, the pre-check runs in this process and only
# the parsing may be shared. With forked workers sharing it pays from about a megabyte: 21-31 paired
# runs, trl (3.0 MB) 0.174 s to 0.166 s, peft (2.7 MB) 0.101 to 0.096, accelerate (1.5 MB) 0.149 to
# 0.147 (with the process pool of old, trl's took 0.24 s either way).
SCREEN_POOL_BYTES = 1_000_000
# Below this many bytes of files to pre-check, a child pre-checking them while the launch context is
# built (screen_ahead.py) saves less than its fork costs.
SCREEN_AHEAD_BYTES = 1_000_000
# ...and below this many launch files to read, the context is built before the child gets going
# (trl's 11: 7 ms, where the fork cost 5 ms; the docs monorepo's 2,000: 0.7 s).
SCREEN_AHEAD_LAUNCH_FILES = 64


# -- the run ---------------------------------------------------------------------------------

# How a stage of the run before the checks goes: (what it is, how far, out of how many or None).
Stage = Callable[[str, int, "int | None"], None]


def repo_contexts(
    found: Discovered,
    settings: Settings,
    cwd: Path,
    cache_folder: Path | None = None,
    before_building: Callable[[int], None] | None = None,
    stage: Stage | None = None,
    jobs: int = 1,
    unvouched: list[str] | None = None,
) -> list[RepoContext]:
    """The launch context of every repository the files belong to, each built once, from the
    repository's launch files whatever paths the run was given. `before_building` is told how many
    launch files a context is built from, before it is (not when the cache has it, or there is
    nothing to read). `stage` hears how the building goes (a progress bar); `jobs`: how many
    processes a build may use. `unvouched`: the Python files the walk met that the result cache does
    not know as they are (a changed or new one may have become a launcher); None without a result cache."""

    base = cwd.resolve()
    display = functools.partial(display_path, cwd=base)

    walked = [(str(w), os.path.join(str(w), "")) for w in found.walked]
    listed = found.roots

    # Outside any repository, the working folder stands for one (as ruff's project root): `check .`
    # from there, `check training/` and `check training/scripts/train.py` see the same launches. Not
    # the home or temporary folder, nor the filesystem root: those hold many unrelated projects.
    working = str(base) if not is_shared_folder(str(base)) else None
    in_working = os.path.join(str(base), "")

    # An archive whose top holds no marker, only a project nested in it (R1-V: `src/r1-v/setup.py`),
    # checked from that top (`check .`): the top stands for the repository, as a `.git` there would
    # make it, so a launch script outside the project (`src/scripts/run_sft.sh`) reaches into it.
    unmarked_top = working if working is not None and str(base) in dict(walked) and repository_root(base) is None else None

    def widened(root: str) -> str:
        """A project root found by its marker, nested in the unmarked top the run was given: that top."""
        if unmarked_top is None or root == unmarked_top or not root.startswith(in_working):
            return root
        return root if os.path.isdir(os.path.join(root, ".git")) else unmarked_top  # a clone inside is its own

    def root_of(folder: str) -> str:
        """A folder's repository root as text, as the walk found it (repository_root for the folder
        of a file named on the command line). Outside any repository, the outermost of the working
        folder and the folders the user named that hold it; else the folder itself."""
        known = listed.get(folder)
        if known is None:
            repository = repository_root(Path(folder))
            if repository is not None:
                return widened(str(repository))
            real = str(real_folder(Path(folder)))
        else:
            real, root = known
            if root is not None:
                return widened(root)
        inside = real + os.sep
        holding = [name for name, prefix in walked if inside.startswith(prefix)]
        if working is not None and inside.startswith(in_working):
            holding.append(working)
        return min(holding, key=len) if holding else real

    folders_with_files = found.folders or {os.path.dirname(name) for name in found.names}  # or a Discovered built by hand
    if found.named_inputs:  # a launch script, config or doc named on the command line: its repository's too
        folders_with_files = {*folders_with_files, *(os.path.dirname(name) for name in found.named_inputs)}
    # Paths only for the few roots, sorted as Paths (part by part) as before.
    roots = sorted({Path(root) for root in {root_of(folder) for folder in folders_with_files}})

    @functools.cache
    def named() -> frozenset[str]:  # asked only after an edit: a warm run over thousands of files resolves none
        return frozenset(found.resolved(name) for name in found.names)

    def reported(context: RepoContext) -> frozenset[str]:
        if not found.named_inputs:
            return named()
        return named() | _launched_by_named(found, context, cwd)

    contexts = []
    for root in roots:
        real_root = root.resolve()
        # When the walk covered the whole root, its launcher candidates are already known, and the
        # folders it listed are what a later run without a walk looks at to tell whether they changed.
        covered = any(root.is_relative_to(w) for w in found.walked)
        inside = os.path.join(str(root), "")
        launchers = [name for name in found.others if found.resolved(name).startswith(inside)] if covered else None
        folders = _listed_inside(found, real_root) if covered else []
        walked = True  # the launch files are those of a walk of the whole root
        if not covered and str(root) != working and repository_root(root) is None:
            # A file named alone outside any repository and the working folder (/tmp/train.py): only the
            # launchers beside it speak for it, or a file in a home folder would make us read all of it.
            launchers, folders, walked = _launchers_beside(root), [str(real_root)], False

        def track(candidates: list[Path], real_root: Path = real_root) -> list[Path]:
            return tracked_launchers(real_root, settings, candidates)

        cached = None
        if cache_folder is not None:
            from placement_lint.cache import Reuse, load_repo_context
            from placement_lint.changes import names_a_config

            # The Python files that may have become launchers since the context was built: of a walk of
            # the root, those the result cache does not vouch for; beside a file named alone, those there;
            # else (no walk) None: every Python file the context's search looked at, by its stamp.
            python_names: list[str] | None = None
            vouched = False
            if covered and unvouched is not None:
                python_names, vouched = _python_names(found, inside, settings, unvouched), True
            elif covered:
                python_names = _python_names(found, inside, settings)
            elif launchers is not None:
                python_names = _python_beside(root)
            # An edit since the context was built need not build it again (a pre-commit run after changing
            # a script) when no file the run reports is fed by it: with a launch script named on the command
            # line, those are the files it launches, as the cached context tells. A config named there can
            # be named by any file: then any edit builds the context again.
            reuse = None if names_a_config(found.named_inputs) else Reuse(reported, functools.partial(_facet_now, real_root))
            cached = load_repo_context(
                cache_folder, real_root, launchers, base, settings, found.statuses, track, python_names, vouched, reuse
            )
        if cached is None:
            if launchers is None:
                candidates = launcher_candidates(real_root, settings, None, folders)
            else:
                candidates = [Path(name) for name in launchers]
            tracked = track(candidates)
            # Like the launchers: those the walk found, else the repository's, or only those beside a file named alone.
            if covered:
                python_searched = _python_names(found, inside, settings)
            else:
                python_searched = (
                    [str(p) for p in python_files(real_root, settings)] if launchers is None else _python_beside(root)
                )
            python_sources = python_launch_files(real_root, settings, _small_enough(python_searched, found.statuses))
            if candidates or tracked or python_sources:
                from placement_lint.context.repo import build_repo_context  # it parses: only when some file may launch

                if before_building is not None:
                    before_building(len(candidates) + len(tracked))
                with collections_paused():
                    cached = build_repo_context(
                        root,
                        settings,
                        display,
                        candidates,
                        _anchor_tokens(),
                        tracked,
                        stage,
                        jobs,
                        python_sources,
                        facets=cache_folder is not None,
                    )
            else:
                cached = RepoContext(real_root)  # nothing to read: no launch reaches any file
            cached.python_searched = python_searched
            if cache_folder is not None:
                from placement_lint.cache import save_repo_context

                save_repo_context(cache_folder, cached, base, settings, folders, walked, found.statuses)
        contexts.append(cached)
    return contexts


def _facet_now(root: Path, path: Path, role: list[object]) -> str | None:
    """A module's facet as it is now (context/facets.py). Whether it now starts a launcher is not
    asked here: the cache tests every changed Python file for that on every load (_python_restamped)."""
    from placement_lint.context.facets import facet_now  # the readers: only once a module was edited

    return facet_now(path, role, root, _anchor_tokens())


def _listed_inside(found: Discovered, real_root: Path) -> list[str]:
    """The folders the walk listed inside `real_root` (resolved), as their resolved paths."""
    top = str(real_root)
    inside = os.path.join(top, "")
    return [real for real, _ in found.roots.values() if real == top or real.startswith(inside)]


@functools.cache
def _anchor_tokens() -> tuple[bytes, ...]:
    """The tokens without which no rule can fire in a file, whichever rules are enabled (a cached
    launch context answers for every selection). Suppression comments are not among them: a module
    with only a noqa comment holds nothing a launch changes."""
    from placement_lint.rules import all_rules

    return tuple(sorted({token for rule in all_rules() if not rule.checks_suppressions for token in rule.anchor_tokens()}))


def _python_names(found: Discovered, inside: str, settings: Settings, among: list[str] | None = None) -> list[str]:
    """The Python files the walk found under a root (`inside`: its folder, with a trailing separator),
    or those of `among`, as a walk for launch files finds them (python_files): those `exclude` leaves
    out of the checks count, those `launch-exclude` covers do not."""
    names = among
    if names is None:
        names = sorted([*found.names, *found.python_launch_only]) if found.python_launch_only else found.names
    if settings.launch_exclude:
        launch_excluded = launch_excluded_by_settings(settings)
        names = [name for name in names if not launch_excluded(Path(name))]
    return [name for name in names if name.endswith(".py") and found.resolved(name).startswith(inside)]


def _small_enough(names: list[str], statuses: dict[str, os.stat_result]) -> list[str]:
    """Those that may be a launcher by their size: the walk's sizes spare opening the big library modules."""
    return [name for name in names if name not in statuses or statuses[name].st_size <= MAX_PYTHON_LAUNCHER_BYTES]


def _python_beside(folder: Path) -> list[str]:
    try:
        return sorted(str(p) for p in folder.iterdir() if p.name.endswith(".py") and p.is_file())
    except OSError:
        return []


def _launchers_beside(folder: Path) -> list[str]:
    try:
        return sorted(str(p) for p in folder.iterdir() if launcher_name(p.name) and p.is_file())
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
    (`--changed-since`); `progress(done, total)` hears of every file as it is done, and, if it has a
    `stage` method (report.progress.ProgressBar), of the finding of files and the launch context too."""
    cwd = cwd or Path.cwd()
    paths = list(paths)
    forget_listings()
    # A progress bar hears of the stages before the checks too; a plain callable, of the checks only.
    stage: Stage | None = getattr(progress, "stage", None)
    if stage is not None:
        stage("Finding files", 0, None)
    counted = functools.partial(stage, "Finding files", total=None) if stage is not None else None
    found = discover(paths, settings, also=launcher_name, force_exclude=options.force_exclude, counted=counted)
    cache = None
    if cache_folder is not None and not options.fixing:
        from placement_lint.cache import Cache  # with json and zlib: a run with --no-cache reads no cache

        cache = Cache(cache_folder, _settings_key(settings, options, cwd))
    # The files a clean entry does not answer for as they are: asked once, for the launch context (a
    # Python file among them may have become a launcher) and, in a run no launch reaches, for the lookups.
    unclean = cache.unanswered(found.names, found.statuses) if cache is not None else []
    ahead = _ScreenAhead(found, cache, settings, options, cwd)
    try:
        repos = repo_contexts(
            found,
            settings,
            cwd,
            cache_folder,
            ahead.start if _CAN_FORK and restrict is None else None,
            stage,
            _jobs(options),
            cache.unknown_python([*unclean, *found.python_launch_only], found.statuses) if cache is not None else None,
        )
    finally:
        screened_ahead = ahead.stop()
    # Names, not Paths, until a file needs one: a warm run over thousands of files makes few.
    files = found.names if restrict is None else [str(path) for path in restrict(found.files, repos)]
    if found.named_inputs:
        files = _with_affected(files, found, repos, settings, cwd)
    launches = Launches(repos)
    results: list[FileResult] = []
    errors = [f"{path}: no such file or directory" for path in found.missing]
    errors += [
        f"{display_path(path, cwd)}: {'cannot list this folder' if path.is_dir() else 'not a regular file, not read'}"
        for path in found.unreadable
    ]
    pending: list[_Pending] = []
    launched = cache is not None and bool(launches)  # asked once: a warm run looks up thousands of files
    statuses = found.statuses
    # A warm run: the clean, unchanged files no launch reaches are answered in one pass first.
    if cache is None or launched:
        looked_up = files
    else:
        looked_up = unclean if files is found.names else cache.unanswered(files, statuses)  # not restricted nor added to
    for name in looked_up:
        try:
            status = statuses.get(name) or os.stat(name)  # a Discovered built by hand has no statuses
            # What the cache must see unchanged besides the file: the evidence its launchers give it,
            # and what its importers do with what its functions return.
            launch_key = launches.digest(found.resolved(name)) if launched else ""
            cached = cache.lookup(name, status, launch_key) if cache is not None else None
            raw = digest = None
            if cached is None and cache is not None and cache.knows(name):
                # Touched but maybe unchanged (a checkout, a formatter): its bytes decide.
                raw = read_bytes(name)
                digest = content_hash(raw)
                cached = cache.lookup(name, status, launch_key, digest)
        except OSError as exc:
            path = Path(name)
            results.append(FileResult(display_path(path, cwd), error=f"cannot read: {exc.strerror or exc}", path=path))
            continue
        if cached is not None:
            if cached:
                path = Path(name)
                results.append(_from_cache(path, display_path(path, cwd), cached, raw))
            continue
        pending.append(_Pending(name, status, launch_key, raw, digest))
    done = len(files) - len(pending)
    if progress is not None:
        progress(done, len(files))
    interrupted = 0
    try:
        screening = _screen_all(pending, settings, options, cwd, launches, cache is not None, screened_ahead, found.resolved)
        for item, screened in screening:
            done += 1
            if progress is not None:
                progress(done, len(files))
            if screened.result is not None:
                results.append(screened.result)
            if cache is not None and screened.cacheable:
                findings = screened.result.findings if screened.result else []
                dependencies = screened.result.dependencies if screened.result else []
                cache.store(
                    item.name, item.status, screened.digest, item.launch_key, [f.violation for f in findings], dependencies
                )
    except KeyboardInterrupt:
        # Every file written so far was replaced whole (atomic writes); the rest are untouched.
        interrupted = len(files) - done
    if cache is not None:
        cache.save()
    results.sort(key=lambda r: r.display)
    warnings = [w for repo in repos for w in repo.warnings]
    return RunResult(results, len(files), errors, warnings, interrupted, settings.rule_url_base)


def _launched_by_named(found: Discovered, context: RepoContext, cwd: Path) -> frozenset[str]:
    """The files (resolved) that the launch scripts and docs named on the command line launch, by `context`."""
    from placement_lint.changes import affected

    chosen, _ = affected(list(context.by_file), [context], {Path(name) for name in found.named_inputs}, cwd)
    return frozenset(str(real_path(path)) for path in chosen)


def _with_affected(files: list[str], found: Discovered, repos: list[RepoContext], settings: Settings, cwd: Path) -> list[str]:
    """`files` and the Python files the launch scripts, configs and docs named on the command line
    launch or configure (`placement-lint check scripts/run.sh`, a pre-commit run where only a launch
    script is staged): those `--changed-since` would check again had only the named files changed.
    The configured excludes apply to them, as they are not named themselves."""
    from placement_lint.changes import affected, names_a_config

    named = {Path(name) for name in found.named_inputs}
    real_named = [real_path(path) for path in named]
    mine = [repo for repo in repos if any(path.is_relative_to(repo.root) for path in real_named)]
    if names_a_config(named):
        # A Python file that names a config by its name is checked again too: every file is a candidate.
        candidates = discover([repo.root for repo in mine], settings).files
    else:  # only the files the launches reach can be
        candidates = [path for repo in mine for path in repo.by_file]
    chosen, _ = affected(candidates, mine, named, cwd)
    if not chosen:
        return files
    known = {found.resolved(name) for name in files}
    reported = discover(chosen, settings, force_exclude=True).names  # `exclude` and `extend-exclude` apply
    added = [name for name in reported if found.resolved(name) not in known]
    return sorted([*files, *added]) if added else files


def add_noqa_comments(result: RunResult) -> None:
    """`--add-noqa`: suppress every remaining finding with a comment on its line, written like a fix
    (atomically, only if the file is unchanged since it was read, LibCST round trip first)."""
    from placement_lint.fixes.noqa import add_noqa
    from placement_lint.fixes.write import ChangedOnDisk, NotLossless, verify_lossless, write_atomically
    from placement_lint.notebook import NotebookSource

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
        file.source = source.with_text(text)
        file.findings = []


def run_source(raw: bytes, path: Path, settings: Settings, options: RunOptions, cwd: Path | None = None) -> RunResult:
    """Check source that is not (or not yet) on disk, an editor's buffer or stdin, as the file at
    `path`: its configuration, per-file settings and its repository's launches apply. Nothing is
    written, not even the cache; with `options.fix` the fixed text is the result's `source`."""
    from placement_lint.checker import FileChecker
    from placement_lint.context.repo import build_repo_context

    cwd = cwd or Path.cwd()
    path = Path(os.path.abspath(path))
    forget_listings()
    base = cwd.resolve()
    # Outside any repository, the working folder stands for one, as for `check` (repo_contexts).
    in_working = real_path(path).is_relative_to(base) and not is_shared_folder(str(base))
    root = repository_root(path) or (base if in_working else real_path(path).parent)
    repo = build_repo_context(root, settings, lambda p: display_path(p, base), None, _anchor_tokens())
    result = FileChecker(settings, options, cwd, Launches([repo])).check(path, raw, write=False)
    return RunResult([result], 1, [], list(repo.warnings), rule_url_base=settings.rule_url_base)


def _from_cache(path: Path, display: str, violations: list[Violation], raw: bytes | None = None) -> FileResult:
    """A file's cached findings, located in its text as it is now (unchanged, or the cache would not
    answer); `raw`: its bytes, when the cache's content check has just read them."""
    result = FileResult(display, path=path)
    try:
        source = read_source(path, raw if raw is not None else path.read_bytes())
    except (OSError, SourceError) as exc:
        result.error = str(exc)
        return result
    result.source = source
    result.findings = [finding_at(source, display, v) for v in violations]
    return result


def _settings_key(settings: Settings, options: RunOptions, cwd: Path) -> str:
    from placement_lint.cache import Cache

    # Every resolved setting (the excludes too: what a run reports may not hang on which settings a
    # cached answer was made under), the options that change a finding, where paths are shown from,
    # and the interpreter, whose grammar decides what parses. The release: the cache's folder.
    return Cache.settings_key(
        settings.enabled_codes(),
        settings._replace(root=settings.root.resolve(), codes=()),
        options.context,
        options.ignore_noqa,
        str(cwd.resolve()),
        sys.version_info[:2],
    )


class _Pending(NamedTuple):
    """A file the cache could not answer for."""

    name: str  # its Path is made where it is checked: in a pool worker, not while the run deals out files
    status: os.stat_result
    launch_key: str
    raw: bytes | None = None  # already read, for the cache's content check...
    digest: str | None = None  # ...which hashed it
    worth: bool = False  # screen_ahead.py found a rule could fire in it: the pre-check need not ask again
    screened: Screened | None = None  # already pre-checked, waiting to be parsed


def _screen_all(
    pending: list[_Pending],
    settings: Settings,
    options: RunOptions,
    cwd: Path,
    launches: Launches,
    hashing: bool,
    screened_ahead: dict[str, tuple[int, str | None]],
    resolved: Callable[[str], str],
) -> Iterator[tuple[_Pending, Screened]]:
    """Each pending file read, pre-checked and, if a rule could fire in it, checked. Big runs share
    all of it among processes; small ones pre-check here and share only the parsing, if that is big.
    `screened_ahead`: the pre-check's answers (and digests) for the files it could work out while the
    launch context was built (screen_ahead.py); a file no rule could fire in under its launches is done."""
    if not pending:
        return
    from placement_lint.precheck import WORTH_ALONE, WORTH_LAUNCHED

    if screened_ahead:
        left = []
        for item in pending:
            answer = screened_ahead.get(item.name) if item.raw is None else None
            if answer is None:
                left.append(item)
                continue
            verdict, digest = answer
            if not verdict & (WORTH_LAUNCHED if launches.reaches(resolved(item.name)) else WORTH_ALONE):
                yield item, Screened(digest)
            else:  # read (and hashed) again where it is checked: the child's copy is gone
                left.append(item._replace(worth=True))
        pending = left
    if _pooling(options, len(pending)) and sum(item.status.st_size for item in pending) >= SCREEN_POOL_BYTES:
        yield from _pooled(_checker(settings, options, cwd, launches), pending, _jobs(options), hashing)
        return
    precheck = _precheck(settings, options, cwd, launches)
    worth: list[_Pending] = []
    for item in pending:
        screened = precheck.pre_check(item.name, item.raw, hashing, item.digest, item.worth)
        if screened.raw is None:
            yield item, screened
        else:
            worth.append(item._replace(raw=None, screened=screened))
    if not worth:
        return  # nothing to parse: the checker, and the analyses it imports, are not needed
    checker = _checker(settings, options, cwd, launches)
    if (
        _pooling(options, len(worth))
        and sum(len(item.screened.raw or b"") for item in worth if item.screened) >= POOL_THRESHOLD_BYTES
    ):
        yield from _pooled(checker, worth, _jobs(options), hashing)
        return
    # What lives now (the launch contexts, their module trees) lives for the run: the collection after
    # each file need not scan it (the first one walked diffusers' whole context: 1 s of a one-file run).
    leave_alone_what_lives()
    try:
        for item in worth:
            yield item, checker.finish(item.name, item.screened)  # type: ignore[arg-type]
    finally:
        thaw()


class _ScreenAhead:
    """A child pre-checking the files the cache does not know (screen_ahead.py), started when a launch
    context is built from enough launch files to hide its fork, if the files are enough to pay for it."""

    def __init__(self, found: Discovered, cache: Cache | None, settings: Settings, options: RunOptions, cwd: Path) -> None:
        self.found, self.cache, self.settings, self.options, self.cwd = found, cache, settings, options, cwd
        self.child: ScreeningAhead | None = None

    def start(self, launch_files: int) -> None:
        found, cache = self.found, self.cache
        if self.child is not None or launch_files < SCREEN_AHEAD_LAUNCH_FILES or not _pooling(self.options, len(found.names)):
            return
        names = [name for name in found.names if cache is None or not cache.knows(name)]
        statuses = found.statuses
        if sum(statuses[name].st_size for name in names if name in statuses) < SCREEN_AHEAD_BYTES:
            return
        from placement_lint.screen_ahead import ScreeningAhead

        make_precheck = functools.partial(_precheck, self.settings, self.options, self.cwd)
        try:
            self.child = ScreeningAhead(names, make_precheck, cache is not None)
        except OSError:
            pass  # no process to spare: every file is pre-checked after the context, as without a child

    def stop(self) -> dict[str, tuple[int, str | None]]:
        """What the child worked out, by file name (nothing, if none was started)."""
        return self.child.stop() if self.child is not None else {}


def _precheck(settings: Settings, options: RunOptions, cwd: Path, launches: Launches | None = None) -> PreCheck:
    from placement_lint.precheck import PreCheck

    return PreCheck(settings, options, cwd, launches)


def _checker(settings: Settings, options: RunOptions, cwd: Path, launches: Launches | None = None) -> FileChecker:
    from placement_lint.checker import FileChecker

    return FileChecker(settings, options, cwd, launches)


def _pooling(options: RunOptions, files: int) -> bool:
    """Could sharing `files` among processes pay? (A run that writes fixes shares them too: the
    workers hand their fixed files back, and this process writes them; see `_pooled`.)"""
    return _jobs(options) >= 2 and files >= 2


def _jobs(options: RunOptions) -> int:
    return options.jobs or os.cpu_count() or 1


# What every pool worker gets once: inherited where processes fork, pickled once per worker where
# they spawn. Batches name files by their index in `_WORKER_PENDING`, so little crosses between processes.
_WORKER_CHECKER: FileChecker | None = None
_WORKER_PENDING: list[_Pending] = []
_WORKER_HASHING = False


def _start_worker(checker: FileChecker, pending: list[_Pending], hashing: bool, helper: bool = True) -> None:
    """`helper`: a process other than the run's own, whose fixed files the run's process writes, and
    whose collector is the tool's own to tune (the run's process may be an API caller's, or the
    editor server's: set there, the rare collections outlived the run and its garbage piled up, 7 GB
    over the test suite's 300 pooled runs; the command line tunes its own at start)."""
    global _WORKER_CHECKER, _WORKER_PENDING, _WORKER_HASHING
    checker.defers_writes = helper
    _WORKER_CHECKER, _WORKER_PENDING, _WORKER_HASHING = checker, pending, hashing
    if helper:
        collect_garbage_rarely()
    leave_alone_what_lives()


def _screen_batch(batch: list[int]) -> list[tuple[int, Screened | str | None]]:
    """Each file's index and what screening it gave: for a file with nothing to report and nothing
    read for it, only its digest (sending each result back whole cost a tenth of transformers' pooled
    time)."""
    checker = _WORKER_CHECKER
    assert checker is not None, "_start_worker runs first in every worker"
    done: list[tuple[int, Screened | str | None]] = []
    for index in batch:
        item = _WORKER_PENDING[index]
        screened = item.screened or checker.pre_check(item.name, item.raw, _WORKER_HASHING, item.digest, item.worth)
        screened = checker.finish(item.name, screened)
        trivial = screened.result is None and screened.raw is None and screened.cacheable
        done.append((index, screened.digest if trivial else screened))
    return done


def _pooled(checker: FileChecker, pending: list[_Pending], jobs: int, hashing: bool) -> Iterator[tuple[_Pending, Screened]]:
    # Big files first.
    ordered = sorted(range(len(pending)), key=lambda index: -pending[index].status.st_size)
    if _CAN_FORK:
        screened = _forked(checker, pending, _chunks(ordered, pending, jobs), hashing, jobs)
    else:
        screened = _executor(checker, pending, ordered, jobs, hashing)
    for item, answer in screened:
        if answer.result is not None and answer.result.unwritten is not None:
            answer = _written(checker, item.name, answer)
        yield item, answer


def _written(checker: FileChecker, name: str, screened: Screened) -> Screened:
    """A worker's fixed file, written here. The workers never write: an interrupt kills them, and one
    killed mid-write would leave a temp file beside the file it fixed. A file that changed since the
    worker read it, or cannot be written, is checked again here, which says what stops it."""
    from placement_lint.fixes.write import ChangedOnDisk, write_atomically

    result = screened.result
    assert result is not None and result.unwritten is not None and result.path is not None
    data, expected = result.unwritten
    result.unwritten = None
    try:
        write_atomically(result.path, data, expected)
    except (ChangedOnDisk, OSError):
        return Screened(screened.digest, checker.check(Path(name)))
    return screened


# Forking is cheap where the platform forks safely (process.CAN_FORK): two forks cost 2.5 ms where a
# ProcessPoolExecutor costs 23 ms to import, start and stop. A name of this module: tests turn it off.
_CAN_FORK = CAN_FORK
_CLAIMS_PER_WORKER = 64  # how finely the files are cut for the processes to take in turn


def _chunks(ordered: list[int], pending: list[_Pending], jobs: int) -> list[list[int]]:
    """The files (big first) cut into pieces the processes take in turn: each about a 64th of a
    process's bytes or files, so a big file is a piece of its own and small ones go together."""
    most_bytes = max(1, sum(pending[index].status.st_size for index in ordered) // (jobs * _CLAIMS_PER_WORKER))
    most_files = max(1, len(ordered) // (jobs * _CLAIMS_PER_WORKER))
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index in ordered:
        current.append(index)
        size += pending[index].status.st_size
        if size >= most_bytes or len(current) >= most_files:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks


class _Claims:
    """Which piece each process checks next: dealt in turn as the processes get free, not fixed up
    front by size (transformers' two fixed shares took 0.18 s and 0.31 s: what a file costs shows only
    once it is pre-checked). A counter in a file only this run knows, taken under a POSIX lock, which
    the kernel drops if the process holding it dies."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._fd = _anonymous_file()
        os.pwrite(self._fd, bytes(8), 0)

    def __iter__(self) -> Iterator[int]:
        import fcntl

        while True:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                taken = int.from_bytes(os.pread(self._fd, 8, 0), "little")
                os.pwrite(self._fd, (taken + 1).to_bytes(8, "little"), 0)
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
            if taken >= self.count:
                return
            yield taken

    def close(self) -> None:
        os.close(self._fd)


def _anonymous_file() -> int:
    if hasattr(os, "memfd_create"):  # Linux: no name, no folder, nothing left behind
        return os.memfd_create("placement-lint-claims")
    import tempfile

    handle = tempfile.TemporaryFile()
    return os.dup(handle.fileno())  # the duplicate keeps the file after `handle` is collected


def _forked(
    checker: FileChecker, pending: list[_Pending], chunks: list[list[int]], hashing: bool, jobs: int
) -> Iterator[tuple[_Pending, Screened]]:
    """This process and `jobs - 1` forked children take the pieces in turn; a child sends its results
    back pickled through a pipe. What a child that dies or sends nothing whole took is checked here."""
    import pickle

    claims = _Claims(len(chunks))
    children: list[tuple[int, int]] = []
    done: set[int] = set()
    try:
        for _ in range(jobs - 1):
            reader, writer = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: check what it takes, send the results, leave without cleaning up
                status = 1
                try:
                    os.close(reader)
                    _start_worker(checker, pending, hashing)  # a helper: what it fixes is written here
                    results = [item for number in claims for item in _screen_batch(chunks[number])]
                    with os.fdopen(writer, "wb") as out:
                        pickle.dump(results, out, protocol=pickle.HIGHEST_PROTOCOL)
                    status = 0
                finally:
                    os._exit(status)
            os.close(writer)
            children.append((pid, reader))
        _start_worker(checker, pending, hashing, helper=False)
        for number in claims:
            for index, screened in _screen_batch(chunks[number]):
                done.add(index)
                yield pending[index], _screened(screened)
        while children:
            pid, reader = children.pop(0)
            with os.fdopen(reader, "rb") as incoming:
                data = incoming.read()
            _, status = os.waitpid(pid, 0)
            try:
                sent = pickle.loads(data) if os.waitstatus_to_exitcode(status) == 0 else []
            except Exception:  # a truncated stream: the child was killed mid-write
                sent = []
            for index, screened in sent:
                done.add(index)
                yield pending[index], _screened(screened)
        left = [index for chunk in chunks for index in chunk if index not in done]
        if left:
            for index, screened in _screen_batch(left):
                yield pending[index], _screened(screened)
    finally:  # Ctrl-C, or the caller stopped reading: no child outlives the run
        thaw()  # this process checked a share: what it froze is the collector's again (an API caller's process)
        for pid, reader in children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            try:
                os.close(reader)
            except OSError:
                pass
        claims.close()


def _screened(screened: Screened | str | None) -> Screened:
    return screened if isinstance(screened, Screened) else Screened(screened)


def _executor(
    checker: FileChecker, pending: list[_Pending], ordered: list[int], jobs: int, hashing: bool
) -> Iterator[tuple[_Pending, Screened]]:
    from concurrent.futures import ProcessPoolExecutor, as_completed  # only when there is enough work to share

    # Small batches, so a worker that finishes early takes more.
    count = min(len(ordered), jobs * 8)
    batches = [ordered[i::count] for i in range(count)]
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(checker, pending, hashing))
    try:
        futures = [pool.submit(_screen_batch, batch) for batch in batches]
        # As each batch ends, so a progress bar moves; the run sorts the results afterwards.
        for future in as_completed(futures):
            for index, screened in future.result():
                yield pending[index], _screened(screened)
    except BaseException:  # Ctrl-C, or the caller stopped reading: drop the batches not started
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
