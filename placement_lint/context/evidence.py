"""The context as data: evidence items, each with where it was seen, and the setup they add up to.

Evidence can come from the file itself, from an override (CLI, pragma, config), and from launch
scripts and configs elsewhere in the repository; nothing here assumes which.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from placement_lint.analysis.consumers import Consumer
from placement_lint.distributed import SINGLE, Mode, Setup
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple, Record

if TYPE_CHECKING:  # a context read back from the cache needs no call graph, nor any parser
    from placement_lint.analysis.arguments import Fields
    from placement_lint.analysis.callgraph import Parts


class Kind(enum.Enum):
    DDP = "DDP"
    DEEPSPEED = "DEEPSPEED"
    ZERO3 = "ZERO3"  # DeepSpeed with stage 3 known
    FSDP = "FSDP"
    POSSIBLE = "POSSIBLE"  # medium evidence: written for several processes, not proof
    SINGLE = "SINGLE"  # a launch that runs the file in one process


class Evidence(NamedTuple):
    kind: Kind
    path: str
    line: int
    text: str
    zero_stage: int | None = None  # for DEEPSPEED evidence whose config shows a stage below 3
    origin: str = "file"  # "file": seen in the Python file; "launch": a command that runs it; "import": via an importer
    chain: tuple[str, ...] = ()  # launch/import: the file, the files that import it, ..., the launched script
    arguments: tuple[tuple[str, str], ...] = ()  # launch: script arguments (`--q_lora True` -> ("q_lora", "True"))
    single_process: bool = False  # launch: one process (`python train.py --deepspeed ds.json`, `--num_gpus 1`)
    one_gpu: bool = False  # launch: each process sees one GPU (CUDA_VISIBLE_DEVICES=0, --gpus-per-task 1)
    bypass: bool = False  # launch: ACCELERATE_BYPASS_DEVICE_MAP=true in its environment
    cell: int | None = None  # in a notebook: the cell, and `line` is the line in it
    # launch: the repository's pins of the libraries rules ask about, as (package, PEP 440 specifier, where)
    pins: tuple[tuple[str, str, str], ...] = ()
    # launch/import: the launched script's parser fields ((key, *analysis.arguments.Field)), when the repository
    # pass read them: a module the script imports reads `args.use_4bit` without seeing the parser.
    parser: tuple[tuple[str, ...], ...] = ()
    entry: str = ""  # launch: the function a console script runs ("": the file's own code)
    configs: tuple[str, ...] = ()  # launch: the config files read to tell its setup, as the run names them

    @property
    def where(self) -> str:
        return f"{self.path}:cell {self.cell}:{self.line}" if self.cell is not None else f"{self.path}:{self.line}"

    def describe(self, here: str) -> str:
        """For a message. Launch evidence already tells its chain; in-file evidence gets its line."""
        if self.origin == "launch":
            return f"{self.chain[0]} is launched by {self.text}"
        if self.origin == "import":
            through = f" through {' and '.join(self.chain[1:-1])}" if len(self.chain) > 2 else ""
            return f"{self.chain[0]} is used by {self.chain[-1]}{through}, which is launched by {self.text}"
        if self.path != here:
            return f"{self.text}, {self.where}"
        return f"{self.text}, {'' if self.cell is None else f'cell {self.cell}, '}line {self.line}"

    def to_json(self) -> dict[str, object]:
        text = self.text if self.origin == "file" else self.describe(self.path)
        return {"kind": self.kind.value, "where": self.where, "text": text, "origin": self.origin}


class Override(NamedTuple):
    setup: Setup
    source: str  # "--context", "pragma at train.py:3", "pyproject.toml per-file-context"


# Shown in a launch's evidence, and read by rules: FSDP then loads on rank 0 and skips device_map dispatch.
EFFICIENT_LOADING = "fsdp_cpu_ram_efficient_loading true"
# Shown in a launch's evidence, and read by rules: accelerate < 1.0 then creates no HfDeepSpeedConfig, so
# transformers does not see ZeRO-3 when the model loads (accelerate utils/dataclasses.py set_deepspeed_weakref).
ZERO3_INIT_OFF = "zero3_init_flag false"
_STRENGTH = (Kind.ZERO3, Kind.DEEPSPEED, Kind.FSDP, Kind.DDP)
_DISTRIBUTED_KINDS = frozenset(_STRENGTH)
_RANK = {Mode.DEEPSPEED: 0, Mode.FSDP: 1, Mode.DDP: 2, Mode.POSSIBLE: 3, Mode.SINGLE: 4}


def _strength(context: Context) -> tuple[int, int]:
    return (_RANK.get(context.setup.mode, 9), -(context.setup.zero_stage or 0))


def _group_launches(
    external: tuple[Evidence, ...], read: frozenset[str], local: Fields
) -> list[tuple[tuple[tuple[str, str, str], ...], tuple[Evidence, ...]]]:
    """Launches that differ only in arguments the file does not read are one variant. Each launch's
    arguments are bound to its script's parser fields (`--use-4bit` -> ("use_4bit", "True", where));
    a field of the launched script's parser that the launch leaves alone and this file's own
    dataclasses do not define gets its default, with no `where` (no launch passed it)."""
    from placement_lint.analysis.arguments import UNDECIDED, bind, fields_from

    groups: dict[tuple[object, ...], list[Evidence]] = {}
    keys: dict[tuple[object, ...], tuple[tuple[str, str, str], ...]] = {}
    for evidence in external:
        fields = {**local, **fields_from(evidence.parser)}
        bound = bind(fields, evidence.arguments)
        relevant = [(name, value, evidence.where) for name, value in bound.items() if name in read]
        relevant += [
            (name, field.default, "")
            for name, field in fields.items()
            if name == field.name
            and name in read
            and name not in bound
            and field.default != UNDECIDED
            and not (name in local and local[name].origin == "dataclass")  # the resolver reads its default in the file
        ]
        ordered = tuple(sorted(relevant))
        key = (evidence.kind, evidence.zero_stage, tuple((n, v) for n, v, _ in ordered), evidence.entry)
        groups.setdefault(key, []).append(evidence)
        keys.setdefault(key, ordered)
    return [(keys[key], tuple(items)) for key, items in groups.items()]


# In-file evidence that starts processes of its own, whatever launched the file.
_SPAWNS = LazyPattern(r"\b(spawn|start_processes|notebook_launcher|Process|TorchTrainer)\(")


class Context(Record):
    """What makes a file distributed, and the setup it makes; not changed once made."""

    __slots__ = ("evidence", "override", "arguments", "setup")

    def __init__(
        self,
        evidence: tuple[Evidence, ...] = (),
        override: Override | None = None,
        # The script arguments of the one launch this context stands for, as (field, value, where):
        # they replace dataclass field defaults (`args.q_lora`, `model_args.device_map`) in the analysis.
        arguments: tuple[tuple[str, str, str], ...] = (),
    ) -> None:
        self.evidence = evidence
        self.override = override
        self.arguments = arguments
        self.setup: Setup = self._derive()

    def replace(self, evidence: tuple[Evidence, ...]) -> Context:
        return Context(evidence, self.override, self.arguments)

    def _derive(self) -> Setup:
        if self.override is not None:
            return self.override.setup
        kinds = {e.kind for e in self.evidence}
        if Kind.ZERO3 in kinds:
            return Setup(Mode.DEEPSPEED, 3, self._single(Kind.ZERO3))
        if Kind.DEEPSPEED in kinds:
            stages = {e.zero_stage for e in self.evidence if e.kind is Kind.DEEPSPEED}
            return Setup(Mode.DEEPSPEED, stages.pop() if len(stages) == 1 else None, self._single(Kind.DEEPSPEED))
        if Kind.FSDP in kinds:
            return Setup(Mode.FSDP, None, self._single(Kind.FSDP))
        if Kind.DDP in kinds:
            return Setup(Mode.DDP, None, self._single(Kind.DDP))
        if Kind.POSSIBLE in kinds:
            return Setup(Mode.POSSIBLE)
        return SINGLE

    def _single(self, kind: Kind) -> bool:
        """Every launch of this kind starts one process. What the file itself sets up (`init_process_group`,
        `deepspeed.initialize`) runs in the processes its launches start, so it does not count, unless it
        starts processes of its own (`mp.spawn`, `notebook_launcher`)."""
        launches = [e for e in self.evidence if e.kind is kind and e.origin != "file"]
        spawns = any(e.origin == "file" and _SPAWNS.search(e.text) for e in self.evidence)
        return bool(launches) and all(e.single_process for e in launches) and not spawns

    @property
    def one_gpu_per_process(self) -> bool:
        """Every launch behind the setup shows each process one GPU: a spreading map stays on it."""
        launches = [e for e in self.deciding if e.origin != "file"]
        return bool(launches) and all(e.one_gpu for e in launches) and len(launches) == len(self.deciding)

    @property
    def bypasses_device_map_check(self) -> bool:
        return any(e.bypass for e in self.deciding)

    def pinned_below(self, package: str, boundary: str) -> str | bool | None:
        """What the repository behind the deciding launches pins of `package`: every allowed version below
        `boundary` (the pin, for a message: "transformers==4.44.2 (requirements.txt:3)"), every one at or
        above it (False), or unknown (None)."""
        from placement_lint.context.pins import Pin, below

        pins = tuple(dict.fromkeys(Pin(*pin) for e in self.deciding for pin in e.pins))
        verdict = below(pins, package, boundary) if pins else None
        return verdict.describe() if isinstance(verdict, Pin) else verdict

    @property
    def deciding(self) -> list[Evidence]:
        """The evidence behind the setup, strongest first."""
        wanted = {
            Mode.DEEPSPEED: (Kind.ZERO3, Kind.DEEPSPEED),
            Mode.FSDP: (Kind.FSDP,),
            Mode.DDP: (Kind.DDP,),
            Mode.POSSIBLE: (Kind.POSSIBLE,),
        }.get(self.setup.mode, ())
        return sorted(
            (e for e in self.evidence if e.kind in wanted), key=lambda e: _STRENGTH.index(e.kind) if e.kind in _STRENGTH else 9
        )

    def because(self, here: str) -> str:
        """Why we think so, for a message: `TrainingArguments(deepspeed=...), line 33`."""
        if self.override is not None:
            return f"set by {self.override.source}"
        deciding = self.deciding
        if not deciding:
            return "no distributed setup found"
        first = deciding[0]
        more = f" and {len(deciding) - 1} more" if len(deciding) > 1 else ""
        return f"{first.describe(here)}{more}"

    def to_json(self) -> list[dict[str, object]]:
        items = [e.to_json() for e in self.evidence]
        if self.override is not None:
            items.insert(0, {"kind": "OVERRIDE", "where": self.override.source, "text": self.setup.describe()})
        return items


class FileContext:
    """The contexts of one file's parts (see `analysis.callgraph`): evidence applies to the part it
    was seen in; an override applies everywhere; evidence from outside the file (a launcher)
    applies to what the launch runs of the file. Each launch is its own variant, with its own
    script arguments, so `--q_lora True` in one script and ZeRO-3 in another are not mixed up."""

    def __init__(
        self,
        module: ast.Module,
        evidence: list[tuple[Evidence, ast.AST]],  # each item and the node it was seen at
        override: Override | None,
        external: tuple[Evidence, ...] = (),
        used_names: frozenset[str] = frozenset({"__main__"}),
        read: frozenset[str] = frozenset(),  # the attribute names the module reads (`args.use_4bit`)
        fields: Fields | None = None,  # the module's own parser fields (its dataclasses, its add_argument calls)
        remote_consumers: Mapping[str, tuple[Consumer, ...]] | None = None,
        remote_calls: Mapping[str, list[dict[str, object]] | None] | None = None,
    ) -> None:
        self.module = module
        # Where importers send what this module's top-level functions return (RepoContext.consumers).
        self.remote_consumers: Mapping[str, tuple[Consumer, ...]] = remote_consumers or {}
        # The literal arguments of the launched importers' calls of its top-level functions (RepoContext.calls).
        self.remote_calls: Mapping[str, list[dict[str, object]] | None] = remote_calls or {}
        self.override = override
        self._found = evidence
        self._used_names = used_names
        self._launches = _group_launches(external, read, fields or {})
        self._cache: dict[tuple[int, int, tuple[int, ...]], Context] = {}

    @cached_property
    def parts(self) -> Parts:
        """Built only for a file that may be distributed: most files are not, and it walks the tree."""
        from placement_lint.analysis.callgraph import Parts

        return Parts(self.module)

    @cached_property
    def _evidence(self) -> list[tuple[Evidence, int, int]]:  # (evidence, its part, its owner)
        return [(e, self.parts.part_of(node), self.parts.owner_of(node)) for e, node in self._found]

    @cached_property
    def _external_owners(self) -> set[int] | None:
        # A launcher runs a script's module-level code and what it calls ("__main__"); a module imported
        # by a launched script runs what its importers use of it (those names; "*" for everything).
        return None if "*" in self._used_names else self.parts.reachable(self._used_names)

    @cached_property
    def _started_processes(self) -> dict[int, tuple[int, set[int]]]:
        """In-file evidence that starts processes (`mp.spawn(worker)`), by position: (the worker, the
        functions the started processes run). It makes those distributed, not the parent that starts
        them: a converter that loads a checkpoint once and spawns shard writers loads in one process."""
        found = {}
        for number, (evidence, node) in enumerate(self._found):
            if evidence.origin == "file" and (run := self.parts.started_processes_run(node)) is not None:
                found[number] = run
        return found

    def _left_out(self, part: int, owner: int, node: ast.AST | None) -> tuple[int, ...]:
        """The evidence of `part` that starts processes which do not run the code at `node` (in `owner`)."""
        from placement_lint.analysis.callgraph import MODULE

        return tuple(
            number
            for number, (_, run) in self._started_processes.items()
            if self._evidence[number][1] == part
            and owner not in run
            and not (owner == MODULE and node is not None and not self.parts.under_main_guard(node))
        )

    def _context(self, part: int, launch: int, left_out: tuple[int, ...] = ()) -> Context:
        """The context of a part under launch number `launch` (-1: no launch applies), without the
        evidence numbered in `left_out`."""
        key = (part, launch, left_out)
        if key not in self._cache:
            local = tuple(e for number, (e, p, _) in enumerate(self._evidence) if p == part and number not in left_out)
            if launch < 0:
                self._cache[key] = Context(local, self.override)
            else:
                arguments, group = self._launches[launch]
                self._cache[key] = Context(local + group, self.override, arguments)
        return self._cache[key]

    @cached_property
    def _owners_by_launch(self) -> list[set[int] | None]:
        """What of the file each launch runs (None: all of it): a console script's launch runs its
        function, not the module's other console scripts; any other, what `_external_owners` says."""
        return [
            self.parts.reachable(frozenset({group[0].entry})) if group[0].entry else self._external_owners
            for _, group in self._launches
        ]

    def _launch_numbers(self, owner: int) -> list[int]:
        if not self._launches or (self._external_owners is not None and owner not in self._external_owners):
            return [-1]
        numbers = [n for n, owners in enumerate(self._owners_by_launch) if owners is None or owner in owners]
        return numbers or [-1]

    def contexts_at(self, node: object) -> list[Context]:
        """Every context the code at `node` runs under, strongest first."""
        part = self.parts.part_of(node)  # type: ignore[arg-type]
        owner = self.parts.owner_of(node)  # type: ignore[arg-type]
        left_out = self._left_out(part, owner, node) if self._started_processes else ()  # type: ignore[arg-type]
        contexts = [self._context(part, n, left_out) for n in self._launch_numbers(owner)]
        return sorted(contexts, key=_strength)

    def variants(self) -> list[Context]:
        """One context per distinct (setup, launch arguments) some part of the file runs under."""
        if self.override is not None and not self._launches:
            return [Context((), self.override)]
        found = []
        for number, (_, part, owner) in enumerate(self._evidence):
            # Started processes run the worker, not the code around the call that starts them.
            home, node = (
                (self._started_processes[number][0], None)
                if number in self._started_processes
                else (owner, self._found[number][1])
            )
            left_out = self._left_out(part, home, node) if self._started_processes else ()
            found += [self._context(part, n, left_out) for n in self._launch_numbers(owner)]
        if self._launches and self._external_owners != set():
            found += [self._context(-1, n) for n, owners in enumerate(self._owners_by_launch) if owners != set()]
        unique: dict[tuple[Setup, tuple[tuple[str, str, str], ...]], Context] = {}
        for context in sorted(found, key=lambda c: (_strength(c), -len(c.evidence))):
            unique.setdefault((context.setup, context.arguments), context)
        return list(unique.values())

    def setups(self) -> set[Setup]:
        return {context.setup for context in self.variants()}

    def distinct(self) -> list[Context]:
        """The contexts the file's parts get, one per setup (for `placement-lint context`)."""
        merged: dict[Setup, Context] = {}
        for context in self.variants():
            known = merged.get(context.setup)
            evidence = (
                context.evidence
                if known is None
                else known.evidence + tuple(e for e in context.evidence if e not in known.evidence)
            )
            merged[context.setup] = Context(evidence, context.override)
        return sorted(merged.values(), key=_strength)

    @cached_property  # asked by every rule of the file
    def distributed_anywhere(self) -> bool:
        if self.override is not None and not self._launches:
            return self.override.setup.distributed
        if not self._launches and not any(e.kind in _DISTRIBUTED_KINDS for e, _ in self._found):
            return False  # nothing in the file can make any part of it distributed
        return any(setup.distributed for setup in self.setups())
