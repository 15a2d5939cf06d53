"""What a rule is: one class with its code, message and examples, checking one parsed file in context."""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar

from placement_lint.analysis.arguments import parser_fields, shown
from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.analysis.index import walk
from placement_lint.analysis.names import WRAPPERS, dotted, keyword, last_segment
from placement_lint.context.evidence import Context
from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.patterns import LazyPattern
from placement_lint.rules.checked_file import CheckedFile, enclosing_conditions, shortened, written
from placement_lint.rules.checked_file import move_text as move_text
from placement_lint.rules.checked_file import moved_call as moved_call
from placement_lint.rules.checked_file import reachable_under as reachable_under
from placement_lint.rules.messages import DDP_WRAP_ERROR as DDP_WRAP_ERROR
from placement_lint.rules.messages import HEADLINE_LIMIT as HEADLINE_LIMIT
from placement_lint.rules.messages import PER_PROCESS_MAP as PER_PROCESS_MAP
from placement_lint.rules.messages import SPREAD_PREPARE_ERROR as SPREAD_PREPARE_ERROR
from placement_lint.rules.messages import Message, headline
from placement_lint.rules.messages import spread_prepare_consequence as spread_prepare_consequence
from placement_lint.rules.messages import under as under
from placement_lint.rules.messages import zero3_load_consequence as zero3_load_consequence
from placement_lint.rules.noqa import Suppressions
from placement_lint.rules.violation import Violation

if TYPE_CHECKING:
    # A rule module imports no analysis: the pre-check reads the rules' tokens, and only a file it
    # lets through is analysed (rules/checked_file.py imports the analyses then).
    from placement_lint.analysis.dataflow import ForeignConstant, ForeignFunction
    from placement_lint.analysis.placements import DeviceMap, ForwardedLoad, Loader, ModelLoad
    from placement_lint.rules.spans import Related  # made only for findings: a clean run never creates their classes


# What a flagged span says of itself when it is one step of the path (text frames label it with the code).
_PRIMARY_LABELS = {"load": "loaded here", "origin": "the device_map value", "helper": "returns the device_map value"}


def span_of(file: CheckedFile, node: ast.AST, role: str, label: str) -> Related:
    """The span of one of this file's nodes, as a step of a finding's path."""
    from placement_lint.rules.spans import Related

    start, end = file.source.node_span(node)
    return Related(role, file.display, *file.source.position(start), *file.source.position(end), label)


def with_spans(violation: Violation, spans: Sequence[Related]) -> Violation:
    """The finding with more steps of its path, each in its role's place."""
    if not spans:
        return violation
    from placement_lint.rules.spans import ROLES

    return violation._replace(related=tuple(sorted((*violation.related, *spans), key=lambda span: ROLES.index(span.role))))


def _load_span(file: CheckedFile, load: Loader) -> tuple[Related, str]:
    """A load a value reaches, spanned as the loads other rules flag are: its callee as written
    (`AutoModelForCausalLM.from_pretrained`), or the target a TRL config's kwargs are assigned to."""
    node = load.node
    named = node.func if isinstance(node, ast.Call) else node.targets[0] if isinstance(node, ast.Assign) else node
    return span_of(file, named, "load", "loaded here"), written(file, named, 80)


def _forwarded_span(file: CheckedFile, load: ForwardedLoad) -> tuple[Related, str]:
    """A load in a helper that the value reaches through the helper's parameter: in this file, or in
    the helper's module (its rows as written there)."""
    from placement_lint.rules.spans import Related

    named = load.call.func
    callee = f"{load.name} in {load.function}" + (f" ({load.path})" if load.path is not None else "")
    if load.path is None:
        return span_of(file, named, "load", "loaded here"), callee
    end_row, end_column = named.end_lineno or named.lineno, (named.end_col_offset or 0) + 1
    return Related("load", load.path, named.lineno, named.col_offset + 1, end_row, end_column, "loaded here"), callee


def _within(file: CheckedFile, node: ast.AST, container: ast.AST) -> bool:
    """`node` is written inside `container`'s text: by position, since a value a launch passes is a
    node of its own, placed where the load reads the argument."""
    start, end = file.source.node_span(node)
    outer_start, outer_end = file.source.node_span(container)
    return outer_start <= start and end <= outer_end


class FixAvailability(enum.Enum):
    NONE = "None"
    SOMETIMES = "Sometimes"
    ALWAYS = "Always"


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    fix_availability: ClassVar[FixAvailability] = FixAvailability.NONE
    # The text pre-check: a file is parsed for this rule only if it holds one of these byte strings...
    triggers: ClassVar[tuple[bytes, ...]] = (b"device_map",)
    # ...and, unless the rule is context-free, could be distributed (in-file tokens, launch or override).
    context_free: ClassVar[bool] = False
    # Tokens of which a file must hold one before any of the checks above can pass (default: the
    # triggers). The engine looks for the union of all rules' anchors once, and skips most files there.
    anchors: ClassVar[tuple[bytes, ...] | None] = None
    # Every other byte string the `could_fire*` methods look for: the pre-check's one pass finds them
    # all (one it does not know is searched for alone: right, but slower; a test lists them).
    pre_check_tokens: ClassVar[tuple[bytes, ...]] = ()
    # Judges the file's noqa comments: runs after every other rule, on their unsuppressed findings.
    checks_suppressions: ClassVar[bool] = False
    # Fixit-style examples: each source must (invalid) or must not (valid) produce this rule's code.
    valid: ClassVar[tuple[str, ...]] = ()
    invalid: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        return any(token in raw for token in cls.triggers)

    @classmethod
    def anchor_tokens(cls) -> tuple[bytes, ...]:
        return cls.anchors if cls.anchors is not None else cls.triggers

    @classmethod
    def could_fire_when_launched(cls, raw: bytes) -> bool:
        """Looser tokens for a file a launcher (or a launched importer) reaches: its context is known
        without reading its text, so a wider pre-check costs nothing elsewhere."""
        return cls.could_fire(raw)

    @classmethod
    def could_fire_without_context(cls, raw: bytes) -> bool:
        """For a rule with a context-free part: could that part fire in a file with no distributed evidence?
        It must imply `could_fire`: the engine asks only this of a file without context."""
        return cls.context_free and cls.could_fire(raw)

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        raise NotImplementedError

    def check_suppressions(
        self, file: CheckedFile, suppressions: Suppressions, found: list[Violation], judged: frozenset[str], known: frozenset[str]
    ) -> list[Violation]:
        """For a `checks_suppressions` rule: `found` is every other rule's findings before `# noqa`
        applied, `judged` the codes that ran (or were free to run) on this file, `known` every rule's code."""
        return []

    def violation(
        self,
        file: CheckedFile,
        node: ast.AST,
        message: str | Message,
        fix: Fix | None,
        context: Context | None,
        consumers: Iterable[Consumer] = (),
        role: str = "finding",
        loads: Sequence[Loader] = (),
        forwarded: Sequence[ForwardedLoad] = (),
    ) -> Violation:
        """The finding, with its path (launch, config, imports, this span as `role`, the `loads` it
        reaches when it is not one, and the loads in helpers it is `forwarded` to, consumer) as data and notes."""
        start, end = file.source.node_span(node)
        said = message if isinstance(message, Message) else Message.of(message)
        if not said.error and not said.help and not said.facts and context is None:
            return Violation(self.code, headline(said.headline), start, end, fix)  # nothing more to tell (DPL100)
        from placement_lint.rules.chain import path_of  # only a run with findings tells their path
        from placement_lint.rules.spans import Related

        row, column = file.source.position(start)
        end_row, end_column = file.source.position(end)
        label = _PRIMARY_LABELS.get(role, self.code)
        primary = Related(role, file.display, row, column, end_row, end_column, label)
        load_spans = [*(_load_span(file, load) for load in loads), *(_forwarded_span(file, load) for load in forwarded)]
        related, chain_notes = path_of(file, context, primary, consumers, load_spans)
        notes = (*chain_notes, *said.notes(fix))
        return Violation(self.code, headline(said.headline), start, end, fix, context, notes, related)

    def placement_violation(
        self,
        file: CheckedFile,
        device_map: DeviceMap,
        context: Context,
        message: str | Message,
        make_fix: Callable[[], Fix],
        also: Sequence[Related] = (),
    ) -> Violation:
        """A finding on a device_map, at its site; a value passed on a launch's command line gets no fix
        (the command line is where it would have to change). `also`: more code the fix changes."""
        # A helper's return value may serve other callers: only a person can say where to change it.
        # A dict display that later stores fill cannot become None: the stores would fail.
        candidate = device_map.candidate
        filled = (
            candidate.entries is not None
            and isinstance(device_map.node, ast.Dict)
            and file.site(device_map).node is device_map.node
        )
        fix = None if candidate.from_launch or candidate.helper or filled else make_fix()
        if fix is not None and fix.safe and file.on_one_path(device_map):
            # The branch that binds the value may serve runs the linter does not see: a person decides.
            fix = fix._replace(applicability=Applicability.UNSAFE)
        return self.value_violation(file, device_map, context, message, fix, also)

    def value_violation(
        self,
        file: CheckedFile,
        device_map: DeviceMap,
        context: Context,
        message: str | Message,
        fix: Fix | None,
        also: Sequence[Related] = (),
    ) -> Violation:
        """A finding on a device_map, at its site, with the spans its value comes through. A value written
        apart from the load (`device_map = "auto"`, then `from_pretrained(..., device_map=device_map)`)
        is reported where it is written, which is what its fix edits and where a `# noqa` for it goes;
        it is the `origin` (or, returned by another module's helper, the `helper` call), and each load it
        reaches is a `load` span of its own (a value in a helper of this module, returned to several
        loads, is one finding: it is changed in one place)."""
        site = file.site(device_map).node
        loads: Sequence[Loader] = ()
        forwarded = device_map.loader.through
        if forwarded:  # passed to a helper's parameter: the value here, the load in the helper
            role = "helper" if device_map.candidate.foreign is not None else "origin"
        elif _within(file, site, device_map.loader.node):
            role = "load"
        else:
            role = "helper" if device_map.candidate.foreign is not None else "origin"
            loads = file.loads_reached(device_map)
        violation = self.violation(file, site, message, fix, context, device_map.consumers, role, loads, forwarded)
        return with_spans(violation, (*value_origins(file, device_map), *also))


class RefusedLowCpuMemUsage:
    """`low_cpu_mem_usage=True` in a load that ZeRO-3 refuses a device_map: transformers up to 4.50
    refuses the flag with the same error (`modeling_utils.from_pretrained`: `if low_cpu_mem_usage: if
    is_deepspeed_zero3_enabled(): raise`), so a fix of the map alone leaves the load failing; 4.51.0
    pops the flag and ignores it, so a repository pinned at 4.51 or later is left alone."""

    LABEL = "low_cpu_mem_usage=True is refused under ZeRO-3 too (transformers <= 4.50)"

    def __init__(self, file: CheckedFile, flag: ast.keyword) -> None:
        self.file = file
        self.flag = flag

    @classmethod
    def in_load(cls, file: CheckedFile, device_map: DeviceMap, context: Context) -> RefusedLowCpuMemUsage | None:
        load = device_map.loader.node
        flag = keyword(load, "low_cpu_mem_usage") if isinstance(load, ast.Call) else None
        if flag is None or not (isinstance(flag.value, ast.Constant) and flag.value.value is True):
            return None
        return None if context.pinned_below("transformers", "4.51") is False else cls(file, flag)

    @staticmethod
    def also(flag: RefusedLowCpuMemUsage | None) -> str:
        """What the advice and the fix's title add for the flag, if there is one."""
        return " and low_cpu_mem_usage=False" if flag is not None else ""

    @staticmethod
    def spans(flag: RefusedLowCpuMemUsage | None) -> tuple[Related, ...]:
        """The flag as a span of the finding (the fix, made with `edit`, changes it too)."""
        return (span_of(flag.file, flag.flag, "finding", flag.LABEL),) if flag is not None else ()

    def edit(self, keep_without_zero3: bool) -> Edit:
        """The flag off where the map becomes None; `keep_without_zero3`: the map is kept for runs
        without ZeRO-3 (`None if is_deepspeed_zero3_enabled() else ...`), and so is the flag."""
        return self.file.replace(self.flag.value, "not is_deepspeed_zero3_enabled()" if keep_without_zero3 else "False")


def state_exists_at_load(device_map: DeviceMap | ModelLoad, context: Context) -> bool:
    """Whether this process's device is set (TrainingArguments, a TRL config, Accelerator,
    PartialState, parsed arguments) when the model loads. Only the file's own order can show it is
    not: in a module that runs under its importer's setup, the importer has parsed its arguments first."""
    if any(e.origin == "import" for e in context.deciding):
        return True
    return device_map.after_distributed_state


def zero3_live_at_load(device_map: DeviceMap | ModelLoad, context: Context) -> bool:
    """Whether a ZeRO-3 run's config is live when the model loads, so `from_pretrained` raises for any
    device_map (domain.md §5.1.3); when it is created later, the load gets no zero.Init (DPL008)."""
    if context.override is not None or any(e.origin == "import" for e in context.deciding):
        return True  # the user says ZeRO-3 (or an importer set it up): the file's own order cannot tell
    return device_map.after_zero3_config


# `accelerator.is_main_process`, `rank == 0`, `local_rank in (-1, 0)`, `mpi_rank() == 0`, `int(os.environ["RANK"]) == 0`:
# only one process (one per node, for a local rank) passes, and that process's first GPU is its own.
_MAIN_PROCESS = LazyPattern(
    r"(is_main_process|is_local_main_process|is_world_process_zero|is_rank_zero"
    r"|(\b(get_|\w+_)?rank(\(\))?|[\"'](LOCAL_)?RANK[\"'][])]*)\s*(==\s*0|in\s*[\[(]\s*(-1\s*,\s*)?0\b|<\s*1\b|<=\s*0\b))"
)


def main_process_only(file: CheckedFile, node: ast.AST) -> bool:
    """`node` runs only where an `if` of its function lets the main process alone through:
    `if rank == 0:`, or `if run_reference:` after `run_reference = args.reference and rank == 0`."""
    child: ast.AST = node
    for ancestor in file.resolver.ancestors(node):
        if isinstance(ancestor, ast.If) and child in ancestor.body and _lets_main_process_only(file, ancestor.test, 0):
            return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        child = ancestor
    return False


def _lets_main_process_only(file: CheckedFile, test: ast.expr, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(test, ast.BoolOp):
        # `x and rank == 0` lets one process through whatever x is; `x or rank == 0` only if x does too.
        parts = [_lets_main_process_only(file, value, depth + 1) for value in test.values]
        return any(parts) if isinstance(test.op, ast.And) else all(parts)
    if isinstance(test, ast.UnaryOp):
        return False  # `not is_main_process`: every other process
    if isinstance(test, ast.Name):
        values = [c.value for c in file.resolver.candidates(test)]
        return bool(values) and all(
            isinstance(v, ast.expr) and v is not test and _lets_main_process_only(file, v, depth + 1) for v in values
        )
    return bool(_MAIN_PROCESS.search(ast.unparse(test)))


# The PEFT wrappers that take the model as their first argument (the rest of WRAPPERS load one).
PEFT_WRAPPERS = frozenset(name for name in WRAPPERS if "." not in name)


def wrapped_model(call: ast.Call) -> ast.expr | None:
    """The model a PEFT wrapper call takes and hands back wrapped (`get_peft_model(model, config)`:
    `model`); None for any other call."""
    return call.args[0] if call.args and last_segment(dotted(call.func)) in PEFT_WRAPPERS else None


def wrapped_by_ddp(device_map: DeviceMap) -> bool:
    """The model goes into a hand-written `DistributedDataParallel(...)` and nothing else trains it."""
    trains = [c for c in device_map.consumers if c.trains]
    return bool(trains) and all(
        c.kind is ConsumerKind.WRAPPER and c.name.rsplit(".", 1)[-1] in ("DDP", "DistributedDataParallel") for c in trains
    )


def trl_config_call(raw: bytes) -> bool:
    """`SFTConfig(`, `GRPOConfig(`: an upper-case letter before `Config(` (model configs read `LlamaConfig(`)."""
    at = raw.find(b"Config(")
    while at > 0:
        if 65 <= raw[at - 1] <= 90:
            return True
        at = raw.find(b"Config(", at + 1)
    return False


def fix(applicability: Applicability, message: str, *edits: Edit | None) -> Fix:
    return Fix(applicability, message, tuple(sorted(e for e in edits if e is not None)))


def shown_value(file: CheckedFile, device_map: DeviceMap) -> str:
    """`device_map="auto"`, `device_map=args.device_map (--device_map auto)` when a launch passes it, or
    `device_map=get_device_map()` when a helper of another module returns the value."""
    helper = device_map.candidate.helper
    if helper is not None and helper.foreign is not None:
        return f"device_map={written(file, helper.call)}"
    argument = device_map.candidate.from_launch
    passed = f" (--{argument.name} {shown(argument.value)})" if argument else ""
    return f"device_map={written(file, device_map.node)}{passed}"


def value_facts(file: CheckedFile, device_map: DeviceMap) -> tuple[tuple[str, str], ...]:
    """Where the value comes from when that is not the load, one note each: the helper that returns it
    (in this module or another), the loop that spreads its layers, the launch that passes it, and the
    launch argument (or the flag's default) that takes the branch holding it."""
    facts: list[tuple[str, str]] = []
    helper = device_map.candidate.helper
    if helper is not None and helper.foreign is not None:
        value = _foreign_text(helper.foreign, device_map.node)
        if helper.imported:
            facts.append(("imported", f"{helper.name} = {value} ({helper.foreign.path}:{device_map.node.lineno})"))
        else:
            facts.append(
                ("returned by", f"{written(file, helper.call)}: {value} ({helper.foreign.path}:{device_map.node.lineno})")
            )
    elif helper is not None:
        row = file.source.position(file.source.node_span(helper.call)[0])[0]
        facts.append(("returned by", f"{written(file, helper.call)}, line {row}"))
    forwarded = device_map.loader.through
    if forwarded:
        facts.append(("passed to", f"the {forwarded[0].parameter} parameter of {forwarded[0].function}, which loads with it"))
    entries = device_map.candidate.entries
    loop = entries.spread_by if entries is not None else None
    if loop is not None:
        facts.append(("spread by", f"the loop at line {loop.lineno} puts its layers on several devices"))
    argument = device_map.candidate.from_launch
    if argument:
        facts.append(("passed by", f"{argument.where} --{argument.name} {shown(argument.value)}"))
        return tuple(facts)
    undecided = file.on_one_path(device_map)
    if undecided:
        shown_tests = ", ".join(written(file, test) if outcome else f"not {written(file, test)}" for test, outcome in undecided)
        facts.append(("only if", f"{shown_tests}, which no launch decides"))
    passed, defaults = branch_arguments(device_map)
    if passed:
        values = ", ".join(f"{name}={shown(value)}" for name, value, _ in passed)
        facts.append(("branch", f"taken under {passed[0][2]}, which sets {values}"))
    elif defaults:
        facts.append(("branch", f"taken by default: {', '.join(f'{name}={value}' for name, value in defaults)}"))
    return tuple(facts)


def value_origins(file: CheckedFile, device_map: DeviceMap) -> tuple[Related, ...]:
    """The spans a value not written in the load comes through: for a helper's return, the helper's
    call (`helper`) and, in another module, the value where the helper writes it (`origin`); for a
    map filled in a loop, that loop's store."""
    helper = device_map.candidate.helper
    entries = device_map.candidate.entries
    loop = entries.spread_by if entries is not None else None
    if helper is None and loop is None:
        return ()
    from placement_lint.rules.spans import Related

    foreign = helper.foreign if helper is not None else None

    def origin_of(node: ast.AST, label: str) -> Related:
        if foreign is None:
            return span_of(file, node, "origin", label)
        end = (getattr(node, "end_lineno", None) or node.lineno, (getattr(node, "end_col_offset", None) or 0) + 1)  # type: ignore[attr-defined]
        return Related("origin", foreign.path, node.lineno, node.col_offset + 1, *end, label)  # type: ignore[attr-defined]

    found: list[Related] = []
    if foreign is not None:  # the finding is the call; the value is written in the helper's module
        said = "is" if helper is not None and helper.imported else "returns"
        found.append(origin_of(device_map.node, f"{said} {_foreign_text(foreign, device_map.node)}"))
    elif helper is not None:  # the finding is the value in the helper; its call is here
        found.append(span_of(file, helper.call, "helper", f"{written(file, helper.call)} returns it"))
    if loop is not None:
        found.append(origin_of(loop, "its layers spread over devices here"))
    return tuple(found)


def _foreign_text(foreign: ForeignFunction | ForeignConstant, node: ast.AST) -> str:
    """A value written in another module, as written there."""
    return shortened(ast.get_source_segment(foreign.text, node) or ast.unparse(node))


def branch_arguments(device_map: DeviceMap) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The launch arguments, and the flags left at their defaults, read by the conditions on the
    value's way to the load and around the load."""
    resolver = device_map.analysis.resolver
    passed = {name: (name, value, where) for name, value, where in resolver.arguments if where}
    fields = parser_fields(resolver.module)
    flags = {name: f.default for name, f in fields.items() if name == f.name and f.convert in ("bool", "fire")}
    flags.update((name, value) for name, value, where in resolver.arguments if not where and value in ("True", "False"))
    parameters = {name for name, f in fields.items() if f.origin == "fire"}  # read as names (`if load_8bit:`)
    tests = [test for test, _ in device_map.candidate.guards]
    tests += [condition.test for condition, _ in enclosing_conditions(resolver, device_map.loader.node)]
    found: list[tuple[str, str, str]] = []
    defaults: list[tuple[str, str]] = []
    for test in tests:
        for node in walk(test):
            read = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.id
                if isinstance(node, ast.Name) and node.id in parameters
                else None
            )
            if read is None:
                continue
            if read in passed and passed[read] not in found:
                found.append(passed[read])
            elif read not in passed and flags.get(read) in ("True", "False") and (read, flags[read]) not in defaults:
                defaults.append((read, flags[read]))
    return found, defaults
