"""What a rule is: one class with its code, message and examples, checking one parsed file in context."""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from placement_lint.analysis.arguments import parser_fields, shown
from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.analysis.dataflow import ForeignFunction, HelperLocator, Resolver
from placement_lint.analysis.flow import TRL_GUARDED_TRAINERS, no_ancestors
from placement_lint.analysis.names import ImportTable, dotted, keyword
from placement_lint.analysis.placements import DeviceMap, LoaderKind, ModelLoad, PlacementAnalysis
from placement_lint.analysis.values import Placement
from placement_lint.context.classes import ImportedClasses
from placement_lint.context.evidence import ZERO3_INIT_OFF, Context, FileContext
from placement_lint.distributed import SINGLE, Mode, Setup
from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.rules.noqa import Directive
from placement_lint.rules.violation import Violation
from placement_lint.source import SourceFile

if TYPE_CHECKING:  # made only for findings: a clean run never creates their classes
    from placement_lint.rules.spans import Note, Related


class FixAvailability(enum.Enum):
    NONE = "None"
    SOMETIMES = "Sometimes"
    ALWAYS = "Always"


_PROBES = (SINGLE, Setup(Mode.DDP), Setup(Mode.DEEPSPEED, 3), Setup(Mode.FSDP))


class Site(NamedTuple):
    node: ast.AST  # what is reported and replaced
    confined: bool  # editing it changes this load only


class CheckedFile:
    """One parsed file and its context: what every rule reads. Analyses are computed once, on demand."""

    def __init__(
        self,
        source: SourceFile,
        module: ast.Module,
        imports: ImportTable,
        contexts: FileContext,
        display: str,
        classes: ImportedClasses | None = None,
        helpers: HelperLocator | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.source = source
        self.module = module
        self.imports = imports
        self.contexts = contexts
        self.display = display
        self.cwd = cwd if cwd is not None else Path.cwd()  # what `display` and the evidence's paths are relative to
        # The base classes of classes the file imports from the repository (None: not looked up).
        self.classes = classes
        # Finds the helper functions the file imports from the repository (None: not followed).
        self.helpers = helpers
        self._resolvers: dict[tuple[Setup, tuple[tuple[str, str, str], ...]], Resolver] = {}
        self._analyses: dict[tuple[Setup, tuple[tuple[str, str, str], ...]], PlacementAnalysis] = {}
        self._sites: dict[tuple[int, int], Site] = {}

    @cached_property
    def bypasses_device_map_check(self) -> bool:
        """The file sets ACCELERATE_BYPASS_DEVICE_MAP=true (accelerate >= 0.23), opting out of its check."""
        for node in self.resolver.index.nodes:
            target = value = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                if isinstance(target, ast.Subscript):
                    target = target.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault":
                if len(node.args) == 2:
                    target, value = node.args
            if (
                isinstance(target, ast.Constant)
                and target.value == "ACCELERATE_BYPASS_DEVICE_MAP"
                and isinstance(value, ast.Constant)
                and str(value.value).lower() in ("true", "1")
            ):
                return True
        return False

    def resolver_for(self, setup: Setup, arguments: tuple[tuple[str, str, str], ...] = ()) -> Resolver:
        key = (setup, arguments)
        if key not in self._resolvers:
            self._resolvers[key] = Resolver(self.module, setup, arguments, self.helpers)
        return self._resolvers[key]

    def analysis_for(self, setup: Setup, arguments: tuple[tuple[str, str, str], ...] = ()) -> PlacementAnalysis:
        key = (setup, arguments)
        if key not in self._analyses:
            # Not the bound `self.ancestors`: an analysis kept here must not refer back to the file, or the
            # file and its tree are freed only by the cycle collector, which then walks every tree left.
            ancestors = self.classes if self.classes is not None else no_ancestors
            self._analyses[key] = PlacementAnalysis(
                self.module, self.imports, self.resolver_for(setup, arguments), self.contexts.remote_consumers, ancestors
            )
        return self._analyses[key]

    def ancestors(self, written: str) -> tuple[str, ...]:
        """The base class names, nearest first, of a class imported from the repository (`CustomSFT`)."""
        return self.classes(written) if self.classes is not None else no_ancestors(written)

    @cached_property
    def resolver(self) -> Resolver:
        """For questions about structure (parents, scopes), which do not depend on the setup."""
        return self.resolver_for(SINGLE)

    @cached_property
    def device_maps(self) -> list[tuple[DeviceMap, Context]]:
        """Every device_map in a distributed part of the file, resolved under each setup (and launch
        arguments) that part runs under; a value found under several is kept once, strongest first."""
        found: list[tuple[DeviceMap, Context]] = []
        seen: set[tuple[int, object]] = set()
        for variant in self.contexts.variants():
            if not variant.setup.distributed:
                continue
            analysis = self.analysis_for(variant.setup, variant.arguments)
            resolver = self.resolver_for(variant.setup, variant.arguments)
            for device_map in analysis.device_maps:
                if not self._decided(device_map, resolver):
                    continue
                if not reachable_under(self, device_map.loader.node, variant.setup, variant.arguments):
                    continue  # the load sits in a branch this run does not take
                contexts = self.contexts.contexts_at(device_map.loader.node)
                context = next((c for c in contexts if (c.setup, c.arguments) == (variant.setup, variant.arguments)), None)
                key = (
                    id(self.site(device_map).node) if device_map.candidate.from_launch is None else id(device_map.loader.node),
                    device_map.classified.placement,
                )
                if context is not None and key not in seen:
                    seen.add(key)
                    found.append((device_map, context))
        return found

    def _decided(self, device_map: DeviceMap, resolver: Resolver) -> bool:
        """The run takes this value: every condition on its way is known to hold (a flag the launch does
        not set, `if args.use_peft:` read by a parser the tool cannot follow, leaves it undecided) or
        depends on a value the user chooses (a model name no launch passes), and it is not the `except`
        fallback of a `try` whose body binds the value the launch uses."""
        # The load's own conditions decide whether it runs, not which value it gets: a branch nobody can
        # decide stays live (as for a literal written in the call), one the setup rules out is dead.
        own = resolver.enclosing_guards(device_map.loader.node)
        if any(resolver.truth(test) is (not outcome) for test, outcome in own):
            return False
        shared = {(id(test), outcome) for test, outcome in own}
        if any(
            resolver.truth(test) is None and not resolver.chosen_by_user(test)
            for test, outcome in device_map.candidate.guards
            if (id(test), outcome) not in shared
        ):
            return False
        return not any(
            isinstance(step, ast.AST) and any(isinstance(a, ast.ExceptHandler) for a in self.resolver.ancestors(step))
            for step in device_map.candidate.via
        )

    def placed(self, *kinds: Placement) -> list[tuple[DeviceMap, Context]]:
        """The device_maps whose value is one of `kinds`, except those TRL resets to None itself."""
        return [
            (device_map, context)
            for device_map, context in self.device_maps
            if device_map.classified.placement in kinds and not trl_overrides(context, device_map)
        ]

    def replace(self, node: ast.AST, text: str) -> Edit:
        start, end = self.source.node_span(node)
        return Edit(start, end, text)

    def remove_keyword(self, call: ast.Call, argument: ast.keyword) -> Edit:
        """Delete `name=value` and one adjoining comma. When the argument has its own line(s), the
        whole line goes; a comment after it on that line stays (it may explain the next argument)."""
        text = self.source.text
        start, end = self.source.node_span(argument)
        end = _past_closing_parens(text, start, end)
        after = _skip_trivia(text, end)
        if text.startswith(",", after):
            comma = after + 1
            line_start = text.rfind("\n", 0, start) + 1
            rest = len(text[comma:]) - len(text[comma:].lstrip(" \t"))
            if not text[line_start:start].strip() and text[comma + rest : comma + rest + 1] in ("\r", "\n"):
                newline_end = comma + rest + (2 if text.startswith("\r\n", comma + rest) else 1)
                return Edit(line_start, newline_end, "")
            return Edit(start, comma + rest, "")
        arguments = sorted([*call.args, *call.keywords], key=lambda a: (a.lineno, a.col_offset))  # type: ignore[attr-defined]
        position = next(i for i, a in enumerate(arguments) if a is argument)
        if position == 0:
            return Edit(start, end, "")
        _, previous_end = self.source.node_span(arguments[position - 1])
        return Edit(_past_closing_parens(text, previous_end, previous_end), end, "")

    def add_keyword(self, call: ast.Call, text: str) -> Edit:
        """Append `text` (`name=value`) as the call's last argument, keeping any trailing comma and layout."""
        arguments = [*call.args, *call.keywords]
        if not arguments:
            start, end = self.source.node_span(call)
            opening = self.source.text.index("(", self.source.node_span(call.func)[1], end)
            return Edit(opening + 1, opening + 1, text)
        last = max(arguments, key=lambda a: (a.end_lineno, a.end_col_offset))  # type: ignore[attr-defined]
        start, end = self.source.node_span(last)
        source = self.source.text
        end = _past_closing_parens(source, start, end)
        line_start = source.rfind("\n", 0, start) + 1
        indent = source[line_start:start]
        if source.startswith(",", end) and source[end + 1 : end + 2] in ("\r", "\n") and not indent.strip():
            # One argument per line with a trailing comma: the new argument gets its own line too.
            return Edit(end + 1, end + 1, f"{self.source.newline}{indent}{text},")
        return Edit(end, end, f", {text}")

    def remove_statement(self, statement: ast.stmt) -> Edit | None:
        """Delete a statement that has its line(s) to itself, with its line ending; None when it shares a line."""
        text = self.source.text
        start, end = self.source.node_span(statement)
        line_start = text.rfind("\n", 0, start) + 1
        rest = text[end:]
        after = len(rest) - len(rest.lstrip(" \t"))
        if text[line_start:start].strip() or text[end + after : end + after + 1] not in ("\r", "\n", "#", ""):
            return None
        parent = self.resolver.parent(statement)
        body = next((b for b in _bodies(parent) if statement in b), None)
        if body is not None and len(body) == 1:
            return Edit(start, end, "pass")  # an empty block would not parse
        line_end = text.find("\n", end)
        return Edit(line_start, len(text) if line_end < 0 else line_end + 1, "")

    def site(self, device_map: DeviceMap) -> Site:
        """Where to report a wrong value and edit it. Usually the value itself; but when it reaches the
        loader through a name that other code reads too (`device = "cuda"` also used for batches),
        the loader's `device_map=` argument, so a fix cannot change anything but this load.
        Asked by the dedupe, the message and the fix of each finding: worked out once per value."""
        key = (id(device_map.node), id(device_map.loader.node))
        if key not in self._sites:
            self._sites[key] = self._site(device_map)
        return self._sites[key]

    def _site(self, device_map: DeviceMap) -> Site:
        foreign = device_map.candidate.foreign
        if foreign is not None:  # the value is written in another module: report where it enters this one
            return Site(foreign.call, False)
        node, loader = device_map.node, device_map.loader.node
        # `value if cond else None`: the whole conditional is the site (a fix to None leaves no `None if ... else None`),
        # unless the condition is on the distributed setup: `None if is_deepspeed_zero3_enabled() else "cuda:0"` keeps its guard.
        parent = self.resolver.parent(node)
        while isinstance(parent, ast.IfExp) and node is not parent.test and not self._setup_guard(parent.test):
            other = parent.orelse if node is parent.body else parent.body
            if not (isinstance(other, ast.Constant) and other.value is None):
                break
            node, parent = parent, self.resolver.parent(parent)
        argument = keyword(loader, "device_map") if isinstance(loader, ast.Call) else None
        if argument is None and isinstance(loader, ast.Call) and not self._inside(node, loader):
            # The value comes from a `**kwargs` dict: editing it edits every load that splats it.
            splats = [dotted(kw.value) for kw in loader.keywords if kw.arg is None]
            return Site(node, is_local(self, device_map) and not any(self._splat_count(name) > 1 for name in splats if name))
        if self._inside(node, loader) or argument is None or self._inside(node, argument.value):
            return Site(node, is_local(self, device_map))
        if self._shared(argument.value):
            return Site(argument.value, True)
        return Site(node, is_local(self, device_map))

    def _splat_count(self, name: str) -> int:
        """How many calls in the file unpack this kwargs dict (`**model_kwargs`)."""
        return sum(1 for call in self.resolver.index.calls for kw in call.keywords if kw.arg is None and dotted(kw.value) == name)

    def _setup_guard(self, test: ast.expr) -> bool:
        """The condition depends on the distributed setup (`ddp`, `is_deepspeed_zero3_enabled()`)."""
        outcomes = {self.resolver_for(setup).truth(test) for setup in _PROBES}
        return len(outcomes - {None}) > 1

    def _inside(self, node: ast.AST, container: ast.AST) -> bool:
        return node is container or any(a is container for a in self.resolver.ancestors(node))

    def _shared(self, expr: ast.expr) -> bool:
        """The name the loader reads is read elsewhere in its scope too."""
        key = dotted(expr)
        if key is None or not isinstance(expr, (ast.Name, ast.Attribute)):
            return False
        scope = self.resolver.scope_of(expr)
        reads = [n for n in self.resolver.index.loads_by_name.get(key, []) if self.resolver.scope_of(n) is scope]
        return len(reads) > 1

    def add_import(self, module: str, name: str) -> Edit | None:
        """`from module import name` after the file's top-level imports, unless the name is already there."""
        if self.imports.aliases.get(name) == f"{module}.{name}" or any(
            q.endswith(f".{name}") and a == name for a, q in self.imports.aliases.items()
        ):
            return None
        body = self.module.body
        index = 0
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            index = 1  # keep the docstring first
        last_import = None
        for position, stmt in enumerate(body[index:], start=index):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                last_import = stmt
            elif last_import is not None or position > index:
                break
        newline = self.source.newline
        line = f"from {module} import {name}{newline}"
        anchor = last_import or (body[index - 1] if index else None)
        if anchor is None:
            return Edit(0, 0, line)
        end_row = anchor.end_lineno or anchor.lineno
        offset = self.source.line_starts[end_row] if end_row < self.source.line_count else len(self.source.text)
        if offset == len(self.source.text) and not self.source.text.endswith(("\n", "\r")):
            return Edit(offset, offset, newline + line.rstrip("\r\n"))
        return Edit(offset, offset, line)


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
        self, file: CheckedFile, directives: dict[int, Directive], found: list[Violation], judged: frozenset[str]
    ) -> list[Violation]:
        """For a `checks_suppressions` rule: `found` is every other rule's findings before `# noqa`
        applied, `judged` the codes that ran (or were free to run) on this file."""
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
    ) -> Violation:
        """The finding, with its path (launch, config, imports, this span as `role`, consumer) as data and notes."""
        start, end = file.source.node_span(node)
        said = message if isinstance(message, Message) else Message.of(message)
        if not said.error and not said.help and not said.facts and context is None:
            return Violation(self.code, headline(said.headline), start, end, fix)  # nothing more to tell (DPL100)
        from placement_lint.rules.chain import path_of  # only a run with findings tells their path
        from placement_lint.rules.spans import Related

        row, column = file.source.position(start)
        end_row, end_column = file.source.position(end)
        label = "loaded here" if role == "load" else self.code
        primary = Related(role, file.display, row, column, end_row, end_column, label)
        related, chain_notes = path_of(file, context, primary, consumers)
        notes = (*chain_notes, *said.notes(fix))
        return Violation(self.code, headline(said.headline), start, end, fix, context, notes, related)

    def placement_violation(
        self, file: CheckedFile, device_map: DeviceMap, context: Context, message: str, make_fix: Callable[[], Fix]
    ) -> Violation:
        """A finding on a device_map, at its site; a value passed on a launch's command line gets no fix
        (the command line is where it would have to change)."""
        # A helper's return value may serve other callers: only a person can say where to change it.
        # A dict display that later stores fill cannot become None: the stores would fail.
        candidate = device_map.candidate
        filled = (
            candidate.entries is not None
            and isinstance(device_map.node, ast.Dict)
            and file.site(device_map).node is device_map.node
        )
        fix = None if candidate.from_launch or candidate.helper or filled else make_fix()
        # Flagged inside a helper of this module, the span is the value: the load is another span.
        role = "finding" if candidate.helper is not None and candidate.helper.foreign is None else "load"
        violation = self.violation(file, file.site(device_map).node, message, fix, context, device_map.consumers, role)
        origins = value_origins(file, device_map)
        if not origins:
            return violation
        from placement_lint.rules.spans import ROLES

        return violation._replace(related=tuple(sorted((*violation.related, *origins), key=lambda span: ROLES.index(span.role))))


# -- message and fix pieces the rules share ---------------------------------------------------------

HEADLINE_LIMIT = 160


class Message:
    """What a rule says of a finding: a short headline (what is wrong, under which setup), then one
    fact per note. The path (launch, config, imports, consumer) is added from the evidence. A plain
    class: every rule module imports it, and a named tuple's class costs a clean run its creation."""

    __slots__ = ("headline", "error", "help", "facts")

    def __init__(
        self,
        headline: str,
        error: str | None = None,  # what the library raises at run time
        help: str | None = None,  # what to do; the fix's safety is added when there is a fix
        facts: tuple[tuple[str, str], ...] = (),  # (label, text) more facts: why TRL keeps "auto", what happens
    ) -> None:
        self.headline = headline
        self.error = error
        self.help = help
        self.facts = facts

    @classmethod
    def of(cls, text: str) -> Message:
        """A message written as one string: its headline, and the whole text as a note when it is too long
        to be one (nothing is lost; the rule should say it as a Message)."""
        if len(text) <= HEADLINE_LIMIT:
            return cls(text)
        return cls(text, facts=(("message", text),))

    def notes(self, fix: Fix | None) -> tuple[Note, ...]:
        from placement_lint.rules.spans import Note

        said = [Note(*fact) for fact in self.facts]
        if self.error:
            said.append(Note("error", self.error))
        if self.help:
            safety = "" if fix is None else " (safe fix)" if fix.safe else " (unsafe fix)"
            said.append(Note("help", f"{self.help}{safety}"))
        return tuple(said)


def headline(text: str) -> str:
    """At most HEADLINE_LIMIT characters: a long value written in the code is what gets cut."""
    return text if len(text) <= HEADLINE_LIMIT else text[: HEADLINE_LIMIT - 3] + "..."


def under(setup: Setup) -> str:
    """`under DeepSpeed ZeRO-3`, for a headline."""
    return f"under {setup.describe()}"


PER_PROCESS_MAP = '{"": PartialState().local_process_index}'
# What the libraries raise, quoted the same way by every rule that predicts it (domain.md §1.2).
ZERO3_LOAD_ERROR = 'transformers raises "DeepSpeed Zero-3 is not compatible with passing a `device_map`" at load time'
SPREAD_PREPARE_ERROR = (
    "accelerate raises \"You can't train a model that has been loaded with `device_map='auto'` in any distributed mode\""
)


DDP_WRAP_ERROR = (
    'PyTorch raises "DistributedDataParallel device_ids and output_device arguments only work with '
    'single-device/multiple-device GPU modules or CPU modules"'
)


def spread_prepare_consequence(context: Context, auto: bool = False) -> str:
    """What a model spread over several GPUs meets at `prepare`: accelerate's check since 0.22.0
    (accelerator.py); a repository pinned below it reaches DDP's own error under DDP instead. And
    `"auto"` (`auto`) on transformers 4.50-4.53 under a launcher's WORLD_SIZE becomes tensor
    parallelism instead of a spread (domain.md §1.3 M4; removed in 4.54.0, PR #38942)."""
    if context.setup.mode is Mode.DDP and auto and context.pinned_below("transformers", "4.50") is False:
        pin = context.pinned_below("transformers", "4.54")
        if pin:
            return (
                f'with {pin}, from_pretrained turns device_map="auto" into tensor parallelism when WORLD_SIZE is set '
                "(transformers 4.50-4.53), and DDP then fails on its DTensor parameters (accelerate >= 1.9: "
                '"Your model contains `DTensor` parameters, which is incompatible with DDP")'
            )
    if context.setup.mode is Mode.DDP:
        pin = context.pinned_below("accelerate", "0.22")
        if pin:
            return f"accelerate checks for this only since 0.22, so with {pin} {DDP_WRAP_ERROR} when it wraps the model"
    return SPREAD_PREPARE_ERROR


def zero3_load_consequence(context: Context, instead: str) -> str:
    """What a device_map under ZeRO-3 leads to at load time. Usually ZERO3_LOAD_ERROR; but when the
    run's accelerate config turns `zero3_init_flag` off and the repository pins accelerate below 1.0,
    accelerate creates no HfDeepSpeedConfig (before 1.0, `DeepSpeedPlugin.set_deepspeed_weakref` did
    only with the flag on; PR #3097 made it unconditional), so the load does not fail: `instead` says
    what happens then."""
    if not any(ZERO3_INIT_OFF in e.text for e in context.deciding):
        return ZERO3_LOAD_ERROR
    pin = context.pinned_below("accelerate", "1.0")
    if pin is None:
        return (
            f"{ZERO3_LOAD_ERROR} on accelerate >= 1.0 (before 1.0, with {ZERO3_INIT_OFF}, the load does not fail and {instead})"
        )
    if pin is False:
        return ZERO3_LOAD_ERROR
    return f"with {pin} and {ZERO3_INIT_OFF} transformers does not see ZeRO-3 when the model loads, so the load does not fail and {instead}"


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


def wrapped_by_ddp(device_map: DeviceMap) -> bool:
    """The model goes into a hand-written `DistributedDataParallel(...)` and nothing else trains it."""
    trains = [c for c in device_map.consumers if c.trains]
    return bool(trains) and all(
        c.kind is ConsumerKind.WRAPPER and c.name.rsplit(".", 1)[-1] in ("DDP", "DistributedDataParallel") for c in trains
    )


def reachable_under(file: CheckedFile, node: ast.AST, setup: Setup, arguments: tuple[tuple[str, str, str], ...] = ()) -> bool:
    """False when an enclosing `if` (or conditional expression) rules this code out under `setup` and
    the launch's `arguments`: `if not ddp:` in a DDP run, `if args.use_deepspeed: ... else:` under a
    launch that passes `--use_deepspeed true`. Unknown conditions keep the code reachable."""
    resolver = file.resolver_for(setup, arguments)
    for ancestor, in_body in enclosing_conditions(file.resolver, node):
        truth = resolver.truth(ancestor.test)
        if truth is not None and truth != in_body and not isinstance(ancestor, ast.While):
            return False
        if isinstance(ancestor, ast.While) and in_body and truth is False:
            return False
    return True


def enclosing_conditions(resolver: Resolver, node: ast.AST) -> Iterator[tuple[ast.If | ast.IfExp | ast.While, bool]]:
    """The `if`s (and conditional expressions, `while`s) around `node` in its function, innermost
    first, each with whether `node` is in its body; a function's guards are its own, callers are not followed."""
    child = node
    for ancestor in resolver.ancestors(node):
        if isinstance(ancestor, (ast.If, ast.IfExp, ast.While)) and child is not ancestor.test:
            yield ancestor, child in ancestor.body if isinstance(ancestor.body, list) else child is ancestor.body
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break
        child = ancestor


def written(file: CheckedFile, node: ast.AST, limit: int = 48) -> str:
    """The code as the user wrote it, on one line and shortened to `limit` characters."""
    start, end = file.source.node_span(node)
    return _shortened(file.source.text[start:end], limit)


def is_local(file: CheckedFile, device_map: DeviceMap) -> bool:
    """The value is written in the loader's own scope, so changing it changes only this load. A
    dataclass field default never is: it is every run's default for that command-line argument."""
    if any(isinstance(a, ast.ClassDef) for a in file.resolver.ancestors(device_map.node)):
        return False
    return file.resolver.scope_of(device_map.node) is file.resolver.scope_of(device_map.loader.node)


TRL_RESETS_SINCE = {Mode.DEEPSPEED: "0.26", Mode.DDP: "0.27"}


def trl_overrides(context: Context, device_map: DeviceMap) -> bool:
    """TRL's stable trainers reset `model_init_kwargs["device_map"]` to None under MULTI_GPU and
    DEEPSPEED (TRL >= 0.27, domain.md §1.4), but not under FSDP."""
    if device_map.loader.kind is not LoaderKind.TRL_INIT_KWARGS or context.setup.mode not in (Mode.DDP, Mode.DEEPSPEED):
        return False
    # The reset came in TRL 0.26 for DEEPSPEED and 0.27 for MULTI_GPU (sft_trainer.py at those tags):
    # a repository pinned below passes model_init_kwargs on as given.
    if context.pinned_below("trl", TRL_RESETS_SINCE[context.setup.mode]):
        return False
    return bool(device_map.consumers) and all(c.name in TRL_GUARDED_TRAINERS for c in device_map.consumers)


def _skip_trivia(text: str, position: int) -> int:
    """The next offset that is not whitespace, a line continuation or a comment."""
    while position < len(text):
        if text[position] in " \t\r\n\f\\":
            position += 1
        elif text[position] == "#":
            line_end = text.find("\n", position)
            position = len(text) if line_end < 0 else line_end
        else:
            break
    return position


def _past_closing_parens(text: str, start: int, end: int) -> int:
    """ast ends `x=("auto")` before its closing parenthesis; move past the ones it opened."""
    unmatched = text.count("(", start, end) - text.count(")", start, end)
    while unmatched > 0:
        after = _skip_trivia(text, end)
        if not text.startswith(")", after):
            break
        end, unmatched = after + 1, unmatched - 1
    return end


def _bodies(node: ast.AST | None) -> list[list[ast.stmt]]:
    return [getattr(node, name) for name in ("body", "orelse", "finalbody") if isinstance(getattr(node, name, None), list)]


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
        facts.append(("returned by", f"{written(file, helper.call)}: {value} ({helper.foreign.path}:{device_map.node.lineno})"))
    elif helper is not None:
        row = file.source.position(file.source.node_span(helper.call)[0])[0]
        facts.append(("returned by", f"{written(file, helper.call)}, line {row}"))
    entries = device_map.candidate.entries
    loop = entries.spread_by if entries is not None else None
    if loop is not None:
        facts.append(("spread by", f"the loop at line {loop.lineno} puts its layers on several devices"))
    argument = device_map.candidate.from_launch
    if argument:
        facts.append(("passed by", f"{argument.where} --{argument.name} {shown(argument.value)}"))
        return tuple(facts)
    passed, defaults = branch_arguments(device_map)
    if passed:
        values = ", ".join(f"{name}={shown(value)}" for name, value, _ in passed)
        facts.append(("branch", f"taken under {passed[0][2]}, which sets {values}"))
    elif defaults:
        facts.append(("branch", f"taken by default: {', '.join(f'{name}={value}' for name, value in defaults)}"))
    return tuple(facts)


def value_origins(file: CheckedFile, device_map: DeviceMap) -> tuple[Related, ...]:
    """The spans a value not written in the load comes through: for a helper's return, the helper's
    call (`helper`) and the value where the helper writes it (`origin`), and the load it reaches when
    the finding is at the value; for a map filled in a loop, that loop's store."""
    helper = device_map.candidate.helper
    entries = device_map.candidate.entries
    loop = entries.spread_by if entries is not None else None
    if helper is None and loop is None:
        return ()
    from placement_lint.rules.spans import Related

    def here(node: ast.AST, role: str, label: str) -> Related:
        start, end = file.source.node_span(node)
        return Related(role, file.display, *file.source.position(start), *file.source.position(end), label)

    foreign = helper.foreign if helper is not None else None

    def origin_of(node: ast.AST, label: str) -> Related:
        if foreign is None:
            return here(node, "origin", label)
        end = (getattr(node, "end_lineno", None) or node.lineno, (getattr(node, "end_col_offset", None) or 0) + 1)  # type: ignore[attr-defined]
        return Related("origin", foreign.path, node.lineno, node.col_offset + 1, *end, label)  # type: ignore[attr-defined]

    found: list[Related] = []
    if foreign is not None:  # the finding is the call; the value is written in the helper's module
        found.append(origin_of(device_map.node, f"returns {_foreign_text(foreign, device_map.node)}"))
    elif helper is not None:  # the finding is the value in the helper; the call and the load are here
        found.append(here(helper.call, "helper", f"{written(file, helper.call)} returns it"))
        found.append(here(device_map.loader.node, "load", "loaded here"))
    if loop is not None:
        found.append(origin_of(loop, "its layers spread over devices here"))
    return tuple(found)


def _foreign_text(foreign: ForeignFunction, node: ast.AST) -> str:
    """A value written in another module, as written there."""
    return _shortened(ast.get_source_segment(foreign.text, node) or ast.unparse(node))


def _shortened(text: str, limit: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def branch_arguments(device_map: DeviceMap) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The launch arguments, and the flags left at their defaults, read by the conditions on the
    value's way to the load and around the load."""
    resolver = device_map.analysis.resolver
    passed = {name: (name, value, where) for name, value, where in resolver.arguments if where}
    flags = {name: f.default for name, f in parser_fields(resolver.module).items() if name == f.name and f.convert == "bool"}
    flags.update((name, value) for name, value, where in resolver.arguments if not where and value in ("True", "False"))
    tests = [test for test, _ in device_map.candidate.guards]
    tests += [condition.test for condition, _ in enclosing_conditions(resolver, device_map.loader.node)]
    found: list[tuple[str, str, str]] = []
    defaults: list[tuple[str, str]] = []
    for test in tests:
        for node in ast.walk(test):
            if not isinstance(node, ast.Attribute):
                continue
            if node.attr in passed and passed[node.attr] not in found:
                found.append(passed[node.attr])
            elif (
                node.attr not in passed
                and flags.get(node.attr) in ("True", "False")
                and (node.attr, flags[node.attr]) not in defaults
            ):
                defaults.append((node.attr, flags[node.attr]))
    return found, defaults
