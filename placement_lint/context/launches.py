"""What the repository's launches say of each file, as data: what `repo` builds, the cache stores, and
the checker reads. Kept apart from the builder, so a run answered by the cache imports no analysis."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from placement_lint.records import NamedTuple
from placement_lint.source import content_hash

# orjson decodes the cache's JSON faster than json, as data only (2 MB, the warm 11,440-file monorepo:
# 1.7 ms instead of 6.2), but importing it costs more than json takes over a small cache (20 KB, trl:
# 38 us): it is imported for the first input this big.
_FAST_FROM_BYTES = 256 * 1024

if TYPE_CHECKING:  # a run the cache answers decodes no evidence unless a file is checked again
    from placement_lint.analysis.consumers import Consumer
    from placement_lint.context.evidence import Evidence
    from placement_lint.context.module_graph import ModuleGraph


class Launched(NamedTuple):
    """What the repository's launches say about one file."""

    evidence: tuple[Evidence, ...]
    used: frozenset[str]  # what of the file runs under the evidence (see RepoContext.used)
    consumers: dict[str, tuple[Consumer, ...]]  # see RepoContext.consumers
    calls: dict[str, list[dict[str, object]] | None]  # see RepoContext.calls


NOT_LAUNCHED = Launched((), frozenset(), {}, {})
_Value = TypeVar("_Value")


def decode_json(data: bytes) -> Any:
    """The cache's JSON. A string orjson refuses (a lone surrogate, from a path name that is not
    UTF-8, which json writes as an escape) goes to json, as does everything without orjson."""
    fast = _fast_decoder() if len(data) >= _FAST_FROM_BYTES else None
    if fast is not None:
        try:
            return fast(data)
        except ValueError:
            pass
    import json  # here: a run with no cache to read (pre-commit with --no-cache) need not import it

    return json.loads(data)


@functools.cache
def _fast_decoder() -> Callable[[bytes], Any] | None:
    try:
        from orjson import loads
    except ImportError:  # pragma: no cover - the fallback test hides it
        return None
    return loads  # type: ignore[no-any-return]


class Encoded:
    """The details of a cached context kept as bytes: each file's entry of each section is its own JSON
    text at a known place (`slices`: section -> name -> [start, length]), decoded only when that file
    is checked. A run after an edit checks one file; decoding every entry of a repository whose
    launches reach 580 modules (diffusers: 84 MB of evidence) cost it 2 s and 600 MB."""

    def __init__(self, text: bytes | memoryview, slices: dict[str, dict[str, list[int]]]) -> None:
        self._text = text
        self._slices = slices

    def __getstate__(self) -> dict[str, object]:
        # To a pool worker that does not fork: a view of the file's bytes does not pickle, its bytes do.
        return {"_text": bytes(self._text), "_slices": self._slices}

    def names(self, section: str) -> Collection[str]:
        return self._slices[section].keys()

    def text(self, section: str, name: str) -> bytes | None:
        slice_ = self._slices[section].get(name)
        return None if slice_ is None else bytes(self._text[slice_[0] : slice_[0] + slice_[1]])

    def value(self, section: str, name: str) -> Any:
        start, length = self._slices[section][name]  # KeyError when absent, as a dict
        return decode_json(bytes(self._text[start : start + length]))


class DecodedOnRead(MutableMapping[Path, _Value]):
    """A mapping read from JSON (keys: paths as strings) whose values are decoded when first read.
    Read-only: a context loaded from the cache is used as it is, never built further. Each value is
    its entry in `section` of `encoded`; `names`, when given, are its keys."""

    def __init__(
        self, encoded: Encoded, section: str, decode: Callable[[Any], _Value], names: Collection[str] | None = None
    ) -> None:
        self._encoded = encoded
        self._section = section
        self._decode = decode
        self._names = names
        self._decoded: dict[str, _Value] = {}

    def __getitem__(self, path: Path) -> _Value:
        key = str(path)
        if key not in self._decoded:
            if self._names is not None and key not in self._names:
                raise KeyError(path)  # as a dict would, without looking at the section
            self._decoded[key] = self._decode(self._encoded.value(self._section, key))
        return self._decoded[key]

    def __setitem__(self, path: Path, value: _Value) -> None:
        raise TypeError("a launch context loaded from the cache is read-only")

    def __delitem__(self, path: Path) -> None:
        raise TypeError("a launch context loaded from the cache is read-only")

    def __contains__(self, path: object) -> bool:
        return str(path) in self.names()

    def __iter__(self) -> Iterator[Path]:
        return (Path(key) for key in self.names())

    def stored(self, name: str) -> bytes | None:
        """`name`'s entry as its JSON text, while it is not decoded yet (None: decoded, or absent)."""
        if name in self._decoded or (self._names is not None and name not in self._names):
            return None
        return self._encoded.text(self._section, name)

    def names(self) -> Collection[str]:
        """The keys as strings: making Paths of thousands of them costs more than the rest of a warm run."""
        return self._names if self._names is not None else self._encoded.names(self._section)

    def __len__(self) -> int:
        return len(self.names())


def stored_text(entries: Mapping[Path, Any], path: Path) -> bytes | None:
    """`path`'s entry as the cache stored it, when it is still text (a context loaded from the cache)
    and not yet decoded: a caller looking for a few paths among thousands of entries then decodes only
    the entries whose text names them. None: read the entry."""
    return entries.stored(str(path)) if isinstance(entries, DecodedOnRead) else None


class PathList(Sequence[Path]):
    """Paths read from JSON as strings, made Paths when read."""

    def __init__(self, names: list[str]) -> None:
        self._names = names

    def __getitem__(self, index: int) -> Path:  # type: ignore[override]
        return Path(self._names[index])

    def __len__(self) -> int:
        return len(self._names)


class RepoContext:
    """What a repository's launchers say of its files (a plain class: creating a dataclass costs
    every run about 1 ms)."""

    def __init__(self, root: Path, warnings: list[str] | None = None) -> None:
        self.root = root
        # Mappings, not only dicts: a context loaded from the cache decodes an entry when it is read.
        self.by_file: MutableMapping[Path, tuple[Evidence, ...]] = {}
        # What of each file runs under its evidence: "__main__" (launched: its module-level code) and the
        # names importers use of it ("*": all of it).
        self.used: MutableMapping[Path, frozenset[str]] = {}
        self.warnings: list[str] = warnings if warnings is not None else []
        # What the context was built from, so a cache can tell when it is stale: the launcher candidates
        # the walk found, and every file read (launchers, configs, Python modules whose imports it followed).
        # (Sequences, not only lists: a context loaded from the cache makes Paths of them when read.)
        self.candidates: Sequence[Path] = []
        # Of the candidates, those read from git's index, not met by a walk (under an ignored folder).
        self.tracked: Sequence[Path] = []
        self.inputs: Sequence[Path] = []
        # The Python files found to start a launcher (python_launch_files), and every Python file the
        # search for them looked at: one edited into a launcher makes a cached context stale.
        self.python_sources: Sequence[Path] = []
        self.python_searched: Sequence[str] = []
        # Launched scripts read only for their import lines: a change elsewhere in them changes nothing here.
        self.import_only: Collection[Path] = set()
        # Launch files read only for their commands, each with a digest of them: an edit that leaves
        # them as they were (a comment, an echo) changes nothing here.
        self.launch_digests: dict[Path, str] = {}
        # Per imported module, per top-level function: where its importers send what their calls of it
        # return (`model = load_model(...)` then `SFTTrainer(model=model)` in train.py), located in them.
        self.consumers: MutableMapping[Path, dict[str, tuple[Consumer, ...]]] = {}
        # Per imported module, per top-level function: the literal arguments, as {parameter: value},
        # with the literal defaults they leave, of each call its launched importers make of it; None
        # when an importer also passes the function around. They decide `if for_eval:` in it.
        self.calls: MutableMapping[Path, dict[str, list[dict[str, object]] | None]] = {}
        # Per file (resolved path, as a string): a digest of what the launches say of it, which the
        # result cache keys the file's findings on. Filled on demand, or from the cache.
        self.digests: dict[str, str] = {}
        # Per module the build summarized (a resolved path as a string), [its facet, its role]: what the
        # context takes from it for its own entries (context/facets.py); and per module, the modules its
        # import lines may load. A run checking a file edited since the build reuses the context when the
        # file's facet is the same and no file it checks imports the edited one.
        self.facets: dict[str, list[object]] = {}
        self.imports_of: dict[str, list[str]] = {}
        # The module graph the context was built with, for the class lookups of the files checked
        # next (None when the context came from the cache: never stored).
        self.graph: ModuleGraph | None = None

    def launched(self, path: Path) -> Launched | None:
        evidence = self.by_file.get(path)
        if evidence is None:
            return None
        return Launched(evidence, self.used.get(path, frozenset()), self.consumers.get(path, {}), self.calls.get(path, {}))

    def digest(self, name: str) -> str:
        """For a resolved path as a string (warm runs ask for thousands, so no Path is made when cached)."""
        if name not in self.digests:
            evidence, used, consumers, calls = self.launched(Path(name)) or NOT_LAUNCHED
            text = repr((evidence, sorted(used), sorted(consumers.items()), sorted(calls.items()))).encode()
            self.digests[name] = content_hash(text) if evidence else ""
        return self.digests[name]


class Launches:
    """What the repositories' launches say of each file, by resolved path. Asked per file: a
    context loaded from the cache decodes only the entries of the files that are checked."""

    def __init__(self, contexts: Iterable[RepoContext] = ()) -> None:
        self._by_name: dict[str, RepoContext] = {}
        self._graphs: dict[Path, ModuleGraph] = {}
        for context in contexts:
            if context.graph is not None:
                self._graphs[context.root] = context.graph
            by_file = context.by_file
            names = by_file.names() if isinstance(by_file, DecodedOnRead) else map(str, by_file)
            self._by_name.update(dict.fromkeys(names, context))

    def __bool__(self) -> bool:
        return bool(self._by_name)

    def graph(self, root: Path) -> ModuleGraph | None:
        """The module graph a launch context of `root` (resolved) was built with, if one was built this run."""
        return self._graphs.get(root)

    def parsed_tree(self, path: Path, raw: bytes) -> Any:
        """The tree a module graph of this run parsed of `path` (resolved) from exactly `raw`, if any
        (an ast.Module: typed loosely, so a run the cache answers imports no ast)."""
        for graph in self._graphs.values():
            tree = graph.parsed_tree(path, raw)
            if tree is not None:
                return tree
        return None

    def get(self, path: Path) -> Launched:
        context = self._by_name.get(str(path))
        return (context.launched(path) if context is not None else None) or NOT_LAUNCHED

    def reaches(self, name: str) -> bool:
        """For a resolved path as a string: does launch evidence reach the file (the pre-check's question)."""
        context = self._by_name.get(name)
        return context is not None and bool((context.launched(Path(name)) or NOT_LAUNCHED).evidence)

    def digest(self, name: str) -> str:
        """For a resolved path: "" when no launch reaches the file, else a digest of what the launches say of it."""
        context = self._by_name.get(name)
        if context is None:
            return ""
        return context.digest(name)
