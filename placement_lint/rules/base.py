"""What a rule is: one class with its code, message and examples, checking one parsed file in context."""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.flow import TRL_GUARDED_TRAINERS, no_ancestors
from placement_lint.analysis.names import ImportTable, dotted, keyword
from placement_lint.analysis.placements import DeviceMap, LoaderKind, ModelLoad, PlacementAnalysis
from placement_lint.analysis.values import Placement
from placement_lint.context.classes import ImportedClasses
from placement_lint.context.evidence import Context, FileContext
from placement_lint.distributed import SINGLE, Mode, Setup
from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.rules.noqa import Directive
from placement_lint.rules.violation import Violation
from placement_lint.source import SourceFile

if TYPE_CHECKING:  # made only for findings: a clean run never creates their classes
    from placement_lint.rules.spans import Note


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
            self._resolvers[key] = Resolver(self.module, setup, arguments)
        return self._resolvers[key]

    def analysis_for(self, setup: Setup, arguments: tuple[tuple[str, str, str], ...] = ()) -> PlacementAnalysis:
        key = (setup, arguments)
        if key not in self._analyses:
            self._analyses[key] = PlacementAnalysis(
                self.module, self.imports, self.resolver_for(setup, arguments), self.contexts.remote_consumers, self.ancestors
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
        not set, `if args.use_peft:` read by argparse, leaves it undecided), and it is not the `except`
        fallback of a `try` whose body binds the value the launch uses."""
        if any(resolver.truth(test) is None for test, _ in device_map.candidate.guards):
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
        fix = None if device_map.candidate.from_launch else make_fix()
        return self.violation(file, file.site(device_map).node, message, fix, context, device_map.consumers, "load")


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


def reachable_under(file: CheckedFile, node: ast.AST, setup: Setup) -> bool:
    """False when an enclosing `if` (or conditional expression) rules this code out under `setup`:
    `if not ddp:` in a DDP run. Unknown conditions keep the code reachable."""
    resolver = file.resolver_for(setup)
    child = node
    for ancestor in file.resolver.ancestors(node):
        if isinstance(ancestor, (ast.If, ast.IfExp, ast.While)) and child is not ancestor.test:
            in_body = child in ancestor.body if isinstance(ancestor.body, list) else child is ancestor.body
            truth = resolver.truth(ancestor.test)
            if truth is not None and truth != in_body and not isinstance(ancestor, ast.While):
                return False
            if isinstance(ancestor, ast.While) and in_body and truth is False:
                return False
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break  # a function's guards are its own; callers are not followed
        child = ancestor
    return True


def written(file: CheckedFile, node: ast.AST, limit: int = 48) -> str:
    """The code as the user wrote it, on one line and shortened to `limit` characters."""
    start, end = file.source.node_span(node)
    text = " ".join(file.source.text[start:end].split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_local(file: CheckedFile, device_map: DeviceMap) -> bool:
    """The value is written in the loader's own scope, so changing it changes only this load. A
    dataclass field default never is: it is every run's default for that command-line argument."""
    if any(isinstance(a, ast.ClassDef) for a in file.resolver.ancestors(device_map.node)):
        return False
    return file.resolver.scope_of(device_map.node) is file.resolver.scope_of(device_map.loader.node)


def trl_overrides(context: Context, device_map: DeviceMap) -> bool:
    """TRL's stable trainers reset `model_init_kwargs["device_map"]` to None under MULTI_GPU and
    DEEPSPEED (TRL >= 0.27, domain.md §1.4), but not under FSDP."""
    if device_map.loader.kind is not LoaderKind.TRL_INIT_KWARGS or context.setup.mode not in (Mode.DDP, Mode.DEEPSPEED):
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
    """`device_map="auto"`, or `device_map=args.device_map (--device_map auto)` when a launch passes it."""
    argument = device_map.candidate.from_launch
    passed = f" (--{argument.name} {argument.value})" if argument else ""
    return f"device_map={written(file, device_map.node)}{passed}"


def passed_by_launch(device_map: DeviceMap) -> tuple[tuple[str, str], ...]:
    """`passed by: scripts/run.sh:4` when the value comes from a launch's command line."""
    argument = device_map.candidate.from_launch
    return (("passed by", f"{argument.where} --{argument.name} {argument.value}"),) if argument else ()
