"""Every `device_map` a file passes to a model loader, resolved to the values it can take.

Loaders (domain.md §3): any `X.from_pretrained(...)` except tokenizers, processors, configs and
feature extractors (a `device_map` there is ignored); `pipeline(...)` with `device_map=` or
`model_kwargs={"device_map": ...}`; accelerate's `dispatch_model` / `load_checkpoint_and_dispatch`;
and the TRL config fields that a trainer loads a model id string with (`model_init_kwargs`,
`ref_model_init_kwargs`, `teacher_model_init_kwargs`).
"""

from __future__ import annotations

import ast
import bisect
import enum
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property

from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.analysis.dataflow import (
    ABSENT,
    Candidate,
    ForeignFunction,
    MapEntries,
    Resolver,
    dict_entries,
    own_nodes,
    rebound_names,
)
from placement_lint.analysis.flow import ModelFlow, no_ancestors
from placement_lint.analysis.index import ModuleIndex, walk
from placement_lint.analysis.names import ImportTable, argument, dotted, keyword, last_segment
from placement_lint.analysis.values import Classified, classify
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple, Record

# Loaders whose device_map is ignored; also `config_class.from_pretrained`, `self.tokenizer.from_pretrained`.
_NOT_A_MODEL = LazyPattern(r"(tokenizer|processor|config|extractor|scheduler)(_?class|_?cls)?$", re.I)
TRL_INIT_KWARGS = ("model_init_kwargs", "ref_model_init_kwargs", "teacher_model_init_kwargs")
# accelerate's dispatchers, by the position of their device_map argument.
_DISPATCH_POSITIONS = {"dispatch_model": 1, "load_checkpoint_and_dispatch": 2}
# The callees `_loader_values` reads a device map from (as their name's last part): what the
# pre-filter of `_device_map_sources` lets through.
_LOADER_NAMES = frozenset({"from_pretrained", "pipeline", *_DISPATCH_POSITIONS})
# What makes transformers see a ZeRO-3 config (`is_deepspeed_zero3_enabled()`, domain.md §5.1.3): the
# arguments objects, an explicit HfDeepSpeedConfig, an Accelerator with a DeepSpeed plugin.
_ZERO3_CONFIG = {"TrainingArguments", "Seq2SeqTrainingArguments", "Accelerator", "HfDeepSpeedConfig"}
# What sets this process's CUDA device (so `None` + bitsandbytes lands on the right GPU): the above and PartialState.
_DISTRIBUTED_STATE = _ZERO3_CONFIG | {"PartialState", "set_device"}
# Base classes of distributed test cases (torch's MultiProcessTestCase, DistributedTestBase, DTensorTestBase,
# FSDPTest, and a project's own on top of them), whose process-group setup sets the device.
_TEST_HARNESSES = ("TestCase", "TestBase", "FSDPTest")
_ARGUMENT_PARSING = {"parse_args_into_dataclasses", "parse_args_and_config", "parse_yaml_file", "parse_json_file", "parse_dict"}


class LoaderKind(enum.Enum):
    FROM_PRETRAINED = "from_pretrained"
    PIPELINE = "pipeline"
    DISPATCH = "dispatch"
    TRL_INIT_KWARGS = "trl-init-kwargs"  # a trainer loads a model id string with these kwargs


class ForwardedLoad(NamedTuple):
    """A model load in a helper function that takes its device_map from one of the helper's parameters:
    `def make_lm(path, device_map=None): return AutoModelForCausalLM.from_pretrained(path, device_map=device_map)`,
    or `**kwargs` it splats into the load."""

    call: ast.Call  # the load, in the helper's module
    name: str  # its callee as written: "AutoModelForCausalLM.from_pretrained"
    function: str  # the helper: "make_lm"
    parameter: str  # what carries the map: "device_map", "**kwargs"
    path: str | None  # the helper's module, when it is another file (None: the checked one)


class Loader(NamedTuple):
    node: ast.AST  # the call (or, for `args.model_init_kwargs = {...}`, the assignment)
    kind: LoaderKind
    name: str  # for messages: "AutoModelForCausalLM.from_pretrained", "SFTConfig(model_init_kwargs=...)"
    # A call of a helper that loads (`node`), with the value passed for the helper's parameter: the
    # loads in the helper it reaches. The call stands for the load here (its place in the file, its
    # conditions, where its result goes); the loads are where the value is used.
    through: tuple[ForwardedLoad, ...] = ()

    @property
    def line(self) -> int:
        return self.node.lineno  # type: ignore[attr-defined]


class DeviceMap(Record):
    """One value a load's device_map may take: equal and hashed by what it says, not by its analysis."""

    __slots__ = ("loader", "candidate", "classified", "quantized", "after_distributed_state", "after_zero3_config", "analysis")
    compared = __slots__[:-1]

    def __init__(
        self,
        loader: Loader,
        candidate: Candidate,
        classified: Classified,
        quantized: bool,
        after_distributed_state: bool,  # the process's device is set before the load
        after_zero3_config: bool,  # a ZeRO-3 config, if the run has one, is live when the model loads
        analysis: PlacementAnalysis,  # a weak proxy: asked only while it lives
    ) -> None:
        self.loader = loader
        self.candidate = candidate
        self.classified = classified
        self.quantized = quantized
        self.after_distributed_state = after_distributed_state
        self.after_zero3_config = after_zero3_config
        self.analysis = analysis

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        """Where the loaded model goes, when it holds this value; followed only when a rule asks (it is the
        costly part). A consumer in a branch the value's path excludes (the map set only for `moe`
        models, the trainer run only for `dense` ones) never gets a model with this value."""
        return self.analysis.consumers_under(self.loader, self.candidate.conditions)

    @property
    def node(self) -> ast.expr:
        assert isinstance(self.candidate.value, ast.expr)
        return self.candidate.value

    @property
    def trained(self) -> bool | None:
        """True when the model reaches a trainer, prepare or a wrapper; False when only inference; None when unknown."""
        if not self.consumers:
            return None
        return any(c.trains for c in self.consumers)


class ModelLoad:
    """One `X.from_pretrained(...)` of a model (not a tokenizer or config), whatever its device_map.
    Each fact is worked out when a rule first asks for it: most loads are never asked most of them."""

    def __init__(self, loader: Loader, analysis: PlacementAnalysis) -> None:
        self.loader = loader
        self.analysis = analysis  # a weak proxy (PlacementAnalysis._weak): a load is asked only while its analysis lives

    @property
    def call(self) -> ast.Call:
        assert isinstance(self.loader.node, ast.Call)
        return self.loader.node

    @cached_property
    def quantized(self) -> bool:
        return self.analysis._quantized(self.loader)

    @cached_property
    def after_distributed_state(self) -> bool:
        return self.analysis._after(self.loader, self.analysis._state_creations)

    @cached_property
    def after_zero3_config(self) -> bool:
        return self.analysis._after(self.loader, self.analysis._config_creations)

    @cached_property
    def order_known(self) -> bool:
        """False in a helper this file never calls (`model_init=`): it runs when its caller says."""
        return self.analysis._order_known(self.call)

    @cached_property
    def device_map_given(self) -> bool | None:
        """None: a `**kwargs` splat may or may not carry one."""
        return self.analysis._device_map_given(self.call)

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        return self.analysis.consumers_of(self.loader)

    @property
    def trained(self) -> bool | None:
        if not self.consumers:
            return None
        return any(c.trains for c in self.consumers)


# Per module index, the nodes that may give a device map, whatever the setup: a file a launch reaches
# is analysed under each setup and launch arguments it runs under (a library module that 74 launches
# reach, under 16), and the walk that finds them is made once.
_SOURCES: weakref.WeakKeyDictionary[ModuleIndex, list[ast.AST]] = weakref.WeakKeyDictionary()


def _device_map_sources(index: ModuleIndex, imports: ImportTable, forwarding: frozenset[str]) -> list[ast.AST]:
    """The calls and assignments `_loader_values` can read a device map from, in the index's order: a
    loader's call, a call passing `device_map=` or a TRL init-kwargs keyword, a call of one of this
    file's functions that hand a parameter to a load (`forwarding`), an assignment to a TRL
    init-kwargs attribute. Once a file, whatever setups it is analysed under."""
    sources = _SOURCES.get(index)
    if sources is None:
        sources = _SOURCES[index] = [node for node in index.calls_and_assigns if _may_give_device_map(node, imports, forwarding)]
    return sources


def _may_give_device_map(node: ast.AST, imports: ImportTable, forwarding: frozenset[str]) -> bool:
    if type(node) is ast.Assign:
        targets = node.targets  # type: ignore[attr-defined]
        return len(targets) == 1 and type(targets[0]) is ast.Attribute and targets[0].attr in TRL_INIT_KWARGS
    if any(kw.arg in TRL_INIT_KWARGS or kw.arg == "device_map" for kw in node.keywords):  # type: ignore[attr-defined]
        return True
    # Most calls are methods of something else (`x.mean()`): only a loader's name can give a map, and
    # the callee is qualified for those alone.
    func = node.func  # type: ignore[attr-defined]
    if type(func) is ast.Attribute and func.attr not in _LOADER_NAMES:
        return False
    if type(func) is ast.Name and func.id in forwarding:
        return True
    return last_segment(imports.qualify(func) or "") in _LOADER_NAMES


# What builds a model: `from_config` builds it too (under zero.Init when ZeRO-3 is live), without weights.
_MODEL_BUILDERS = ("from_pretrained", "from_config", "_from_config")


def _builds_a_model(call: ast.Call) -> bool:
    """`X.from_pretrained(...)` (or `from_config`) of a model, not of a tokenizer, processor or config."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _MODEL_BUILDERS:
        return False
    owner = _class_name(func.value)
    return bool(owner) and not _NOT_A_MODEL.search(owner)


def _class_name(expr: ast.expr) -> str:
    """The name of the class a load is called on: `AutoModel` of `transformers.AutoModel`, and the
    key of a registry entry (`MODE[args.mode]["model"]`: "model"), which tells a model from a tokenizer."""
    if isinstance(expr, ast.Subscript):
        key = expr.slice
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else ""
    return last_segment(dotted(expr))


def _shown_owner(expr: ast.expr) -> str:
    """The class a load is called on, as a message names it: its last name, or a registry entry whole."""
    return ast.unparse(expr) if isinstance(expr, ast.Subscript) else last_segment(dotted(expr))


class PlacementAnalysis:
    def __init__(
        self,
        module: ast.Module,
        imports: ImportTable,
        resolver: Resolver,
        remote: Mapping[str, tuple[Consumer, ...]] | None = None,
        ancestors: Callable[[str], tuple[str, ...]] = no_ancestors,
    ) -> None:
        """`remote` and `ancestors`: what other files of the repository tell (see `ModelFlow`)."""
        self.module = module
        self.imports = imports
        self.resolver = resolver
        self.flow = ModelFlow(module, imports, resolver, remote, ancestors)
        self._consumers_cache: dict[int, tuple[Consumer, ...]] = {}
        self._consumers_under: dict[tuple[int, tuple[object, ...]], tuple[Consumer, ...]] = {}
        self._forwarding: dict[int, dict[str, list[ast.Call]]] = {}  # per helper (by id), see forwarded_device_maps
        self._arms: dict[int, dict[int, bool]] = {}  # per node of the module (by id), see _branches
        # What its device maps and loads ask back through: a plain reference from each would make a cycle
        # (the analysis keeps them in its lists), and the file's whole tree would then wait for the cycle
        # collector (2-7 ms a file of trl's trainers, 22 ms of its run's CPU).
        self._weak = weakref.proxy(self)

    def consumers_of(self, loader: Loader) -> tuple[Consumer, ...]:
        if id(loader.node) not in self._consumers_cache:
            self._consumers_cache[id(loader.node)] = tuple(self._consumers(loader))
        return self._consumers_cache[id(loader.node)]

    def consumers_under(self, loader: Loader, conditions: tuple[object, ...]) -> tuple[Consumer, ...]:
        """The load's consumers that a value holding under `conditions` reaches (DeviceMap.consumers),
        worked out once: the rules ask it of one map many times."""
        found = self.consumers_of(loader)
        if not conditions or not found:
            return found
        key = (id(loader.node), conditions)
        if key not in self._consumers_under:
            resolver = self.resolver
            self._consumers_under[key] = tuple(
                c for c in found if c.node is None or not resolver.excludes(conditions, resolver.enclosing_guards(c.node))
            )
        return self._consumers_under[key]

    @cached_property
    def device_maps(self) -> list[DeviceMap]:
        found: list[DeviceMap] = []
        seen: set[tuple[int, int]] = set()
        with self.resolver.following_imports():  # a value's nodes may be another module's: DeviceMap knows
            self._collect_device_maps(found, seen)
        found.sort(key=lambda d: (d.node.lineno, d.node.col_offset))
        return found

    def _collect_device_maps(self, found: list[DeviceMap], seen: set[tuple[int, int]]) -> None:
        classifications: dict[tuple[int, int, MapEntries | None], Classified] = {}
        for node in _device_map_sources(self.resolver.index, self.imports, self._forwarding_here):
            for loader, candidates in self._loader_values(node):
                quantized = self._quantized(loader)
                after_state = self._after(loader, self._state_creations)
                after_config = self._after(loader, self._config_creations)
                for candidate in candidates:
                    # Per load, not per value: a kwargs dict splatted into the loads of several
                    # branches reaches each, and a launch may rule out the branch of any one of them.
                    if not isinstance(candidate.value, ast.expr) or (id(loader.node), id(candidate.value)) in seen:
                        continue
                    seen.add((id(loader.node), id(candidate.value)))
                    # A value from a helper in another module is resolved in that module.
                    owner = candidate.foreign.resolver if candidate.foreign else self.resolver
                    # Once a value: what it is depends on where it is written, not on the load it
                    # reaches (a kwargs entry set under each of many ifs reaches every load after it).
                    key = (id(candidate.value), id(owner), candidate.entries)
                    classified = classifications.get(key)
                    if classified is None:
                        classified = classifications[key] = classify(candidate.value, owner.candidates, entries=candidate.entries)  # type: ignore[union-attr]
                    found.append(DeviceMap(loader, candidate, classified, quantized, after_state, after_config, self._weak))

    @cached_property
    def model_loads(self) -> list[ModelLoad]:
        found = []
        calls = self.resolver.index.calls_by_name
        # A load on a registry's entry (`MODE[args.mode]["model"].from_pretrained`) has no dotted callee:
        # the index files it under "".
        for call in [*(c for name in _MODEL_BUILDERS for c in calls.get(name, [])), *calls.get("", [])]:
            if not _builds_a_model(call):
                continue
            loader = Loader(call, LoaderKind.FROM_PRETRAINED, f"{_shown_owner(call.func.value)}.{call.func.attr}")  # type: ignore[attr-defined]
            found.append(ModelLoad(loader, self._weak))
        return found

    @cached_property
    def imported_model_loads(self) -> list[ModelLoad]:
        """Calls of a function of another module of the repository that loads a model, itself or through
        the functions it calls (two deep): `ranker = build_ranker(args)` before the ZeRO-3 config is a
        load before it, judged where it is called. Not those of this file's own functions: their loads
        are judged at their calls already."""
        found = []
        for call in self.resolver.index.calls:
            name = dotted(call.func)
            with self.resolver.following_imports():  # its nodes are another file's: only the load is kept
                called = self.resolver.called_function(call, name) if name else None
            if called is None or called[1] is None:
                continue
            function, foreign = called
            load = _model_load_in(function, foreign.resolver, foreign.path, 2)
            if load is not None:
                forwarded = ForwardedLoad(load[0], _loader_name(load[0]), load[1], "", load[2])
                found.append(ModelLoad(Loader(call, LoaderKind.FROM_PRETRAINED, name, (forwarded,)), self._weak))
        return found

    def first_zero3_config_after(self, node: ast.AST) -> ast.Call | None:
        """The first call that creates what makes ZeRO-3 visible to transformers, after `node`."""
        position = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        positions, calls = self._zero3_configs
        found = bisect.bisect_right(positions, position)
        return calls[found] if found < len(calls) else None

    @cached_property
    def _zero3_configs(self) -> tuple[list[tuple[int, int]], list[ast.Call]]:
        """The calls that create what makes ZeRO-3 visible to transformers, in source order (with
        their positions, to find the first after a point by bisection: a file asks once per load)."""
        calls = sorted(
            (
                call
                for call in self.resolver.index.calls
                if _creates_with(call, last_segment(self.imports.qualify(call.func)), _ZERO3_CONFIG, self.resolver)
            ),
            key=lambda c: (c.lineno, c.col_offset),
        )
        return [(c.lineno, c.col_offset) for c in calls], calls

    def _order_known(self, call: ast.Call) -> bool:
        function = self.resolver.scope_of(call)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return bool(self.resolver.index.calls_by_name.get(function.name))
        return True

    def _device_map_given(self, call: ast.Call) -> bool | None:
        if keyword(call, "device_map") is not None:
            return True
        unknown = False
        for splat in (k for k in call.keywords if k.arg is None):
            values = self.resolver.key_candidates(splat.value, "device_map")
            if values is None:
                unknown = True
            elif any(c.value is not ABSENT for c in values):
                return True
        return None if unknown else False

    def _loader_values(self, node: ast.AST) -> list[tuple[Loader, list[Candidate]]]:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and target.attr in TRL_INIT_KWARGS:
                loader = Loader(node, LoaderKind.TRL_INIT_KWARGS, f"{dotted(target)} = ...")
                values = self.resolver.key_candidates(node.value, "device_map")
                return [(loader, values)] if values else []
            return []
        if not isinstance(node, ast.Call):
            return []
        qualified = self.imports.qualify(node.func) or ""
        func = last_segment(qualified)
        out: list[tuple[Loader, list[Candidate]]] = []
        for init_kwargs in TRL_INIT_KWARGS:
            kw = keyword(node, init_kwargs)
            if kw is not None:
                values = self.resolver.key_candidates(kw.value, "device_map")
                if values:
                    out.append((Loader(node, LoaderKind.TRL_INIT_KWARGS, f"{func}({init_kwargs}=...)"), values))
        if func == "from_pretrained" and isinstance(node.func, ast.Attribute):
            owner = last_segment(dotted(node.func.value))
            if _NOT_A_MODEL.search(owner):
                return out
            loader = Loader(node, LoaderKind.FROM_PRETRAINED, f"{owner}.from_pretrained")
            out += self._call_values(loader, node)
        elif func == "pipeline":
            loader = Loader(node, LoaderKind.PIPELINE, "pipeline")
            out += self._call_values(loader, node)
            model_kwargs = keyword(node, "model_kwargs")
            if model_kwargs is not None:
                values = self.resolver.key_candidates(model_kwargs.value, "device_map")
                if values:
                    out.append((loader, values))
        elif func in _DISPATCH_POSITIONS:
            loader = Loader(node, LoaderKind.DISPATCH, func)
            value = argument(node, "device_map", _DISPATCH_POSITIONS[func])
            if value is not None:
                out.append((loader, self.resolver.candidates(value)))
        elif not out:
            out += self._forwarded_values(node)
        return out

    def _forwarded_values(self, call: ast.Call) -> list[tuple[Loader, list[Candidate]]]:
        """The map a call passes to a helper that hands it to a model load: the argument for the helper's
        parameter the load reads (`make_lm(path, device_map={"": rank})`), or a `device_map=` it takes
        in `**kwargs` and splats into the load. The helper is defined in this file or imported from the
        repository (`common.make_generative_lm`); one that re-binds the parameter, or changes the kwargs
        dict, before the load decides its map itself and is not followed."""
        name = dotted(call.func)
        if name is None:
            return []
        if keyword(call, "device_map") is None and name not in self._forwarding_here:
            return []  # most calls: a map can only come positionally or spread, into this file's helpers
        called = self.resolver.called_function(call, name)
        if called is None:
            return []
        function, foreign = called
        key = id(function)
        if key not in self._forwarding:
            self._forwarding[key] = forwarded_device_maps(function)
        out: list[tuple[Loader, list[Candidate]]] = []
        for parameter, loads in self._forwarding[key].items():
            values = self._passed_for(call, function, parameter, foreign is None)
            if not values:
                continue
            carried = (
                f"**{function.args.kwarg.arg}"  # type: ignore[union-attr]
                if parameter == _KWARGS
                else parameter.removeprefix(_DICT_PARAMETER)
                if parameter.startswith(_DICT_PARAMETER)
                else parameter
            )
            path = foreign.path if foreign is not None else None
            through = tuple(ForwardedLoad(load, _loader_name(load), function.name, carried, path) for load in loads)
            out.append((Loader(call, LoaderKind.FROM_PRETRAINED, f"{name}(...)", through), values))
        return out

    @cached_property
    def _forwarding_here(self) -> frozenset[str]:
        """The names of this file's functions that hand a parameter to a model load as its device_map."""
        loads: dict[int, tuple[ast.FunctionDef, list[ast.Call]]] = {}
        for call in self.resolver.index.calls_by_name.get("from_pretrained", []):
            function = self.resolver.scope_of(call)
            if isinstance(function, ast.FunctionDef):
                loads.setdefault(id(function), (function, []))[1].append(call)
        for key, (function, calls) in loads.items():
            self._forwarding[key] = forwarded_device_maps(function, calls)
        return frozenset(function.name for key, (function, _) in loads.items() if self._forwarding[key])

    def _passed_for(self, call: ast.Call, function: ast.FunctionDef, parameter: str, here: bool) -> list[Candidate]:
        """The values `call` gives the helper's `parameter`: a keyword, a positional argument, or (_KWARGS:
        its `device_map=` caught by `**kwargs`) a `device_map` key of a dict it splats; the `device_map`
        key of the dict it passes (_DICT_PARAMETER); for a helper of this file (`here`) called without
        it, the literal default it then takes (`def load(path, device_map="auto")`)."""
        if parameter.startswith(_DICT_PARAMETER):
            given = _argument_for(call, function, parameter.removeprefix(_DICT_PARAMETER))
            found = self.resolver.key_candidates(given, "device_map") if given is not None else None
            return [c for c in found or () if isinstance(c.value, ast.expr)]
        name = "device_map" if parameter == _KWARGS else parameter
        given = _argument_for(call, function, name)  # a helper that splats **kwargs names no device_map of its own
        if given is not None:
            return self.resolver.candidates(given)
        if parameter != _KWARGS:
            default = _literal_default(function, parameter)
            spread = any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)
            if here and default is not None and not spread:
                return self.resolver.candidates(default)
        if name != "device_map":
            return []
        found: list[Candidate] = []
        for splat in (k for k in call.keywords if k.arg is None):
            values = self.resolver.key_candidates(splat.value, "device_map")
            found += [c for c in values or () if isinstance(c.value, ast.expr)]
        return found

    def _call_values(self, loader: Loader, call: ast.Call) -> list[tuple[Loader, list[Candidate]]]:
        out = []
        for kw in call.keywords:
            if kw.arg == "device_map":
                out.append((loader, self.resolver.candidates(kw.value)))
            elif kw.arg is None:
                values = self.resolver.key_candidates(kw.value, "device_map")
                if values:
                    out.append((loader, values))
        return out

    def _consumers(self, loader: Loader) -> list[Consumer]:
        if loader.kind is LoaderKind.PIPELINE:
            return [Consumer(ConsumerKind.INFERENCE, "pipeline", loader.node)]
        if loader.kind is LoaderKind.TRL_INIT_KWARGS:
            return self._trainers_of_config(loader)
        if loader.kind is LoaderKind.DISPATCH:
            call = loader.node
            assert isinstance(call, ast.Call)
            model = argument(call, "model", 0)
            return self.flow.consumers(model) if model is not None else []
        return self.flow.consumers(loader.node)  # type: ignore[arg-type]

    def _trainers_of_config(self, loader: Loader) -> list[Consumer]:
        node = loader.node
        if isinstance(node, ast.Call) and self.flow.is_trainer(node):
            return [Consumer(ConsumerKind.TRAINER, self.flow.trainer_name(node), node)]
        config_name: str | None = None
        if isinstance(node, ast.Assign):
            target = node.targets[0]
            config_name = dotted(target.value) if isinstance(target, ast.Attribute) else None
        else:
            parent = self.resolver.parent(node)
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
                config_name = dotted(parent.targets[0])
        trainers = [call for call in self.resolver.index.calls if self.flow.is_trainer(call)]
        matching = [
            t for t in trainers if config_name and (args := argument(t, "args", 1)) is not None and dotted(args) == config_name
        ]
        chosen = matching or (trainers if len(trainers) == 1 else [])
        return [Consumer(ConsumerKind.TRAINER, self.flow.trainer_name(t), t) for t in chosen]

    def _quantized(self, loader: Loader) -> bool:
        call = loader.node
        if not isinstance(call, ast.Call):
            return False
        for name in ("quantization_config", "load_in_4bit", "load_in_8bit"):
            kw = keyword(call, name)
            if kw is not None and self._set(kw.value):
                return True
            for splat in (k for k in call.keywords if k.arg is None):
                values = self.resolver.key_candidates(splat.value, name)
                if values and any(
                    isinstance(c.value, ast.expr) and not (isinstance(c.value, ast.Constant) and not c.value.value)
                    for c in values
                ):
                    return True
        return False

    def _set(self, value: ast.expr) -> bool:
        """A quantization argument that holds something: a literal or a config the file builds. One
        that resolves to nothing but itself (`self.quant_config`, a parameter) may well be None, as
        scripts default it: not reason enough to call the load quantized."""
        if isinstance(value, ast.Constant):
            return bool(value.value)
        if not isinstance(value, (ast.Name, ast.Attribute)):
            return True  # a call (BitsAndBytesConfig(...), get_quantization_config(...)) or an expression
        found = self.resolver.candidates(value)
        return any(
            isinstance(c.value, ast.expr)
            and c.value is not value
            and not (isinstance(c.value, ast.Constant) and not c.value.value)
            for c in found
        )

    @cached_property
    def _state_creations(self) -> list[ast.Call]:
        return self._creations(_DISTRIBUTED_STATE) + self._harness_setups() + self._imported_state_setups()

    def _imported_state_setups(self) -> list[ast.Call]:
        """Calls of a function of another module of the repository that sets this process's device
        itself (`model_args, training_args = parser_arguments()`, where utils/parser_args.py parses
        into `TrainingArguments`): building the arguments sets the device wherever it runs. A function
        of this file is seen where it is written."""
        found = []
        imported = self.resolver.imported_names
        for call in self.resolver.index.calls if imported else ():
            name = dotted(call.func)
            if not name or name.split(".")[0] not in imported:
                continue  # most calls are of a local, a method or a builtin: only imports can be another module's
            # By the module's imports, not its value flow: each launch's analysis of a file asks,
            # and walking the file's scopes for each (90 launch scripts of one) cost seconds.
            foreign = self.resolver.imported_function(name)
            if foreign is not None and _sets_state(foreign.function, foreign.resolver, 2):
                found.append(call)
        return found

    def _harness_setups(self) -> list[ast.Call]:
        """`self.create_pg("cuda")` in a test class: torch's distributed test harness
        (common_distributed.DistributedTestBase, which xtuner's model tests build on) starts the
        process group and, for NCCL, calls `torch.cuda.set_device(self.rank)`."""
        found = []
        for call in self.resolver.index.calls_by_name.get("create_pg", []) + self.resolver.index.calls_by_name.get("init_pg", []):
            func = call.func
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
                continue
            owner = next((a for a in self.resolver.ancestors(call) if isinstance(a, ast.ClassDef)), None)
            bases = [last_segment(dotted(base)) or "" for base in owner.bases] if owner is not None else []
            if any(base.endswith(_TEST_HARNESSES) for base in bases):
                found.append(call)
        return found

    @cached_property
    def _config_creations(self) -> list[ast.Call]:
        return self._creations(_ZERO3_CONFIG)

    def _creations(self, names: set[str]) -> list[ast.Call]:
        return [
            call
            for call in self.resolver.index.calls
            if _creates_with(call, last_segment(self.imports.qualify(call.func)), names, self.resolver)
            and not self._parses_only_script_arguments(call)
        ]

    def _parses_only_script_arguments(self, call: ast.Call) -> bool:
        return parses_only_script_arguments(call, self.resolver)

    def state_before(self, node: ast.AST) -> bool:
        """This process's device is set (see `_DISTRIBUTED_STATE`) before `node` runs."""
        return self._exists_before(node, self._state_creations, (), 0)

    def runs_before(self, node: ast.AST, calls: list[ast.Call]) -> bool:
        """One of `calls` runs before `node`, followed through the helpers that call it (as `_after`)."""
        return self._exists_before(node, calls, (), 0)

    def _after(self, loader: Loader, creations: list[ast.Call]) -> bool:
        """A TrainingArguments / TRL config / Accelerator / PartialState exists before the load (domain.md §5.1.3).

        For a load inside a helper function, "before" is before every call of the helper, followed
        through the helpers that call it (`main()` calls `create_model()` after parsing the arguments).
        """
        return self._exists_before(loader.node, creations, (), 0)

    def _exists_before(self, node: ast.AST, creations: list[ast.Call], skipped: tuple[tuple[int, int], ...], depth: int) -> bool:
        position = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        branches = self._branches(node)

        def earlier(created: ast.Call) -> bool:
            # Written above, and not in the other arm of an `if` that holds both: `PartialState()` in the
            # quantized branch's load does not run before the plain branch's load.
            return (created.lineno, created.col_offset) < position and not _other_arm(self._branches(created), branches)

        def counts(created: ast.Call) -> bool:
            return not any(low <= created.lineno <= high for low, high in skipped)

        function = self.resolver.scope_of(node)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and depth < 4:
            if any((function.lineno, 0) <= (created.lineno, created.col_offset) and earlier(created) for created in creations):
                return True
            calls = self.resolver.index.calls_by_name.get(function.name, [])
            if calls:
                body = (function.lineno, function.end_lineno or function.lineno)
                return all(self._exists_before(call, creations, (*skipped, body), depth + 1) for call in calls)
        return any(earlier(created) and counts(created) for created in creations)

    def _branches(self, node: ast.AST) -> dict[int, bool]:
        """For each `if` (statement or expression) around `node`: is `node` in its body (True) or its
        `else` (False)? A node in the condition itself runs whichever arm follows, so it has no entry.
        Kept for the module's nodes: each load asks it of every TrainingArguments(...) again, and a node
        down an elif chain is one `if` deeper per branch above it."""
        known = self._arms.get(id(node))
        if known is not None:
            return known
        arms: dict[int, bool] = {}
        child = node
        for ancestor in self.resolver.ancestors(node):
            if isinstance(ancestor, ast.If):
                if any(child is statement for statement in ancestor.body):
                    arms[id(ancestor)] = True
                elif any(child is statement for statement in ancestor.orelse):
                    arms[id(ancestor)] = False
            elif isinstance(ancestor, ast.IfExp) and child is not ancestor.test:
                arms[id(ancestor)] = child is ancestor.body
            child = ancestor
        if id(node) in self.resolver.index.parents:  # not another module's node, whose id may be reused
            self._arms[id(node)] = arms
        return arms


_KWARGS = "**"  # the parameter that catches keywords the helper does not name


# What changes a kwargs dict in place (`kwargs.pop("device_map")`, `kwargs.update(device_map=...)`).
def _argument_for(call: ast.Call, function: ast.FunctionDef, parameter: str) -> ast.expr | None:
    """What `call` passes the helper's `parameter`, by keyword or by position (not past a `*args`)."""
    given = keyword(call, parameter)
    if given is not None:
        return given.value
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if parameter not in positional:
        return None
    index = positional.index(parameter)
    if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return None


def _literal_default(function: ast.FunctionDef, parameter: str) -> ast.Constant | None:
    """The parameter's default, when it is a literal (a string, a number, None)."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = [
        *zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True),
        *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
    ]
    default = next((value for argument, value in pairs if argument.arg == parameter), None)
    return default if isinstance(default, ast.Constant) else None


_DICT_CHANGES = frozenset({"pop", "popitem", "update", "setdefault", "clear", "__setitem__", "__delitem__"})


def forwarded_device_maps(function: ast.FunctionDef, calls: list[ast.Call] | None = None) -> dict[str, list[ast.Call]]:
    """The model loads of `function` (`X.from_pretrained`, not a tokenizer's or config's) whose device_map
    is one of its parameters, by parameter: `device_map=<parameter>`, or (under `_KWARGS`) the `**kwargs`
    they splat, when the function names no `device_map` parameter of its own. A parameter the function
    assigns anywhere, or a kwargs dict it changes (`kwargs.pop("device_map")`, `kwargs["x"] = ...`, `del`),
    is its own decision, not the caller's: left out. `calls`: its `from_pretrained` calls, when known."""
    args = function.args
    named = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    kwargs = args.kwarg.arg if args.kwarg is not None else None
    if calls is None:
        calls = [
            n
            for n in own_nodes(function)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "from_pretrained"
        ]
    found: dict[str, list[ast.Call]] = {}
    splatted: dict[str, list[ast.Call]] = {}  # a local dict the load splats (`**model_kwargs`), by name
    for call in calls:
        if not isinstance(call.func, ast.Attribute) or _NOT_A_MODEL.search(last_segment(dotted(call.func.value)) or "x"):
            continue
        given = keyword(call, "device_map")
        splats = [k.value.id for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)]
        if given is not None:
            if isinstance(given.value, ast.Name) and given.value.id in named:
                found.setdefault(given.value.id, []).append(call)
        elif kwargs is not None and "device_map" not in named and kwargs in splats:
            found.setdefault(_KWARGS, []).append(call)
        else:
            for name in splats:
                splatted.setdefault(name, []).append(call)
    if not found and not splatted:
        return found  # most functions: no walk of their body below
    rebound = rebound_names(function)
    changed = _changed_dicts(function)
    forwarded = {
        parameter: loads
        for parameter, loads in found.items()
        if (parameter if parameter != _KWARGS else kwargs) not in rebound and (parameter != _KWARGS or kwargs not in changed)
    }
    # `def load(name, **overrides): kw = {...}; kw.update(overrides)`: the caller's `device_map=` is merged in.
    caught = kwargs if kwargs is not None and "device_map" not in named and kwargs not in rebound else None
    for parameter, loads in _dict_parameters(function, (named - rebound) | {caught} - {None}, splatted).items():  # type: ignore[operator]
        forwarded.setdefault(_KWARGS if parameter == caught else _DICT_PARAMETER + parameter, []).extend(loads)
    return forwarded


# Before a parameter's name in forwarded_device_maps: a dict the caller passes, whose `device_map` key
# reaches the load (`def get_model(args, bnb_args): kw = dict(); kw.update(bnb_args); X.from_pretrained(**kw)`).
_DICT_PARAMETER = "dict:"


def _dict_parameters(
    function: ast.FunctionDef, parameters: set[str], splatted: dict[str, list[ast.Call]]
) -> dict[str, list[ast.Call]]:
    """The parameters whose dict the loads splat, themselves (`**bnb_args`) or merged into a local dict
    the function builds empty and only ever updates with them (`kw = dict(); kw.update(bnb_args)`)."""
    found: dict[str, list[ast.Call]] = {}
    merged = _merged_parameters(function, [name for name in splatted if name not in parameters], parameters)
    for name, loads in splatted.items():
        if name in parameters:
            found.setdefault(name, []).extend(loads)
            continue
        for parameter in merged[name] or ():
            found.setdefault(parameter, []).extend(loads)
    return found


def _merged_parameters(function: ast.FunctionDef, names: list[str], parameters: set[str]) -> dict[str, list[str] | None]:
    """For each local dict of `names`, the parameters it is made of, when it is bound once to a dict
    with no `device_map` of its own (empty, or literal keys: `{"trust_remote_code": True}`) and changed
    only by `.update(<parameter>)`; None for any other dict (it decides its own keys). One walk of
    the body for all of them: a long `main()` splats a dict per load, hundreds of them."""
    bound = dict.fromkeys(names, 0)
    merged: dict[str, list[str] | None] = {name: [] for name in names}
    if not names:
        return merged
    for node in own_nodes(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigned = {t.id for t in targets if isinstance(t, ast.Name) and t.id in merged}
            if not assigned:
                continue
            own_map = not _names_no_map(node.value)
            for name in assigned:
                if own_map or isinstance(node, ast.AugAssign):
                    merged[name] = None
                else:
                    bound[name] += 1
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in merged:
            if not isinstance(node.ctx, ast.Load):
                merged[node.value.id] = None
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            name = node.func.value.id
            if name not in merged or node.func.attr not in _DICT_CHANGES:
                continue
            given = node.args[0] if node.func.attr == "update" and len(node.args) == 1 and not node.keywords else None
            sources = merged[name]
            if not isinstance(given, ast.Name) or given.id not in parameters:
                merged[name] = None
            elif sources is not None:
                sources.append(given.id)
    return {name: sources if sources is not None and bound[name] == 1 else None for name, sources in merged.items()}


def _names_no_map(value: ast.expr | None) -> bool:
    """`{}`, `dict()`, `{"trust_remote_code": True}`: a dict whose keys are all written out as
    strings, none of them `device_map` (a `**spread` or a computed key may hold one)."""
    if isinstance(value, ast.Dict):
        written_out = len(value.keys)
    elif isinstance(value, ast.Call) and dotted(value.func) == "dict" and not value.args:
        written_out = len(value.keywords)
    else:
        return False
    entries = dict_entries(value)
    return len(entries) == written_out and all(name != "device_map" for name, _ in entries)


def _changed_dicts(function: ast.FunctionDef) -> set[str]:
    """Names the function stores into, deletes from, or calls a changing method of (`kw["a"] = 1`, `kw.pop("a")`)."""
    changed: set[str] = set()
    for node in own_nodes(function):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Name):
            changed.add(node.value.id)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _DICT_CHANGES
            and isinstance(node.func.value, ast.Name)
        ):
            changed.add(node.func.value.id)
    return changed


def _model_load_in(function: ast.FunctionDef, resolver: Resolver, path: str, depth: int) -> tuple[ast.Call, str, str] | None:
    """The first model load (not a tokenizer's or a config's) in `function`, or in the first-party
    functions it calls up to `depth` calls down: the load, the function it is in, and that one's module.
    None as soon as one of them creates what makes ZeRO-3 visible itself (`HfDeepSpeedConfig(ds_config)`
    before its load): such a helper sets up its own load."""
    calls = [node for node in walk(function) if type(node) is ast.Call]
    if any(_creates_with(call, last_segment(dotted(call.func) or ""), _ZERO3_CONFIG, resolver) for call in calls):
        return None
    for call in calls:
        if _builds_a_model(call):
            return call, function.name, path
    for inner, foreign in _called_functions(function, calls, resolver) if depth else ():
        found = _model_load_in(inner, foreign.resolver if foreign else resolver, foreign.path if foreign else path, depth - 1)
        if found is not None:
            return found
    return None


def _called_functions(
    function: ast.FunctionDef, calls: list[ast.Call], resolver: Resolver
) -> Iterator[tuple[ast.FunctionDef, ForeignFunction | None]]:
    """The first-party functions other than `function` that its `calls` call (see Resolver.called_function)."""
    for call in calls:
        name = dotted(call.func)
        called = resolver.called_function(call, name) if name else None
        if called is not None and called[0] is not function:
            yield called


def parses_only_script_arguments(call: ast.Call, resolver: Resolver) -> bool:
    """`HfArgumentParser(ScriptArguments).parse_args_into_dataclasses()`: a parser whose dataclasses
    are all known and none is TrainingArguments, a TRL config or a subclass of one builds neither
    the ZeRO-3 config nor the process's device (trl's stack_llama_2 dpo_llama2.py loads 4-bit before
    its TrainingArguments exists). A parser the analysis cannot see still counts, as before."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _ARGUMENT_PARSING):
        return False
    made = _parser_made(func.value, resolver)
    if made is None:
        return False
    names = [dotted(c) for c in made[1]]
    if not names or any(name is None for name in names):
        return False
    local = {node.name: node for node in resolver.index.classes}
    return not any(_config_class(last_segment(name), local) for name in names)  # type: ignore[arg-type]


def _parser_made(parser: ast.expr, resolver: Resolver) -> tuple[str, list[ast.expr]] | None:
    """What `parser` is built by, when it is one `...(dataclasses, ...)` call: the callee's last
    name, and the dataclasses it is given (a tuple or list of them, or one)."""
    built = resolver.candidates(parser)
    if len(built) != 1 or not isinstance(built[0].value, ast.Call) or not built[0].value.args:
        return None
    first = built[0].value.args[0]
    return last_segment(dotted(built[0].value.func) or ""), first.elts if isinstance(first, (ast.Tuple, ast.List)) else [first]


def _sets_state(function: ast.FunctionDef, resolver: Resolver, depth: int) -> bool:
    """`function` (of the module `resolver` reads) sets this process's device when it runs: it creates
    a TrainingArguments, a TRL config, an Accelerator or a PartialState, parses arguments into one, or
    calls a first-party function that does, up to `depth` calls down. Worked out once a function and
    depth for each module's resolver."""
    key = ("sets state", id(function), depth)
    known = resolver.memo.get(key)
    if known is None:
        known = resolver.memo[key] = _works_out_sets_state(function, resolver, depth)
    return known  # type: ignore[return-value]


def _works_out_sets_state(function: ast.FunctionDef, resolver: Resolver, depth: int) -> bool:
    calls = [node for node in own_nodes(function) if type(node) is ast.Call]
    for call in calls:
        if _creates_with(
            call, last_segment(dotted(call.func) or ""), _DISTRIBUTED_STATE, resolver
        ) and not parses_only_script_arguments(call, resolver):
            return True
    return any(
        _sets_state(inner, foreign.resolver if foreign else resolver, depth - 1)
        for inner, foreign in (_called_functions(function, calls, resolver) if depth else ())
    )


def _loader_name(call: ast.Call) -> str:
    return f"{dotted(call.func.value) or '...'}.{call.func.attr}" if isinstance(call.func, ast.Attribute) else "from_pretrained"


def _other_arm(first: dict[int, bool], second: dict[int, bool]) -> bool:
    """Two places sit in different arms of one `if`: at most one of them runs."""
    return any(second.get(branch, arm) is not arm for branch, arm in first.items())


def _config_class(name: str, local: dict[str, ast.ClassDef], depth: int = 0) -> bool:
    """May a parser's dataclass set up the run: TrainingArguments, a TRL config (`SFTConfig`), a class of
    the file derived from one, or any class defined elsewhere but the usual plain ones?"""
    definition = local.get(name)
    if definition is not None:
        return depth > 8 or any(_config_class(last_segment(dotted(base) or ""), local, depth + 1) for base in definition.bases)
    return name not in _PLAIN_DATACLASS_NAMES


# Dataclasses a parser holds besides the training config, named as scripts name them when they are
# defined elsewhere (TRL's ModelConfig and ScriptArguments): they set nothing up.
_PLAIN_DATACLASS_NAMES = frozenset({"ModelConfig", "ScriptArguments", "ModelArguments", "DataArguments", "DataTrainingArguments"})


def _creates(name: str, names: set[str]) -> bool:
    """A call that creates one of `names`, parses arguments into TrainingArguments, or builds a TRL config."""
    return name in names or name in _ARGUMENT_PARSING or (name.endswith("Config") and name[:-6].isupper())


def _creates_with(call: ast.Call, name: str, names: set[str], resolver: Resolver) -> bool:
    """_creates, or a parse method of a project's own argument parser (`H4ArgumentParser((ModelArguments,
    DPOConfig)).parse()`, HfArgumentParser subclassed) whose dataclasses include a training config."""
    return _creates(name, names) or parses_into_a_config(call, resolver)


def parses_into_a_config(call: ast.Call, resolver: Resolver) -> bool:
    """`parser.parse()` (a `parse...` method neither argparse nor transformers has) where `parser` is
    built by a project's own `...Parser(...)` given dataclasses, one of which is TrainingArguments, a
    TRL config or a class derived from one."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr.startswith("parse")) or func.attr in _NOT_INTO_DATACLASSES:
        return False
    made = _parser_made(func.value, resolver)
    if made is None:
        return False
    maker, classes = made
    if not maker.endswith("Parser") or maker in ("ArgumentParser", "HfArgumentParser"):
        return False
    names = [last_segment(dotted(c) or "") for c in classes]
    local = {node.name: node for node in resolver.index.classes}
    return any(name[:1].isupper() and _config_class(name, local) for name in names)


# Parse methods that give no dataclasses (argparse's, which HfArgumentParser inherits), and those
# _creates knows by name already.
_NOT_INTO_DATACLASSES = frozenset(
    {"parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args", *_ARGUMENT_PARSING}
)
