"""The result cache, like ruff's: unchanged files are not read, parsed or checked again.

`.placement_lint_cache/<version>/<CRC of the settings>.json` (or `--cache-dir`, or PLACEMENT_LINT_CACHE_DIR)
holds what it is for (every resolved setting, the options that change a finding, the working folder,
the interpreter's version) and maps each checked file to its (mtime, size), content hash,
launch-context key and findings. A file
is trusted unchanged when its mtime and size match, as ruff does; else its bytes are hashed. The
launch-context key makes a changed launcher or config re-check the files it launches. A repository's
launch context (`repo-<CRC>.json`) is keyed by its root, the working folder and the settings that
decide which launch files count; it answers while no file it was built from changed, no file
appeared or went in the folders it was built from, git's index tracks the same launchers, and no
Python file that changed since (the result entries tell which; `repo-<CRC>.stamps` holds every Python
file's stamp for a run that walks no folder) starts a launcher it does not know. A module edited
since leaves it good for the files a run reports when the module's facet is the same and none of
them is fed by its calls (context/facets.py). JSON, never
pickle: a cache planted in a repository must not run code. Written atomically; with two runs at
once the last one to finish wins, and both are valid. Entries not seen for 30 days are dropped.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placement_lint.context.import_lines import import_lines_digest
from placement_lint.context.launcher_names import launcher_name, python_launch_files
from placement_lint.context.launches import DecodedOnRead, Encoded, PathList, RepoContext, decode_json
from placement_lint.records import NamedTuple
from placement_lint.settings import DEFAULT_EXCLUDE
from placement_lint.version import __version__

if TYPE_CHECKING:
    from placement_lint.analysis.consumers import Consumer
    from placement_lint.context.evidence import Evidence
    from placement_lint.rules.violation import Violation
    from placement_lint.settings import Settings

CACHE_DIR_NAME = ".placement_lint_cache"
_UNREAD = frozenset(DEFAULT_EXCLUDE)
_MODULE_SUFFIXES = (".py", ".ipynb")
_STALE_SECONDS = 30 * 24 * 3600
_SEEN_RESOLUTION = 24 * 3600
# 2: per-file launch digests in the repository context; 3: its details on a second line; 4: files named
# by a CRC of the key they hold, which they are checked against; 6: launch contexts keyed by their settings,
# with the folders their walk listed and git's index; a value written apart from its loads names each load
# (findings of the same shape, but an older entry lacks those spans); 7: launch contexts name their Python
# launchers, and keep beside them (`.stamps`) the stamp of every Python file their search looked at, and
# the modules' facets on a third line; 8: each file's details entry its own JSON text, where the index says
_FORMAT = 9
# Up to this many Python files the result cache does not vouch for are tested for a launcher directly
# (read, and parsed only when the byte tests pass); more are first narrowed to those whose stamp changed
# since the context was built, which costs parsing every Python file's stamp.
_TESTED_DIRECTLY = 32
# A cached context larger than this is not written again only to refresh what was looked at (see
# load_repo_context): writing it costs more than looking again.
_REWRITTEN_WHOLE_BYTES = 4 * 1024 * 1024


# A file's entry is a list, not an object, as it is stored: 30% less JSON to parse on every warm run.
# [mtime_ns, size, content hash, launch key, last read, findings, {dependency: stamp}]; a file with
# neither findings nor dependencies (nearly all of them) leaves the last two out: a warm run over
# 11,440 files decodes 23,000 fewer empty containers.
_MTIME, _SIZE, _HASH, _LAUNCH, _SEEN, _FINDINGS, _DEPENDENCIES = range(7)
_CLEAN = _FINDINGS  # the length of a clean file's entry


def _fresh(entry: object, now: int) -> bool:
    # A damaged entry is dropped, not trusted.
    return (
        isinstance(entry, list)
        and (
            len(entry) == _CLEAN
            or (len(entry) == 7 and isinstance(entry[_FINDINGS], list) and isinstance(entry[_DEPENDENCIES], dict))
        )
        and isinstance(entry[_SEEN], int)
        and now - entry[_SEEN] < _STALE_SECONDS
    )


def cache_dir(root: Path, explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    from_env = os.environ.get("PLACEMENT_LINT_CACHE_DIR")
    return Path(from_env) if from_env else root / CACHE_DIR_NAME


def _file_name(key: str) -> str:
    """A cache file's name for `key`. Not a cryptographic hash, which would cost a warm run the load of
    OpenSSL: the file holds its key, and a file whose key differs is not this one (only less cached)."""
    return f"{zlib.crc32(key.encode('utf-8', 'surrogatepass')):08x}"


class Cache:
    """The findings of each file, by path: `<CRC of the settings>.json` holds them all, and
    `<CRC>.jsonl` the entries runs changed since, one line per run, read over it. A run that changes
    a few entries appends them; one that changes many (or finds the log large) writes the whole file
    again and starts a new log. Any entry, older or newer, answers only for the file as it is now."""

    def __init__(self, folder: Path, settings_key: str) -> None:
        self.path = folder / __version__ / f"{_file_name(settings_key)}.json"
        self.log = self.path.with_suffix(".jsonl")
        self.key = settings_key  # stored in the file, which answers only for it
        self.entries: dict[str, list[Any]] = {}
        self.changed: set[str] = set()  # the paths whose entries this run changed
        self.now = int(time.time())  # once a run: a warm run looks up thousands of entries
        self._file_size = self._log_size = 0
        self._appendable = False  # the whole file and its log, if any, are this key's
        try:
            raw = self.path.read_bytes()
            data = decode_json(raw)
            if (
                isinstance(data, dict)
                and data.get("format") == _FORMAT
                and data.get("settings") == self.key
                and isinstance(data.get("files"), dict)
            ):
                self.entries = data["files"]
                self._file_size, self._appendable = len(raw), True
                self._read_log()
        except (OSError, ValueError):
            pass  # no cache yet, or a damaged one: start afresh

    def _header(self) -> bytes:
        return json.dumps({"format": _FORMAT, "settings": self.key}).encode("utf-8", "surrogatepass")

    def _read_log(self) -> None:
        """The entries changed since the whole file was written. A line cut short (a run stopped
        while appending) or damaged is skipped: its files are only checked again."""
        try:
            raw = self.log.read_bytes()
        except OSError:
            return  # no run changed anything since
        header, *batches = raw.split(b"\n")
        try:
            ours = decode_json(header) == decode_json(self._header())
        except ValueError:
            ours = False
        if not ours:  # another key's log (their names clash) or a damaged one: written afresh at the end
            self._appendable = False
            return
        self._log_size = len(raw)
        for line in batches:
            try:
                batch = decode_json(line)
            except ValueError:
                continue
            if isinstance(batch, dict):
                self.entries.update(batch)  # each entry is checked when it is looked up, as the file's are

    @staticmethod
    def settings_key(*parts: object) -> str:
        return json.dumps(parts, sort_keys=True, default=str)

    def knows(self, path: str | Path) -> bool:
        """An entry that could answer once the file's bytes are hashed (a damaged or stale one cannot)."""
        return _fresh(self.entries.get(str(path)), self.now)

    def unanswered(self, names: list[str], statuses: Mapping[str, os.stat_result]) -> list[str]:
        """Of `names` (files no launch reaches), those a clean entry does not answer for as they are,
        in order. The rest are what `lookup` would find clean, with nothing to update: a warm run's
        common case, asked in one loop (a lookup per file cost the 11,440-file monorepo 27 ms)."""
        entries, now = self.entries, self.now
        left = []
        for name in names:
            entry = entries.get(name)
            status = statuses.get(name)
            if (
                status is not None
                and entry.__class__ is list
                and len(entry) == _CLEAN  # type: ignore[arg-type]
                and entry[_LAUNCH] == ""  # type: ignore[index]
                and entry[_MTIME] == status.st_mtime_ns  # type: ignore[index]
                and entry[_SIZE] == status.st_size  # type: ignore[index]
                and entry[_SEEN].__class__ is int  # type: ignore[index]
                and now - entry[_SEEN] <= _SEEN_RESOLUTION  # type: ignore[index]
            ):
                continue
            left.append(name)
        return left

    def unknown_python(self, names: list[str], statuses: Mapping[str, os.stat_result]) -> list[str]:
        """Of `names`, the Python files no entry knows as they are (mtime and size): new or changed
        since a run checked them, so possibly a launcher now. Asked of what `unanswered` left: the
        files it answers for are known as they are."""
        entries = self.entries
        left = []
        for name in names:
            if not name.endswith(".py"):
                continue
            entry = entries.get(name)
            status = statuses.get(name)
            if (
                status is None
                or entry.__class__ is not list
                or len(entry) < _CLEAN  # type: ignore[arg-type]
                or entry[_MTIME] != status.st_mtime_ns  # type: ignore[index]
                or entry[_SIZE] != status.st_size  # type: ignore[index]
            ):
                left.append(name)
        return left

    def lookup(
        self, path: str | Path, status: os.stat_result, launch_key: str, digest: str | None = None
    ) -> list[Violation] | None:
        """The cached findings, if the file and its launch context are unchanged; `digest`: the
        file's content hash, which answers when its mtime or size changed."""
        key = path if isinstance(path, str) else str(path)
        entry = self.entries.get(key)
        if not _fresh(entry, self.now):
            return None
        if len(entry) == _CLEAN:  # type: ignore[arg-type]
            mtime, size, content, launch, seen = entry  # type: ignore[misc]
            findings = dependencies = None
        else:
            mtime, size, content, launch, seen, findings, dependencies = entry  # type: ignore[misc]
        if launch != launch_key:
            return None
        if dependencies and any(_stamp(d) != stamp for d, stamp in dependencies.items()):
            return None  # a config the file names changed (or appeared)
        same_stat = mtime == status.st_mtime_ns and size == status.st_size
        if not same_stat and (digest is None or content != digest):
            return None
        if not same_stat:
            entry[_MTIME], entry[_SIZE] = status.st_mtime_ns, status.st_size  # type: ignore[index]
            self.changed.add(key)
        if self.now - seen > _SEEN_RESOLUTION:
            # Often enough that an entry read every day is kept, rarely enough that a warm run
            # over an unchanged tree rewrites the cache at most once a day.
            entry[_SEEN] = self.now  # type: ignore[index]
            self.changed.add(key)
        if not findings:  # most files: nothing to decode
            return []
        try:
            return _violations(findings)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def store(
        self,
        path: str | Path,
        status: os.stat_result,
        digest: str,
        launch_key: str,
        violations: list[Violation],
        dependencies: list[Path] = (),  # type: ignore[assignment]
    ) -> None:
        entry: list[Any] = [None] * _CLEAN
        entry[_MTIME], entry[_SIZE], entry[_HASH] = status.st_mtime_ns, status.st_size, digest
        entry[_LAUNCH], entry[_SEEN] = launch_key, self.now
        if violations or dependencies:
            entry += [_violations_json(violations), {str(d): _stamp(d) for d in dependencies}]
        self.entries[str(path)] = entry
        self.changed.add(str(path))

    def save(self) -> None:
        """Nothing when nothing changed; else the changed entries appended to the log, or, when they
        are many or the log has grown to an eighth of the file, the whole file written again."""
        if not self.changed:
            return
        few = len(self.changed) * 4 <= len(self.entries) and self._log_size * 8 <= self._file_size
        if self._appendable and few:
            batch = {path: self.entries[path] for path in sorted(self.changed)}
            if _append(self.log, self._header(), json.dumps(batch).encode("utf-8", "surrogatepass")):
                return
        fresh = {p: e for p, e in self.entries.items() if _fresh(e, self.now)}
        _write_json(self.path, {"format": _FORMAT, "settings": self.key, "files": fresh})
        try:
            os.unlink(self.log)  # its entries are in the file now
        except OSError:
            pass  # none, or it stays: its entries still answer only for unchanged files


def _append(path: Path, header: bytes, batch: bytes) -> bool:
    """One line added to a log, in one write (a new log starts with its header). With two runs at
    once, each line is whole (O_APPEND); a run stopped mid-write leaves a line that is skipped."""
    try:
        handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
    except OSError:
        return False
    try:
        start = b"" if os.fstat(handle).st_size else header + b"\n"
        os.write(handle, start + batch + b"\n")
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


# -- the repository's launch context --------------------------------------------------------------


def _stamp(path: Path | str) -> list[int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_mtime_ns, status.st_size]


def load_repo_context(
    folder: Path,
    root: Path,
    candidates: list[str] | None,
    cwd: Path,
    settings: Settings,
    statuses: Mapping[str, os.stat_result] | None = None,
    track: Callable[[list[Path]], list[Path]] | None = None,
    python_names: list[str] | None = None,
    vouched: bool = False,
    reuse: Reuse | None = None,
) -> RepoContext | None:
    """The cached launch context of `root` (resolved) as seen from `cwd` (its evidence names paths
    relative to it) under `settings`, if nothing it was built from changed. `candidates`: the launcher
    files a walk found now, or those beside a file named outside any repository; None when no walk
    covered the root (a pre-commit run on a few files): then only a context built from a walk of the
    whole root answers. Either way no file may have appeared or gone in the folders it was built
    from (a launch file, or a script a launch names that was missing), and `track(walked)`, the launch
    files git tracks beyond those, is asked again when git's index changed. Per-file entries are
    decoded when read: a warm run over thousands of launched scripts needs only their digests.
    `statuses`: files the walk has just looked at, by path (most inputs are the launched scripts: not
    looked at twice). A Python file edited into a launcher makes the context stale too: `python_names`
    are the Python files a walk met now that may have become one (`vouched`: all of them the result
    cache does not know unchanged, so they are tested for a launcher directly when few), None without
    a walk (every Python file the context's search looked at is then looked at by its stamp).
    `reuse`: the files the run reports, and how to work out a module's facet now: a module edited
    since the build leaves the context good for them when its facet is the same and none of them is
    fed by its calls (context/facets.py); None: any edit builds the context again."""
    statuses = statuses or {}
    path = _repo_file(folder, root, cwd, settings)
    try:
        # Line 1: what tells whether the context is current, and each launched file's digest. Line 2:
        # what the launches say of each file, parsed only when a file has to be checked again.
        # Line 3: the facets, read only when a module it was built from was edited.
        # Views of the one read, not copies: the details of a repository whose launches reach hundreds of
        # modules are tens of megabytes.
        raw = path.read_bytes()
        first = raw.find(b"\n")
        second = raw.find(b"\n", first + 1) if first >= 0 else -1
        if second < 0:
            return None  # cut short
        whole = memoryview(raw)
        index, details, facets = raw[:first], whole[first + 1 : second], whole[second + 1 :]
        data = decode_json(index)
        if (
            data.get("format") != _FORMAT
            or data["key"] != _repo_key(root, cwd, settings)
            or data["details"] != _checksum(details)
            or data["facets"] != _checksum(facets)
        ):
            return None  # another version's, or cut short (the cache is not written durably)
        if candidates is not None:
            if sorted(candidates) != data["candidates"]:
                return None
        elif not data["walked"]:
            return None  # built from the launchers beside a file outside any repository: not from a walk of it
        refreshed = False
        for name, stamp in data["folders"].items():
            now = _folder_stamp(name)
            if now == stamp[0]:
                continue
            # Touched: a file was added, removed or replaced (an editor's save). Only the names decide.
            # The stamp kept is the one taken before the names were read: a change after it shows next run.
            if _folder_names(name) != stamp[1]:
                return None
            stamp[0], refreshed = now, True
        index_now = _stamp(_git_index(root))
        if data["git_index"] != index_now:
            walked = [Path(name) for name in data["candidates"]]
            if track is None or sorted(map(str, track(walked))) != data["tracked"]:
                return None
            data["git_index"], refreshed = index_now, True
        digests, commands = data.get("import_only", {}), data["launch_commands"]
        edited: list[str] = []
        for input_path, stamp in data["inputs"].items():
            status = statuses.get(input_path)
            now = [status.st_mtime_ns, status.st_size] if status is not None else _stamp(input_path)
            if (
                now != stamp
                and not _same_imports(Path(input_path), digests.get(input_path))
                and not _same_commands(Path(input_path), root, commands.get(input_path))
            ):
                if reuse is None:
                    return None
                edited.append(input_path)
        stamps = _Stamps(path, data["stamps"])
        restamped = _python_restamped(root, settings, data["python_sources"], stamps, statuses, python_names, vouched)
        if restamped is None:
            return None  # a Python file became a launcher
        if restamped:
            data["stamps"], refreshed = _checksum(restamped), True
        # What was looked at again need not be the next run's work, unless saving it means writing a
        # large context whole (84 MB for diffusers' whole import closures, on every pre-commit run): then
        # the next run looks again (a stat per folder or Python file, and the few changed files' bytes).
        if refreshed and len(raw) <= _REWRITTEN_WHOLE_BYTES:
            if restamped:
                _write(stamps.path, restamped)
            _write(path, b"".join((json.dumps(data).encode(), b"\n", details, b"\n", facets)))
        context = RepoContext(root, warnings=list(data["warnings"]))
        # Decoders are module functions, not lambdas: the context travels to pool workers that do not fork.
        if not _sound_slices(data["slices"], len(details), data["digests"]):
            return None  # damaged or planted: an entry would be read from the wrong bytes, or not at all
        encoded = Encoded(details, data["slices"])
        context.digests = data["digests"]  # one per file the launches reach: the keys of by_file
        context.by_file = DecodedOnRead(encoded, "by_file", _evidence_from_json, frozenset(context.digests))
        context.used = DecodedOnRead(encoded, "used", frozenset)
        context.consumers = DecodedOnRead(encoded, "consumers", _consumers_from_json)
        context.calls = DecodedOnRead(encoded, "calls", dict)
        context.candidates = PathList([*data["candidates"], *data["tracked"]])
        context.tracked = PathList(data["tracked"])
        context.inputs = PathList(list(data["inputs"]))
        context.import_only = PathList(list(digests))
        # Asked of the context as loaded: the files a named launch script runs are known only from it.
        if edited and not _still_holds(edited, decode_json(bytes(facets)), reuse, context):  # type: ignore[arg-type]
            return None
        return context
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None


def save_repo_context(
    folder: Path,
    context: RepoContext,
    cwd: Path,
    settings: Settings,
    listed: Iterable[str],
    walked: bool = True,
    statuses: Mapping[str, os.stat_result] | None = None,
) -> None:
    """`listed`: the folders the context was built from: those the walk that found its launch files
    listed; `walked`: whether that walk covered the whole root (not when the launch files are only
    those beside a file named outside any repository, in its folder). `statuses`: files the walk has
    just looked at, by path (not looked at twice)."""
    from placement_lint.cache_json import consumers_json, evidence_json

    try:  # before the folders are looked at: the cache's own folder appearing changes nothing
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    tracked = set(context.tracked)
    index = {
        "format": _FORMAT,
        "key": _repo_key(context.root, cwd, settings),
        # The walk's candidates, which a later walk is compared with; the tracked ones apart.
        "candidates": sorted(str(path) for path in context.candidates if path not in tracked),
        "tracked": sorted(map(str, tracked)),
        "walked": walked,
        # What tells whether a file appeared or went (a launch file a run that walks no folder does
        # not see, a missing script a launch names, a module an import names): the folders' mtimes
        # (an entry added, removed or renamed changes its folder's) and names; and git's index.
        "folders": {name: [_folder_stamp(name), _folder_names(name)] for name in dict.fromkeys(listed)},
        "git_index": _stamp(_git_index(context.root)),
        "inputs": {str(p): _stamp(p) for p in context.inputs},
        "import_only": {str(p): _digest(p) for p in context.import_only},
        "launch_commands": {str(p): digest for p, digest in context.launch_digests.items()},
        "digests": {str(p): context.digest(str(p)) for p in context.by_file},
        "warnings": context.warnings,
        "python_sources": sorted(map(str, context.python_sources)),
    }
    sections: dict[str, dict[str, object]] = {
        "by_file": {str(p): [evidence_json(e) for e in items] for p, items in context.by_file.items()},
        "used": {str(p): sorted(names) for p, names in context.used.items()},
        "consumers": {str(p): consumers_json(by_name) for p, by_name in context.consumers.items()},
        "calls": {str(p): by_name for p, by_name in context.calls.items()},
    }
    # Each entry its own JSON text, where the index says: a run decodes only the files it checks.
    pieces: list[bytes] = []
    slices: dict[str, dict[str, list[int]]] = {}
    at = 0
    for section, entries in sections.items():
        placed = slices[section] = {}
        for name, value in entries.items():
            piece = json.dumps(value).encode()
            placed[name] = [at, len(piece)]
            pieces.append(piece)
            at += len(piece)
    encoded = b"".join(pieces)
    index["slices"] = slices
    index["details"] = _checksum(encoded)
    facets = json.dumps({"facets": context.facets, "imports_of": context.imports_of}).encode()
    index["facets"] = _checksum(facets)
    # Beside it, read only when some Python file may have changed: each searched file's stamp.
    statuses = statuses or {}
    stamped: dict[str, list[int] | None] = {}
    for name in context.python_searched:
        status = statuses.get(name)
        stamped[name] = [status.st_mtime_ns, status.st_size] if status is not None else _stamp(name)
    stamps = _stamps_line(context.root, stamped)
    index["stamps"] = _checksum(stamps)
    path = _repo_file(folder, context.root, cwd, settings)
    _write(_Stamps(path).path, stamps)  # apart: a run that walks the repository seldom reads them
    # json.dumps escapes every newline inside strings: the first newline ends the index, the second the details.
    _write(path, json.dumps(index).encode() + b"\n" + encoded + b"\n" + facets)


class Reuse(NamedTuple):
    """What a run tells the cache so an edit need not build a launch context again: the files it
    reports (resolved paths) as the loaded context tells them (a named launch script reports what it
    launches), and a module's facet as it is now (None: it cannot tell)."""

    reported: Callable[[RepoContext], Collection[str]]
    facet: Callable[[Path, list[object]], str | None]


def _still_holds(edited: list[str], stored: dict[str, Any], reuse: Reuse, context: RepoContext) -> bool:
    """The context holds for the files the run reports although `edited` changed since it was built:
    each edited module's facet is the same, and no reported file imports one of them, directly or
    not (what their function bodies do decides only the entries of the modules they import)."""
    from placement_lint.context.facets import descendants

    facets, imports_of = stored["facets"], stored["imports_of"]
    for name in edited:
        known = facets.get(name)
        if not isinstance(known, list) or len(known) != 2 or reuse.facet(Path(name), known[1]) != known[0]:
            return False
    reported = reuse.reported(context)
    return not any(name in reported for name in descendants(edited, imports_of))


class _Stamps:
    """A launch context's Python stamps, in a file beside it (`repo-<CRC>.stamps`), read when first
    asked for and checked against the checksum the context holds of them."""

    def __init__(self, context_file: Path, checksum: list[int] | None = None) -> None:
        self.path = context_file.with_suffix(".stamps")
        self._checksum = checksum
        self._line: bytes | None = None

    def line(self) -> bytes:
        if self._line is None:
            line = self.path.read_bytes()
            if _checksum(line) != self._checksum:
                raise ValueError("the stamps are not those the launch context was saved with")
            self._line = line
        return self._line


def _stamps_line(root: Path, stamps: Mapping[str, list[int] | None]) -> bytes:
    """Each Python file's stamp, compact, as a run over a few files reads all of them: its name
    relative to the root (when it is inside), and its mtime and size in one flat list ([-1, -1]: gone)."""
    top = os.path.join(str(root), "")
    names: list[str] = []
    numbers: list[int] = []
    for name, stamp in stamps.items():
        names.append(name[len(top) :] if name.startswith(top) else name)
        numbers += stamp if stamp is not None else _GONE
    return json.dumps({"names": names, "stamps": numbers}).encode("utf-8", "surrogatepass")


_GONE = [-1, -1]


def _recorded_stamps(root: Path, line: bytes) -> dict[str, list[int] | None]:
    data = decode_json(line)
    top = os.path.join(str(root), "")
    numbers = data["stamps"]
    return {
        os.path.join(top, name): None if mtime == -1 else [mtime, size]
        for name, mtime, size in zip(data["names"], numbers[0::2], numbers[1::2], strict=True)
    }


def _restat(root: Path, line: bytes) -> dict[str, list[int] | None]:
    """Of the files the stamps `line` holds, those whose stamp is not that now, with their stamp now.
    A run over a few files asks this of every Python file of the repository: one tight loop of a
    stat each, relative to the root's folder (6 ms for transformers' 2,860 files in a general loop
    over absolute names, 3 ms here)."""
    data = decode_json(line)
    names, numbers = data["names"], data["stamps"]
    top = os.path.join(str(root), "")
    changed: dict[str, list[int] | None] = {}
    stat = os.stat
    try:
        folder = os.open(root, os.O_RDONLY) if os.stat in os.supports_dir_fd else None
    except OSError:
        folder = None
    try:
        for name, mtime, size in zip(names, numbers[0::2], numbers[1::2], strict=True):
            try:
                status = stat(name, dir_fd=folder) if folder is not None else stat(os.path.join(top, name))
            except OSError:
                if mtime != -1:
                    changed[os.path.join(top, name)] = None
                continue
            if status.st_mtime_ns != mtime or status.st_size != size:
                changed[os.path.join(top, name)] = [status.st_mtime_ns, status.st_size]
    finally:
        if folder is not None:
            os.close(folder)
    return changed


def _changed_stamps(
    names: list[str], recorded: dict[str, list[int] | None], statuses: Mapping[str, os.stat_result]
) -> dict[str, list[int] | None]:
    changed: dict[str, list[int] | None] = {}
    for name in names:
        status = statuses.get(name)
        now = [status.st_mtime_ns, status.st_size] if status is not None else _stamp(name)
        if now != recorded.get(name, _GONE):
            changed[name] = now
    return changed


def _python_restamped(
    root: Path,
    settings: Settings,
    sources: list[str],
    stamps: _Stamps,
    statuses: Mapping[str, os.stat_result],
    names: list[str] | None,
    vouched: bool,
) -> bytes | None:
    """None when one of the Python files that may have changed (`names`, or all of `stamps` when None)
    now starts a launcher the context does not know of; else the stamps line to write back when some
    changed and were tested (b"" when none was). A launcher the context knows is one of its inputs:
    a change to it was looked at already."""
    known = set(sources)
    if vouched and names is not None and len(names) <= _TESTED_DIRECTLY:
        tested = [name for name in names if name not in known]
        return None if tested and python_launch_files(root, settings, tested) else b""
    if names is None:
        changed = _restat(root, stamps.line())
        recorded = None
    else:
        recorded = _recorded_stamps(root, stamps.line())
        changed = _changed_stamps(names, recorded, statuses)
    if not changed:
        return b""
    tested = [name for name, now in changed.items() if now is not None and name not in known]
    if tested and python_launch_files(root, settings, tested):
        return None
    if recorded is None:
        recorded = _recorded_stamps(root, stamps.line())
    recorded.update(changed)
    return _stamps_line(root, recorded)


def _folder_stamp(folder: str) -> int | None:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None


def _folder_names(folder: str) -> int | None:
    """A digest of the names in a folder that could change a launch context by appearing: folders,
    Python files and notebooks (a script a launch names, a module an import names), launch files. Not
    the others: a config or pin file is an input whether it was there or not (context.configs,
    context.pins), and an output (`train.log`, `model.bin`) launches nothing. Nor those never read:
    caches, environments, `.git` (whose index is looked at on its own)."""
    try:
        with os.scandir(folder) as listing:
            names = sorted(
                entry.name
                for entry in listing
                if entry.name not in _UNREAD
                and (entry.name.endswith(_MODULE_SUFFIXES) or launcher_name(entry.name) or entry.is_dir())
            )
    except OSError:
        return None
    return zlib.crc32("\0".join(names).encode("utf-8", "surrogateescape"))


def _git_index(root: Path) -> Path:
    return root / ".git" / "index"


_SECTIONS = ("by_file", "used", "consumers", "calls")


def _sound_slices(slices: object, length: int, digests: object) -> bool:
    """The index's places of the details' entries are as save_repo_context writes them: the four
    sections, the entries one after the other, covering the details exactly (a place off by a byte,
    or past the end, would read the wrong bytes), and an evidence entry for every file the index has
    a digest of."""
    if not isinstance(slices, dict) or sorted(slices) != sorted(_SECTIONS) or not isinstance(digests, dict):
        return False
    places: list[tuple[int, int]] = []
    for section in _SECTIONS:
        entries = slices[section]
        if not isinstance(entries, dict):
            return False
        for place in entries.values():
            if not (isinstance(place, list) and len(place) == 2 and all(type(number) is int for number in place)):
                return False
            places.append((place[0], place[1]))
    at = 0
    for start, size in sorted(places):
        if start != at or size <= 0:
            return False
        at = start + size
    return at == length and all(name in slices["by_file"] for name in digests)


def _checksum(details: bytes | memoryview) -> list[int]:
    """Tells a details line cut short or damaged from the one written, before a run relies on it: it is
    parsed only later, when a file is checked again, where a damaged one could no longer be rebuilt."""
    return [len(details), zlib.adler32(details)]


def _digest(path: Path) -> str | None:
    try:
        return import_lines_digest(path.read_bytes())
    except OSError:
        return None


def _same_imports(path: Path, digest: str | None) -> bool:
    return digest is not None and _digest(path) == digest


def _same_commands(path: Path, root: Path, digest: str | None) -> bool:
    """A launch file read only for its commands gives the same ones (an edited comment or echo)."""
    if digest is None:
        return False
    from placement_lint.context.repo import launch_file_digest  # the launch readers: only once one was edited

    return launch_file_digest(path, root) == digest


def _repo_key(root: Path, cwd: Path, settings: Settings) -> str:
    """What a launch context is for: its root, where paths are shown from, and the settings that
    decide which launch files count (`exclude` does not: it decides what is reported)."""
    launch_settings = json.dumps([str(settings.root), settings.launch_exclude, settings.respect_gitignore])
    return f"{root}\0{cwd}\0{launch_settings}"


def _repo_file(folder: Path, root: Path, cwd: Path, settings: Settings) -> Path:
    return folder / __version__ / f"repo-{_file_name(_repo_key(root, cwd, settings))}.json"


def _write_json(path: Path, data: object) -> None:
    _write(path, json.dumps(data).encode("utf-8"))


def _write(path: Path, content: bytes) -> None:
    from placement_lint.fixes.write import replace_file  # tempfile and shutil: only a run that writes pays for them

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ignore = path.parents[1] / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Automatically created by placement-lint.\n*\n", encoding="utf-8")
        replace_file(path, content, 0o600, durable=False)
    except OSError:
        pass  # a read-only tree still gets its results, just no cache


# What findings and launch evidence are made of is imported only when a run has some to read or write:
# a warm run over clean files decodes none. Decoders are module functions, not lambdas: a context
# travels to pool workers that do not fork.


def _violations(items: list[dict[str, object]]) -> list[Violation]:
    if not items:
        return []
    from placement_lint.cache_json import violation_from_json

    return [violation_from_json(item) for item in items]


def _violations_json(violations: list[Violation]) -> list[dict[str, object]]:
    if not violations:
        return []
    from placement_lint.cache_json import violation_json

    return [violation_json(v) for v in violations]


def _evidence_from_json(items: list[dict[str, object]]) -> tuple[Evidence, ...]:
    from placement_lint.cache_json import evidence_from_json

    return tuple(evidence_from_json(e) for e in items)


def _consumers_from_json(by_name: dict[str, list[list[str]]]) -> dict[str, tuple[Consumer, ...]]:
    from placement_lint.cache_json import consumers_from_json

    return consumers_from_json(by_name)
