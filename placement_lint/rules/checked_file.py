"""The file a rule checks: one parsed file, its context, and the analyses computed once, on demand."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.analysis.names import TRL_GUARDED_TRAINERS, ImportTable, dotted, keyword, past_self_returning
from placement_lint.context.evidence import Context, FileContext, Kind
from placement_lint.distributed import SINGLE, Mode, Setup
from placement_lint.edits import Edit
from placement_lint.records import NamedTuple
from placement_lint.source import SourceFile

if TYPE_CHECKING:
    # The analyses are imported when a file is checked, not with the rules: the pre-check asks the
    # rules for their tokens, and a run whose files all fail it never needs them (nor the class
    # lookups, which the checker makes).
    from placement_lint.analysis.dataflow import Guard, HelperLocator, Resolver
    from placement_lint.analysis.placements import DeviceMap, Loader, PlacementAnalysis
    from placement_lint.analysis.values import Placement
    from placement_lint.context.classes import ImportedClasses

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
        # The device maps each run may take, once per setup and launch arguments (see _taken_under).
        self._taken: dict[tuple[Setup, tuple[tuple[str, str, str], ...]], list[tuple[DeviceMap, Context]]] = {}

    @cached_property
    def bypasses_device_map_check(self) -> bool:
        """The file sets ACCELERATE_BYPASS_DEVICE_MAP=true (accelerate >= 0.23), opting out of its check."""
        for node in self.resolver.index.calls_and_assigns:
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
            from placement_lint.analysis.dataflow import Resolver

            self._resolvers[key] = Resolver(self.module, setup, arguments, self.helpers)
        return self._resolvers[key]

    def analysis_for(self, setup: Setup, arguments: tuple[tuple[str, str, str], ...] = ()) -> PlacementAnalysis:
        key = (setup, arguments)
        if key not in self._analyses:
            from placement_lint.analysis.flow import no_ancestors
            from placement_lint.analysis.placements import PlacementAnalysis

            # Not the bound `self.ancestors`: an analysis kept here must not refer back to the file, or the
            # file and its tree are freed only by the cycle collector, which then walks every tree left.
            ancestors = self.classes if self.classes is not None else no_ancestors
            self._analyses[key] = PlacementAnalysis(
                self.module, self.imports, self.resolver_for(setup, arguments), self.contexts.remote_consumers, ancestors
            )
        return self._analyses[key]

    def ancestors(self, written: str) -> tuple[str, ...]:
        """The base class names, nearest first, of a class imported from the repository (`CustomSFT`)."""
        return self.classes(written) if self.classes is not None else ()

    @cached_property
    def resolver(self) -> Resolver:
        """For questions about structure (parents, scopes), which do not depend on the setup."""
        return self.resolver_for(SINGLE)

    def launched_alone(self, node: ast.AST) -> bool:
        """Does some launch run the code at `node` in one process with no distributed setup at all (`python
        train.py` beside the DeepSpeed launch)? A map that spreads the model is that run's way to fit it
        on the machine's GPUs: a fix for the distributed runs changes that one too."""
        return any(
            not context.setup.distributed and any(e.kind is Kind.SINGLE and e.origin == "launch" for e in context.evidence)
            for context in self.contexts.contexts_at(node)
        )

    @property
    def device_maps(self) -> list[tuple[DeviceMap, Context]]:
        """Every device_map in a distributed part of the file, resolved under each setup (and launch
        arguments) that part runs under; a value found under several is kept once, strongest first."""
        return self._values[0]

    @cached_property
    def _values(self) -> tuple[list[tuple[DeviceMap, Context]], dict[tuple[int, object], list[Loader]]]:
        """The device_maps, and for each value they keep the loads it reaches."""
        found: list[tuple[DeviceMap, Context]] = []
        reached: dict[tuple[int, object], list[Loader]] = {}
        for variant in self.contexts.variants():
            if not variant.setup.distributed:
                continue
            for device_map, context in self._taken_under(variant):
                key = self._value_key(device_map)
                if key not in reached:
                    reached[key] = []
                    found.append((device_map, context))
                if not any(load.node is device_map.loader.node for load in reached[key]):
                    reached[key].append(device_map.loader)
        return found, reached

    def _taken_under(self, variant: Context) -> list[tuple[DeviceMap, Context]]:
        """The device_maps a run of one setup and launch arguments may take, with its context: worked
        out once a run (each load's values ask again: 58,000 times in a 2,000-line function)."""
        key = (variant.setup, variant.arguments)
        if key not in self._taken:
            self._taken[key] = list(self._work_out_taken(variant))
        return self._taken[key]

    def _work_out_taken(self, variant: Context) -> Iterator[tuple[DeviceMap, Context]]:
        analysis = self.analysis_for(variant.setup, variant.arguments)
        resolver = self.resolver_for(variant.setup, variant.arguments)
        for device_map in analysis.device_maps:
            if not self._decided(device_map, resolver):
                continue
            if not reachable_under(self, device_map.loader.node, variant.setup, variant.arguments):
                continue  # the load sits in a branch this run does not take
            contexts = self.contexts.contexts_at(device_map.loader.node)
            context = next((c for c in contexts if (c.setup, c.arguments) == (variant.setup, variant.arguments)), None)
            if context is None or self._importers_rule_out(device_map, context, resolver):
                continue  # no such run reaches it, or the launched script's calls never take its branch
            yield device_map, context

    def values_taken(self, load: ast.AST, variant: Context) -> list[DeviceMap]:
        """The values the device_map of `load` (a loader call) may take in a run of `variant`'s setup and
        launch arguments: `device_map=device_map` after `if args.load_in_4_bit: device_map = None else:
        device_map = {"": "cuda"}` is only None under a launch that passes `--load_in_4_bit`."""
        return [device_map for device_map, _ in self._taken_under(variant) if device_map.loader.node is load]

    def _value_key(self, device_map: DeviceMap) -> tuple[int, object]:
        """What makes one finding of a value however many loads it reaches: where it is reported (a
        value a launch passes: its load, where the argument is read) and what it says."""
        site = self.site(device_map).node if device_map.candidate.from_launch is None else device_map.loader.node
        return id(site), device_map.classified.placement

    def loads_reached(self, device_map: DeviceMap) -> list[Loader]:
        """Every load, in the order they are written, that the value of `device_map` reaches in a
        distributed run (`device_map = "auto"` passed to a model's and a reference model's load)."""
        loads = self._values[1].get(self._value_key(device_map)) or [device_map.loader]
        return sorted(loads, key=lambda load: (load.node.lineno, load.node.col_offset))  # type: ignore[attr-defined]

    def _importers_rule_out(self, device_map: DeviceMap, context: Context, resolver: Resolver) -> bool:
        """The setup reaches this module through a launched script that imports it (no launch runs the
        module itself), the value is in a top-level function (or a top-level class's `__init__`) this
        module never calls itself, and every call the launched importers make of it passes (or leaves
        at its default) a literal that rules out the value's branch: `build(cls, path, ds_config)`
        never takes `if for_eval:` in `def build(..., for_eval=False)`."""
        strong = [e for e in context.evidence if e.kind not in (Kind.POSSIBLE, Kind.SINGLE)]
        # What the module itself sets up (`TrainingArguments(ddp_find_unused_parameters=...)`) runs
        # only when a caller calls into it; a launch of the module itself would run it otherwise.
        if not any(e.origin == "import" for e in strong) or any(e.origin == "launch" for e in strong):
            return False
        function = self.resolver.scope_of(device_map.loader.node)
        if not isinstance(function, ast.FunctionDef):
            return False
        owner = self.resolver.parent(function)
        if isinstance(owner, ast.ClassDef) and function.name == "__init__":  # `W(...)` calls it
            name, owner = owner.name, self.resolver.parent(owner)
        else:
            name = function.name
        if owner is not self.module:
            return False
        bindings = self.contexts.remote_calls.get(name)
        if not bindings or self.resolver.index.calls_by_name.get(name):
            return False
        # The value's conditions: where it was bound, and the branches it came past (`device_map =
        # "auto"` then `if train_mode and ...: device_map = {"": rank}` reaches only where that is false).
        guards = [*self.resolver.enclosing_guards(device_map.loader.node), *device_map.candidate.conditions]
        return any(
            all(
                resolver.truth_for_call(test, function, {name: ast.Constant(value) for name, value in bound.items()})
                is (not outcome)
                for bound in bindings
            )
            for test, outcome in guards
        )

    def _decided(self, device_map: DeviceMap, resolver: Resolver) -> bool:
        """The run may take this value: every condition on its way is known to hold, depends on a value
        the user chooses (a model name no launch passes), or reads only run-time state no launch decides
        (`sys.argv[-1].startswith("x")`: both branches stay live, see `on_one_path`); a condition on a
        setting the launch does not show (`if args.use_peft:` read by a parser the tool cannot follow,
        TRL's `get_quantization_config(model_args)`) is taken as left off. And it is not the `except`
        fallback of a `try` whose body binds the value the launch uses."""
        # The load's own conditions decide whether it runs, not which value it gets: a branch nobody can
        # decide stays live (as for a literal written in the call), one the setup rules out is dead.
        own = resolver.enclosing_guards(device_map.loader.node)
        if any(resolver.truth(test) is (not outcome) for test, outcome in own):
            return False
        shared = {(id(test), outcome) for test, outcome in own}
        if any(
            resolver.truth(test) is None and not resolver.chosen_by_user(test) and resolver.reads_run_settings(test)
            for test, outcome in device_map.candidate.guards
            if (id(test), outcome) not in shared
        ):
            return False
        return not any(
            isinstance(step, ast.AST) and any(isinstance(a, ast.ExceptHandler) for a in self.resolver.ancestors(step))
            for step in device_map.candidate.via
        )

    def on_one_path(self, device_map: DeviceMap) -> list[Guard]:
        """The conditions the value is bound under that read only run-time state, which no launch
        decides (`if sys.argv[-1].startswith("x"):`, `if torch.cuda.get_device_properties(0).total_memory
        < ...:`): the value reaches the load on the runs that take that branch, which the linter cannot
        tell apart from the runs that do not. The load's own conditions and a choice of model
        (`chosen_by_user`) are not among them: the first decide whether the load runs at all, and the
        second were judged as live before."""
        resolver = device_map.analysis.resolver
        own = {(id(test), outcome) for test, outcome in resolver.enclosing_guards(device_map.loader.node)}
        return [
            (test, outcome)
            for test, outcome in device_map.candidate.guards
            if (id(test), outcome) not in own and resolver.truth(test) is None and not resolver.chosen_by_user(test)
        ]

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
        return self._splats.get(name, 0)

    @cached_property
    def _splats(self) -> dict[str | None, int]:
        """For each kwargs dict as written, how many calls unpack it: counted once, asked per load."""
        counts: dict[str | None, int] = {}
        for call in self.resolver.index.calls:
            for kw in call.keywords:
                if kw.arg is None:
                    name = dotted(kw.value)
                    counts[name] = counts.get(name, 0) + 1
        return counts

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
        """`from module import name`, where isort and ruff's I001 would put it (rules/added_imports.py),
        unless the name is already there."""
        if self.imports.aliases.get(name) == f"{module}.{name}" or any(
            q.endswith(f".{name}") and a == name for a, q in self.imports.aliases.items()
        ):
            return None
        from placement_lint.rules.added_imports import import_edit  # only a fix that adds an import

        return import_edit(self.source, self.module, module, name)


# -- what the checked file asks of a load (the rules ask it too) ------------------------------------


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
    return shortened(file.source.text[start:end], limit)


def moved_call(call: ast.Call) -> ast.Call | None:
    """The call whose result a move (`.cuda()`, `.to(...)`) moves, past the calls that return their module
    itself: the load of `X.from_pretrained(...).eval().cuda()`. None for a move of a name (`model.cuda()`,
    `teacher.requires_grad_(False).cuda()`)."""
    assert isinstance(call.func, ast.Attribute)
    moved = past_self_returning(call.func.value)
    return moved if isinstance(moved, ast.Call) else None


def move_text(file: CheckedFile, call: ast.Call) -> str:
    """`model.to("cuda")`; for a move chained on a call (the load, `.eval()`), its tail: `.cuda()` on the
    model from_pretrained(...) loads."""
    loaded = moved_call(call)
    if loaded is None:
        return written(file, call, limit=40)
    arguments = ", ".join(written(file, a, limit=24) for a in [*call.args, *call.keywords])
    return f".{call.func.attr}({arguments}) on the model {written(file, loaded.func, limit=40)} loads"


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
    from placement_lint.analysis.placements import LoaderKind

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


def shortened(text: str, limit: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
