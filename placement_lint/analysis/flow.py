"""Where a loaded model goes: a trainer, `accelerator.prepare`, a DDP/FSDP wrapper, or only inference.

We follow the value of a loader call through assignments, re-bindings by wrappers
(`get_peft_model`, `prepare_model_for_kbit_training`), and helper functions that return it, within
one file. Two things from other files of the repository come in as data: what importers do with
the values this module's top-level functions return (`remote`), and the base classes of classes
imported from the repository's modules (`ancestors`), so a user subclass of a trainer is a trainer.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import NamedTuple

from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.names import SELF_RETURNING, WRAPPERS, ImportTable, dotted, last_segment, past_self_returning

MODEL_ARGUMENTS = (
    "model",
    "ref_model",
    "reward_model",
    "reward_funcs",
    "value_model",
    "teacher_model",
    "policy",
    "ref_policy",
    "model_init",
)
# Containers that make the models they hold submodules of whatever they are assigned to.
_MODULE_CONTAINERS = {"ModuleDict", "ModuleList", "Sequential"}
# Methods that register a module as a named submodule of their owner.
_REGISTERING_METHODS = {"add_module", "register_module"}
# What builds a model (a load, or a wrapper around one): an attribute set on it makes a submodule.
_MODEL_BUILDERS = {"from_pretrained", "from_config", "_from_config"}
# Uses that run the model without training it; merging an adapter and saving the result count too
# (trl's stack_llama_2 sft_llama2.py reloads with device_map="auto" only to merge and save).
_INFERENCE_METHODS = {"generate", "eval", "forward", "score", "encode", "sample", "merge_and_unload"}
# Base classes whose subclasses register the modules assigned to their attributes.
_MODULE_BASES = {"Module", "PreTrainedModel"}


# What a read of the model does with it (see ModelFlow._read_use): hands it to a consumer, to a wrapper
# whose result is followed, returns it (or an item of a returned tuple), or attaches it to another model.
_DIRECT, _WRAPPED, _RETURNED, _RETURNED_ITEM, _ATTACHED = "direct", "wrapped", "returned", "returned item", "attached"
_HELD = "held"  # passed to a module class of the file that makes it a submodule (`Distiller(student, teacher)`)


def no_ancestors(written: str) -> tuple[str, ...]:
    return ()


def returned_item(function: str, position: int) -> str:
    """The key under which `remote` holds where importers send item `position` of the tuple `function`
    returns (`model, tokenizer = utils.load_model(args)`); brackets never occur in a function's name."""
    return f"{function}[{position}]"


def unpacked_positions(call: ast.expr, resolver: Resolver) -> range:
    """The items a call's result is unpacked into (`model, tokenizer = load()`: 0 and 1); none when it is
    not unpacked, or a starred target makes positions unknowable."""
    return range(len(_unpacking_targets(resolver.parent(call))))


def _unpacking_targets(assignment: ast.AST | None) -> list[ast.expr]:
    """The names `a, b = ...` binds, in order; none for any other statement, or a starred target."""
    if not isinstance(assignment, ast.Assign) or len(assignment.targets) != 1:
        return []
    target = assignment.targets[0]
    if not isinstance(target, (ast.Tuple, ast.List)) or any(isinstance(item, ast.Starred) for item in target.elts):
        return []
    return target.elts


class ModelFlow:
    def __init__(
        self,
        module: ast.Module,
        imports: ImportTable,
        resolver: Resolver,
        remote: Mapping[str, tuple[Consumer, ...]] | None = None,
        ancestors: Callable[[str], tuple[str, ...]] = no_ancestors,
    ) -> None:
        """`remote`: per top-level function of this module, where its importers' calls send what it
        returns. `ancestors`: the base class names, nearest first, of a class this module imports
        from the repository (`CustomSFT` -> ("SFTTrainer", "Trainer")), by the name as written."""
        self.module = module
        self.imports = imports
        self.resolver = resolver
        self.index = resolver.index
        self.remote = remote or {}
        self.ancestors = ancestors
        self.trainer_classes = _TrainerClasses(self.index.classes, ancestors)
        self.module_classes = _ModuleClasses(self.index.classes, ancestors)
        self._uses: dict[tuple[str, int], list[Consumer]] = {}
        # Where each value flows, once: a model re-wrapped and moved block after block (`model =
        # model.to(device)`, each result read by the next) was followed again from every wrapper.
        self._consumers: dict[tuple[int, int, int | None], list[Consumer]] = {}
        self._scoped_loads: dict[str, dict[int, list[ast.Name | ast.Attribute]]] = {}
        self._uses_by_scope: dict[tuple[str, int], list[tuple[tuple[int, int], object, object]]] = {}  # see _uses_in

    def is_trainer(self, call: ast.Call) -> bool:
        name = last_segment(self.imports.qualify(call.func))
        if name in self.trainer_classes or name.endswith("Trainer"):
            return True
        written = dotted(call.func)
        return bool(written) and any(base.endswith("Trainer") for base in self.ancestors(written))  # type: ignore[arg-type]

    def trainer_name(self, call: ast.Call) -> str:
        return last_segment(self.imports.qualify(call.func))

    def consumers(self, value: ast.expr, depth: int = 0, position: int | None = None) -> list[Consumer]:
        """Every place the object produced by `value` (a call expression) flows into; with `position`,
        the object is that item of the tuple the call returns (`data, model, tok = load()`)."""
        if depth > 4:
            return []
        key = (id(value), depth, position)
        if key not in self._consumers:
            self._consumers[key] = self._find_consumers(value, depth, position)
        return list(self._consumers[key])

    def _find_consumers(self, value: ast.expr, depth: int, position: int | None) -> list[Consumer]:
        parent = self.resolver.parent(value)
        if position is not None:
            return self._unpacked(parent, position, depth)
        value, parent = self._through_self_returning(value, parent)
        consumer = self._consumer_of_argument(value, parent)
        if consumer is not None:
            if consumer.kind is ConsumerKind.WRAPPER and consumer.name in WRAPPERS:
                return self.consumers(consumer.node, depth + 1)  # type: ignore[arg-type]
            return [consumer]
        attached = self._attachment(value, parent)
        if attached is not None:
            return self._attached_uses(*attached, depth)
        holder = self._module_holding(value, parent)
        if holder is not None:
            return self._held_uses(*holder, depth)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            found: list[Consumer] = []
            for target in targets:
                key = dotted(target)
                if key:
                    found += self._uses_of(key, parent, depth)
            return found
        if isinstance(parent, ast.Return):
            return self._returned(parent, depth)
        return []

    def _returned(self, statement: ast.Return, depth: int, position: int | None = None) -> list[Consumer]:
        """Where the callers of the function that returns the model send it: this file's calls, and for a
        top-level function, its importers' calls too (a helper may be called by a smoke test here and by
        the training script that imports it). `position`: the model is that item of a returned tuple,
        followed in this file's callers and its importers' unpacking calls (`model, tok = utils.load()`)."""
        function = self.resolver.scope_of(statement)
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return []
        found = [c for call in self._calls_to(function.name) for c in self.consumers(call, depth + 1, position)]
        if self.remote and self.resolver.parent(function) is self.module:
            found += self.remote.get(function.name if position is None else returned_item(function.name, position), ())
        return found

    def _unpacked(self, parent: ast.AST | None, position: int, depth: int) -> list[Consumer]:
        """`data, model, tokenizer = load()`: the uses of the name bound to item `position`."""
        targets = _unpacking_targets(parent)
        if len(targets) <= position:
            return []
        key = dotted(targets[position])
        return self._uses_of(key, parent, depth) if key else []

    def _uses_of(self, key: str, assignment: ast.AST, depth: int) -> list[Consumer]:
        cache_key = (key, id(assignment))
        if cache_key not in self._uses:
            self._uses[cache_key] = []  # a cycle through re-bindings ends here
            self._uses[cache_key] = self._find_uses(key, assignment, depth)
        return self._uses[cache_key]

    def _loads_in(self, key: str, scope: ast.AST) -> list[ast.Name | ast.Attribute]:
        """Reads of `key` in `scope`, including functions nested in it."""
        loads = self.index.loads_by_name.get(key, [])
        if scope is self.module:
            return loads
        return self._loads_by_scope(key).get(id(scope), [])

    def _loads_by_scope(self, key: str) -> dict[int, list[ast.Name | ast.Attribute]]:
        """The reads of `key` under each function or lambda that holds them (by id), once per key:
        from the module's index rather than walking each scope again, in the same (breadth-first)
        order, and without going up from every read for every assignment asked about."""
        grouped = self._scoped_loads.get(key)
        if grouped is None:
            grouped = self._scoped_loads[key] = {}
            for node in self.index.loads_by_name.get(key, []):
                for ancestor in self.resolver.ancestors(node):
                    if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                        grouped.setdefault(id(ancestor), []).append(node)
        return grouped

    def _find_uses(self, key: str, assignment: ast.AST, depth: int) -> list[Consumer]:
        """Where the reads of `key` after `assignment` send the model, each consumer once (in the order
        first found): the rules ask only which consumers there are and which comes first, and a model
        re-wrapped again and again (`model = get_peft_model(model, ...)`, each wrapper's result read
        by the next) would otherwise carry every later consumer once per later wrapper."""
        scope = self.resolver.scope_of(assignment)
        after = (assignment.end_lineno or 0, 0)  # type: ignore[attr-defined]
        found: list[Consumer] = []
        for position, kind, taken in self._uses_in(key, scope):
            if position <= after:
                continue
            if kind is _DIRECT:
                found.append(taken)  # type: ignore[arg-type]
            elif kind is _WRAPPED:
                found += self.consumers(taken, depth + 1)  # type: ignore[arg-type]
            elif kind is _RETURNED:
                found += self._returned(taken, depth)  # type: ignore[arg-type]
            elif kind is _RETURNED_ITEM:
                found += self._returned(taken[0], depth, taken[1])  # type: ignore[index]
            elif kind is _HELD:
                found += self._held_uses(*taken, depth)  # type: ignore[misc]
            else:
                found += self._attached_uses(*taken, depth)  # type: ignore[misc]
        return list(dict.fromkeys(found))

    def _uses_in(self, key: str, scope: ast.AST) -> list[tuple[tuple[int, int], object, object]]:
        """The reads of `key` in `scope` that do something with the model (see _read_use): where each is,
        and what it does, in the order of _loads_in. Once per key and scope, though every assignment of
        `key` there asks of the reads after it: one statement in six reads a re-wrapped model."""
        cache_key = (key, id(scope))
        found = self._uses_by_scope.get(cache_key)
        if found is None:
            found = self._uses_by_scope[cache_key] = [
                ((node.lineno, node.col_offset), *use)
                for node in self._loads_in(key, scope)
                if (use := self._read_use(node, key)) is not None
            ]
        return found

    def _read_use(self, node: ast.Name | ast.Attribute, key: str) -> tuple[object, object] | None:
        """What the read `node` of `key` does with the model, whichever assignment asks; None: nothing."""
        parent = self.resolver.parent(node)
        consumer = self._consumer_of_argument(node, parent)
        if consumer is not None:
            if consumer.kind is ConsumerKind.WRAPPER and consumer.name in WRAPPERS:
                return _WRAPPED, consumer.node
            return _DIRECT, consumer
        if isinstance(parent, ast.Attribute) and parent.attr in _INFERENCE_METHODS:
            return _DIRECT, Consumer(ConsumerKind.INFERENCE, f"{key}.{parent.attr}", parent)
        if isinstance(parent, ast.Attribute) and parent.attr in SELF_RETURNING:
            # `student.teacher = teacher.to(device)`, `return model.cuda()`: the result is the model;
            # a move on its own line hands it nowhere.
            call = self.resolver.parent(parent)
            if isinstance(call, ast.Call) and call.func is parent and not isinstance(self.resolver.parent(call), ast.Expr):
                return _WRAPPED, call
            return None
        if isinstance(parent, ast.Call) and parent.func is node:
            return _DIRECT, Consumer(ConsumerKind.INFERENCE, f"{key}(...)", parent)
        if isinstance(parent, ast.Return):
            return _RETURNED, parent
        if isinstance(parent, ast.Tuple) and isinstance(returned := self.resolver.parent(parent), ast.Return):
            position = next(i for i, item in enumerate(parent.elts) if item is node)
            return _RETURNED_ITEM, (returned, position)  # `return data, model, tokenizer`
        attached = self._attachment(node, parent)
        if attached is not None:
            return _ATTACHED, attached
        holder = self._module_holding(node, parent)
        if holder is not None:
            return _HELD, holder
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if any(dotted(target) not in (None, key) for target in targets):
                return _WRAPPED, node  # `model = student`: the uses of the new name
        return None

    def _through_self_returning(self, value: ast.expr, parent: ast.AST | None) -> tuple[ast.expr, ast.AST | None]:
        """`X.from_pretrained(...).eval().requires_grad_(False)`: the last call of the chain, and its parent."""
        while isinstance(parent, ast.Attribute) and parent.attr in SELF_RETURNING:
            call = self.resolver.parent(parent)
            if not (isinstance(call, ast.Call) and call.func is parent):
                break
            value, parent = call, self.resolver.parent(call)
        return value, parent

    def _module_holding(self, node: ast.AST, parent: ast.AST | None) -> tuple[ast.Call, ast.stmt] | None:
        """`Distiller(student, teacher)`, a module class of this file whose `__init__` makes the parameter
        that takes `node` a submodule (`self.teacher = teacher`): that call, and the statement it is in.
        Also `Ensemble([student, teacher])`, whose `__init__` makes each item of the parameter one
        (`self.members = nn.ModuleList(members)`; a plain list attribute registers none)."""
        items = isinstance(parent, (ast.List, ast.Tuple))
        if items:
            node, parent = parent, self.resolver.parent(parent)  # type: ignore[assignment]
        call = self.resolver.parent(parent) if isinstance(parent, ast.keyword) else parent
        if not isinstance(call, ast.Call) or call.func is node or not isinstance(call.func, ast.Name):
            return None
        init = self.module_classes.init_of(call.func.id)
        if init is None:
            return None
        if isinstance(parent, ast.keyword):
            name = parent.arg
        else:
            position = next((i for i, item in enumerate(call.args) if item is node), None)
            parameters = [*init.args.posonlyargs, *init.args.args][1:]  # after `self`
            if position is None or position >= len(parameters) or any(isinstance(a, ast.Starred) for a in call.args[:position]):
                return None
            name = parameters[position].arg
        registered = self.module_classes.registered(init, self.resolver)
        if name is None or name not in (registered.items if items else registered.whole):
            return None
        statement = next((a for a in self.resolver.ancestors(call) if isinstance(a, ast.stmt)), None)
        return None if statement is None else (call, statement)

    def _held_uses(self, holder: ast.Call, statement: ast.stmt, depth: int) -> list[Consumer]:
        """Where the module that holds the model goes: the model is sharded and trained with it."""
        return [
            consumer if consumer.attached is not None else consumer._replace(attached=statement)
            for consumer in self.consumers(holder, depth + 1)
        ]

    def _attachment(self, node: ast.AST, parent: ast.AST | None) -> tuple[str, ast.stmt] | None:
        """The model `node` is made a submodule of, by the name that holds it, and the statement that
        does it: `model.teacher = node`, `setattr(model, "teacher", node)`, `model.add_module("t", node)`,
        `model.models = nn.ModuleDict({"teacher": node})`. None unless the owner holds a model."""
        for _ in range(2):  # `ModuleDict({"teacher": node})`, `ModuleList([node])`: their container first
            if isinstance(parent, (ast.Dict, ast.List, ast.Tuple)) and node is not getattr(parent, "keys", None):
                container = self.resolver.parent(parent)
                if isinstance(container, ast.Call) and last_segment(dotted(container.func)) in _MODULE_CONTAINERS:
                    node, parent = container, self.resolver.parent(container)
                    continue
                return None
            if isinstance(parent, ast.Call) and last_segment(dotted(parent.func)) in _MODULE_CONTAINERS and node in parent.args:
                node, parent = parent, self.resolver.parent(parent)
                continue
            break
        owner: ast.expr | None = None
        if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1:
            target = parent.targets[0]
            owner = target.value if isinstance(target, ast.Attribute) else None
        elif isinstance(parent, ast.Call) and node in parent.args:
            func = dotted(parent.func)
            if func == "setattr" and len(parent.args) == 3 and parent.args[2] is node:
                owner = parent.args[0]
            elif isinstance(parent.func, ast.Attribute) and parent.func.attr in _REGISTERING_METHODS:
                owner = parent.func.value
        key = dotted(owner) if owner is not None else None
        statement = self.resolver.parent(parent) if isinstance(parent, ast.Call) else parent
        if key is None or not isinstance(statement, ast.stmt) or not self._holds_model(owner):  # type: ignore[arg-type]
            return None
        return key, statement

    def _holds_model(self, owner: ast.expr) -> bool:
        """`owner` is bound to a model load, or a wrapper of one (`get_peft_model(model, config)`)."""
        for candidate in self.resolver.candidates(owner, depth=6):
            value = past_self_returning(candidate.value) if isinstance(candidate.value, ast.expr) else None
            if isinstance(value, ast.Call):
                name = last_segment(dotted(value.func))
                if name in _MODEL_BUILDERS or name in WRAPPERS:
                    return True
                if isinstance(value.func, ast.Name) and self.module_classes.init_of(value.func.id) is not None:
                    return True  # `distiller = Distiller(student)`, then `distiller.teacher = teacher`
        return False

    def _attached_uses(self, owner: str, statement: ast.stmt, depth: int) -> list[Consumer]:
        """Where the model a submodule was attached to goes from there: the submodule goes with it."""
        return [
            consumer if consumer.attached is not None else consumer._replace(attached=statement)
            for consumer in self._uses_of(owner, statement, depth + 1)
        ]

    def _consumer_of_argument(self, node: ast.AST, parent: ast.AST | None) -> Consumer | None:
        call: ast.AST | None = parent
        keyword_name: str | None = None
        if isinstance(parent, ast.keyword):
            keyword_name = parent.arg
            call = self.resolver.parent(parent)
        elif isinstance(parent, (ast.List, ast.Tuple)):  # reward_funcs=[model_a, model_b]
            outer = self.resolver.parent(parent)
            if isinstance(outer, ast.keyword):
                keyword_name = outer.arg
                call = self.resolver.parent(outer)
        if not isinstance(call, ast.Call) or call.func is node:
            return None
        qualified = self.imports.qualify(call.func) or ""
        written = dotted(call.func) or ""
        func = last_segment(qualified)
        positional = keyword_name is None and node in call.args
        if self.is_trainer(call):
            if keyword_name in MODEL_ARGUMENTS and keyword_name != "model" and self._only_kept(call, keyword_name):
                # Kept on the trainer and run by its loss, never handed to FSDP or DeepSpeed: a replica.
                return Consumer(ConsumerKind.INFERENCE, f"{self.trainer_name(call)}({keyword_name}=...)", call)
            if keyword_name in MODEL_ARGUMENTS or (positional and call.args.index(node) == 0):  # type: ignore[arg-type]
                return Consumer(ConsumerKind.TRAINER, self.trainer_name(call), call)
            return None
        if func in ("prepare", "prepare_model") and isinstance(call.func, ast.Attribute):
            return Consumer(ConsumerKind.PREPARE, written, call)
        if func == "initialize" and "deepspeed" in qualified:
            return Consumer(ConsumerKind.DEEPSPEED, "deepspeed.initialize", call)
        if func in ("DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard"):
            return Consumer(ConsumerKind.WRAPPER, written, call)
        wrapper = _wrapper_name(written, qualified)
        if wrapper and (positional or keyword_name == "model"):
            return Consumer(ConsumerKind.WRAPPER, wrapper, call)
        if func == "pipeline":
            return Consumer(ConsumerKind.INFERENCE, "pipeline", call)
        return None

    def _only_kept(self, call: ast.Call, parameter: str) -> bool:
        """A trainer class of this file whose `__init__` takes `parameter` (`teacher_model`) itself and
        only stores it (`self.teacher = teacher_model`): neither passes it on to the base trainer (TRL's
        GKDTrainer prepares its `teacher_model`) nor hands it, or the attribute it is stored in, to a
        preparation (`accelerator.prepare_model`, `prepare_deepspeed`, `deepspeed.initialize`, FSDP) in
        any method of the class. transformers' Trainer prepares only `self.model`."""
        if not isinstance(call.func, ast.Name):
            return False
        cls = next((c for c in self.index.classes if c.name == call.func.id), None)
        init = None if cls is None else _init_of(cls)
        if init is None or parameter not in {a.arg for a in (*init.args.args, *init.args.kwonlyargs)}:
            return False  # inherited, or taken in `**kwargs` and passed on
        stored = {parameter}
        for node in ast.walk(init):
            if isinstance(node, ast.Name) and node.id == parameter and isinstance(node.ctx, ast.Load):
                value, parent = self._through_self_returning(node, self.resolver.parent(node))
                if isinstance(parent, (ast.Call, ast.keyword, ast.Starred)):
                    return False  # passed to a call: the base trainer, a preparation, a copy...
                if isinstance(parent, ast.Assign) and parent.value is value:
                    stored.update(key for key in (dotted(t) for t in parent.targets) if key)
        for node in ast.walk(cls):
            if isinstance(node, ast.Call) and _prepares(node):
                taken = [*node.args, *(k.value for k in node.keywords)]
                if any(dotted(argument) in stored for argument in taken):
                    return False
        return True

    def _calls_to(self, function: str) -> list[ast.Call]:
        return self.index.calls_by_name.get(function, [])


def _prepares(call: ast.Call) -> bool:
    """`self.accelerator.prepare_model(...)`, `prepare_deepspeed(...)`, `deepspeed.initialize(...)`, `FSDP(...)`."""
    name = last_segment(dotted(call.func))
    return "prepare" in name or name in (
        "initialize",
        "FullyShardedDataParallel",
        "FSDP",
        "fully_shard",
        "DistributedDataParallel",
        "DDP",
    )


def _init_of(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)


def _wrapper_name(written: str, qualified: str) -> str | None:
    for candidate in (written, qualified):
        tail = ".".join(candidate.split(".")[-2:])
        if tail in WRAPPERS:
            return tail
        if last_segment(candidate) in WRAPPERS:
            return last_segment(candidate)
    return None


class _ClassesOfKind:
    """Classes of this file of one kind, told by their bases (`_is_base`), also through a class of the
    file or one imported from the repository. Worked out for a class when a call of it asks: following
    a base into another module parses it, and a library file defines dozens of classes never called."""

    def __init__(self, found: list[ast.ClassDef], ancestors: Callable[[str], tuple[str, ...]]) -> None:
        self._classes = {node.name: node for node in found}
        self._ancestors = ancestors
        self._known: dict[str, bool] = {}

    def __contains__(self, name: str) -> bool:
        if name not in self._classes:
            return False
        if name not in self._known:
            self._known[name] = False  # while its bases are looked at: a cycle of names is none of the kind
            self._known[name] = any(self._is_base(base) for base in self._classes[name].bases)
        return self._known[name]

    def _is_base(self, base: ast.expr) -> bool:
        raise NotImplementedError


class _TrainerClasses(_ClassesOfKind):
    """Classes in this file that subclass a trainer (`class SavePeftModelTrainer(Trainer)`), also
    through a class imported from the repository (`class Mine(CustomSFT)`, CustomSFT an SFTTrainer)."""

    def _is_base(self, base: ast.expr) -> bool:
        written = dotted(base)
        base_name = last_segment(written)
        return (
            base_name.endswith("Trainer")
            or base_name in self
            or bool(written and any(a.endswith("Trainer") for a in self._ancestors(written)))
        )


class _ModuleClasses(_ClassesOfKind):
    """Classes of this file that are torch modules (`class Distiller(nn.Module)`), with the parameters of
    their `__init__` that it makes submodules: assigned to an attribute of `self` (also inside an
    `nn.ModuleDict`/`nn.ModuleList`), `setattr(self, ...)`, `self.add_module(...)`. A model kept out of
    the module tree on purpose (`self._teacher = [teacher]`, `object.__setattr__`) is none of these."""

    def __init__(self, found: list[ast.ClassDef], ancestors: Callable[[str], tuple[str, ...]]) -> None:
        super().__init__(found, ancestors)
        self._registered: dict[int, _Registered] = {}

    def init_of(self, name: str) -> ast.FunctionDef | None:
        return _init_of(self._classes[name]) if name in self else None

    def _is_base(self, base: ast.expr) -> bool:
        written = dotted(base)
        name = last_segment(written)
        if name in _MODULE_BASES or name.endswith("PreTrainedModel"):
            return True
        if name in self._classes:
            return name in self
        return bool(written) and any(last_segment(a) in _MODULE_BASES for a in self._ancestors(written))  # type: ignore[arg-type]

    def registered(self, init: ast.FunctionDef, resolver: Resolver) -> _Registered:
        found = self._registered.get(id(init))
        if found is None:
            parameters = {a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)}
            names: set[str] = set()
            containers: set[str] = set()
            for node in ast.walk(init):
                if isinstance(node, ast.Name) and node.id in parameters and isinstance(node.ctx, ast.Load):
                    if _registers_on_self(node, resolver):
                        names.add(node.id)
                    parent = resolver.parent(node)
                    if _module_container(parent) and node in parent.args and _registers_on_self(parent, resolver):  # type: ignore[union-attr]
                        containers.add(node.id)
            found = self._registered[id(init)] = _Registered(frozenset(names), frozenset(containers))
        return found


class _Registered(NamedTuple):
    """The parameters of a module class's `__init__` it makes submodules (`self.teacher = teacher`),
    and those whose items it makes submodules (`self.members = nn.ModuleList(members)`)."""

    whole: frozenset[str]
    items: frozenset[str]


def _module_container(node: ast.AST | None) -> bool:
    """`nn.ModuleList(...)`, `nn.ModuleDict(...)`: each item it is given becomes a submodule."""
    return isinstance(node, ast.Call) and last_segment(dotted(node.func)) in _MODULE_CONTAINERS


def _registers_on_self(node: ast.expr, resolver: Resolver) -> bool:
    """`self.teacher = node` (or `node.eval()`), `self.models = nn.ModuleList([node])`,
    `setattr(self, "teacher", node)`, `self.add_module("teacher", node)`."""
    parent = resolver.parent(node)
    while True:
        if isinstance(parent, ast.Attribute) and parent.attr in SELF_RETURNING:
            call = resolver.parent(parent)
            if not (isinstance(call, ast.Call) and call.func is parent):
                return False
            node, parent = call, resolver.parent(call)
        elif isinstance(parent, (ast.List, ast.Tuple)) or (isinstance(parent, ast.Dict) and node in parent.values):
            container = resolver.parent(parent)
            if not (isinstance(container, ast.Call) and last_segment(dotted(container.func)) in _MODULE_CONTAINERS):
                return False
            node, parent = container, resolver.parent(container)
        elif isinstance(parent, ast.Call) and last_segment(dotted(parent.func)) in _MODULE_CONTAINERS and node in parent.args:
            node, parent = parent, resolver.parent(parent)
        else:
            break
    if isinstance(parent, ast.Assign) and parent.value is node:
        return any(isinstance(t, ast.Attribute) and dotted(t.value) == "self" for t in parent.targets)
    if isinstance(parent, ast.AnnAssign) and parent.value is node:
        return isinstance(parent.target, ast.Attribute) and dotted(parent.target.value) == "self"
    if isinstance(parent, ast.Call) and node in parent.args:
        if dotted(parent.func) == "setattr" and len(parent.args) == 3 and parent.args[2] is node:
            return dotted(parent.args[0]) == "self"
        if isinstance(parent.func, ast.Attribute) and parent.func.attr in _REGISTERING_METHODS:
            return dotted(parent.func.value) == "self"
    return False
