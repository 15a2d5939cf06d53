"""Is a condition true under a given distributed setup?

Scripts choose their `device_map` by a condition on distributed state (`if ddp:`, `"auto" if
world_size == 1 else None`, `None if is_deepspeed_zero3_enabled() else ...`). We evaluate such
conditions three-valued (True, False, None for unknown) for the setup the context detected, so a
rule judges only the branch that setup takes.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable, Iterator

from placement_lint.analysis.names import dotted, last_segment
from placement_lint.distributed import Mode, Setup
from placement_lint.patterns import LazyPattern
from placement_lint.records import Record


class Span(Record):
    """An unknown integer known to lie in [low, high]: the world size or a rank at run time. A record,
    not a tuple: a tuple is a value of its own here."""

    __slots__ = ("low", "high")

    def __init__(self, low: int, high: float) -> None:
        self.low = low
        self.high = high


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


class _Object:
    """Some object that is not None (a constructed instance): enough for `x is not None` and `if x:`."""

    def __repr__(self) -> str:
        return "OBJECT"


OBJECT = _Object()

WORLD_ENV = {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}
RANK_ENV = {"LOCAL_RANK", "RANK", "SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}
# The callees, as written, that read an environment variable: `os.environ.get("X")`, `os.getenv("X")`.
ENV_READERS = ("environ.get", "getenv")
# Flags whose name says "this run is distributed" (`ddp`, `is_distributed`, `args.use_ddp`).
_DISTRIBUTED_FLAG = LazyPattern(r"^(is_|use_|using_)?(ddp|distributed|multi_gpu|multigpu)(_enabled|_training|_run)?$")
# An attribute holding the run's ZeRO stage (`args.zero_stage`, accelerate's `deepspeed_plugin.zero_stage`).
_ZERO_STAGE_FIELD = LazyPattern(r"^(ds_|deepspeed_)?zero_stage$")

Lookup = Callable[[ast.expr], list[ast.expr | None]]
# The environment `accelerate launch` sets for a DeepSpeed or FSDP run, and its value (None: the ZeRO stage).
_ACCELERATE_ENV: dict[str, tuple[Mode, str | None]] = {
    "ACCELERATE_USE_DEEPSPEED": (Mode.DEEPSPEED, "true"),
    "ACCELERATE_DEEPSPEED_ZERO_STAGE": (Mode.DEEPSPEED, None),
    "ACCELERATE_USE_FSDP": (Mode.FSDP, "true"),
}


def evaluate_truth(
    expr: ast.expr,
    setup: Setup,
    lookup: Lookup,
    passed: frozenset[str] = frozenset(),
    qualify: Callable[[str], str] | None = None,
) -> bool | None:
    """`passed`: the script arguments the launch sets to a true value (`--load_in_4bit true`);
    `qualify`: a callee's name as the file imports it (`zero3_on` -> `...is_deepspeed_zero3_enabled`)."""
    value = _Evaluator(setup, lookup, passed, qualify).value(expr, 0)
    return _truth(value)


def _truth(value: object) -> bool | None:
    if value is UNKNOWN:
        return None
    if value is OBJECT:
        return True
    if isinstance(value, Span):
        return True if value.low > 0 else None
    return bool(value)


class _Evaluator:
    def __init__(
        self, setup: Setup, lookup: Lookup, passed: frozenset[str] = frozenset(), qualify: Callable[[str], str] | None = None
    ) -> None:
        self.setup = setup
        self.lookup = lookup
        self.passed = passed
        self.qualify = qualify
        # None when the setup is only "possibly" distributed: then every distributed condition is unknown.
        self.multi: bool | None = None if setup.mode is Mode.POSSIBLE else setup.distributed and not setup.single_process

    def _pick(self, distributed: object, single: object) -> object:
        if self.multi is None:
            return UNKNOWN
        return distributed if self.multi else single

    def value(self, expr: ast.expr, depth: int) -> object:
        if depth > 12:
            return UNKNOWN
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            operand = self.value(expr.operand, depth + 1)
            if isinstance(operand, (int, float)) and not isinstance(operand, bool):
                return -operand if isinstance(expr.op, ast.USub) else operand
            return UNKNOWN
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            truth = _truth(self.value(expr.operand, depth + 1))
            return UNKNOWN if truth is None else not truth
        if isinstance(expr, ast.BoolOp):
            return self._bool_op(expr, depth)
        if isinstance(expr, ast.Compare):
            return self._compare(expr, depth)
        if isinstance(expr, ast.Call):
            return self._call(expr, depth)
        if isinstance(expr, ast.Subscript):
            env = _env_read(expr)
            if env is not None:
                return self._env(env, UNKNOWN)
            if _stage_read(expr):
                return self._stage()
            return UNKNOWN
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return self._name(expr, depth)
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return tuple(self.value(e, depth + 1) for e in expr.elts)
        if isinstance(expr, ast.Dict) and expr.keys:
            return OBJECT  # `deepspeed={"zero_optimization": ...}`: a config, so `if args.deepspeed:` holds
        return UNKNOWN

    def _bool_op(self, expr: ast.BoolOp, depth: int) -> object:
        truths = [_truth(self.value(v, depth + 1)) for v in expr.values]
        if isinstance(expr.op, ast.And):
            if False in truths:
                return False
            return True if all(t is True for t in truths) else UNKNOWN
        if True in truths:
            return True
        return False if all(t is False for t in truths) else UNKNOWN

    def _name(self, expr: ast.Name | ast.Attribute, depth: int) -> object:
        if isinstance(expr, ast.Name) and expr.id == "__name__":
            return "__main__"  # code runs under a setup as (or as called from) the script a launch runs
        name = dotted(expr) or ""
        attr = last_segment(name)
        known = self._known_attribute(expr, attr)
        if known is not UNKNOWN:
            return known
        resolved = self.lookup(expr)
        values = {_freeze(self.value(v, depth + 1)) if v is not None else UNKNOWN for v in resolved}
        if len(values) == 1 and UNKNOWN not in values:
            return values.pop()
        if _DISTRIBUTED_FLAG.match(attr) and values <= {UNKNOWN}:
            return self._pick(True, False)
        if isinstance(expr, ast.Attribute) and _ZERO_STAGE_FIELD.match(attr) and values <= {UNKNOWN}:
            return self._stage()  # no value in the file or the launch: the stage the launch's config sets
        return UNKNOWN

    def _known_attribute(self, expr: ast.AST, attr: str) -> object:
        if isinstance(expr, ast.Attribute):
            owner = last_segment(dotted(expr.value))
            if owner == "DistributedType":
                return attr
            if owner == "ParallelMode":
                return attr
            if attr in ("world_size", "num_processes", "n_gpu_processes"):
                return self._pick(Span(2, float("inf")), 1)
            if attr in ("local_rank",):
                return self._pick(Span(0, float("inf")), -1)
            if attr in ("local_process_index", "process_index"):
                return self._pick(Span(0, float("inf")), 0)
            if attr == "distributed_type":
                return self.setup.accelerate_type if self.setup.distributed else self._pick("MULTI_GPU", "NO")
            if attr == "parallel_mode":
                return self._pick("DISTRIBUTED", "NOT_DISTRIBUTED")
            if attr in ("is_deepspeed_enabled",):
                return self._deepspeed()
            if attr in ("is_fsdp_enabled",):
                return self._fsdp()
            if attr == "deepspeed_plugin" and self.setup.mode is Mode.DEEPSPEED:
                return OBJECT  # accelerate's plugin: set in every DeepSpeed run (None otherwise, but only accelerate sets it)
        return UNKNOWN

    def _deepspeed(self) -> object:
        return UNKNOWN if self.setup.mode is Mode.POSSIBLE else self.setup.mode is Mode.DEEPSPEED

    def _fsdp(self) -> object:
        return UNKNOWN if self.setup.mode is Mode.POSSIBLE else self.setup.mode is Mode.FSDP

    def _zero3(self) -> object:
        if self.setup.mode is Mode.POSSIBLE:
            return UNKNOWN
        if self.setup.mode is not Mode.DEEPSPEED:
            return False
        if self.setup.zero_stage is None:
            return UNKNOWN
        return self.setup.zero_stage == 3

    def _stage(self) -> object:
        """The ZeRO stage of a DeepSpeed run whose config shows it; unknown otherwise (a config read in
        another run may name any stage)."""
        if self.setup.mode is Mode.DEEPSPEED and self.setup.zero_stage is not None:
            return self.setup.zero_stage
        return UNKNOWN

    def _env(self, name: str, default: object) -> object:
        if name in WORLD_ENV:
            return self._pick(Span(2, float("inf")), default)
        if name in RANK_ENV:
            return self._pick(Span(0, float("inf")), default)
        if name in _ACCELERATE_ENV and self.setup.mode is not Mode.POSSIBLE:
            # What `accelerate launch` exports for its DeepSpeed and FSDP runs (utils/launch.py); a
            # script reading them is launched by it. Unset in any other setup.
            mode, value = _ACCELERATE_ENV[name]
            if self.setup.mode is not mode:
                return default
            if value is None:  # the stage
                return UNKNOWN if self.setup.zero_stage is None else str(self.setup.zero_stage)
            return value
        return UNKNOWN

    def _call(self, call: ast.Call, depth: int) -> object:
        env = _env_read(call)
        if env is not None:
            default = self.value(call.args[1], depth + 1) if len(call.args) > 1 else None
            return self._env(env, default)
        name = dotted(call.func) or ""
        # By what the file imports it as: `from ...deepspeed import is_deepspeed_zero3_enabled as zero3_on`.
        func = last_segment(self.qualify(name) if self.qualify is not None and name else name)
        if func in ("int", "bool", "str") and len(call.args) == 1:
            inner = self.value(call.args[0], depth + 1)
            if isinstance(inner, Span) or inner is UNKNOWN:
                return inner
            try:
                return {"int": int, "bool": bool, "str": str}[func](inner)  # type: ignore[operator]
            except (TypeError, ValueError):
                return UNKNOWN
        # transformers' global check, and the config's own (`args.hf_deepspeed_config.is_zero3()`,
        # accelerate's `deepspeed_plugin.hf_ds_config.is_zero3()`): an HfDeepSpeedConfig's stage is 3.
        if func in ("is_deepspeed_zero3_enabled", "is_zero3"):
            return self._zero3()
        if _stage_read(call):
            return self._stage()
        if func in ("is_deepspeed_enabled",):
            return self._deepspeed()
        if func == "is_fsdp_enabled":
            return self._fsdp()
        if func == "is_initialized" and ("distributed" in name or name.startswith("dist.")):
            return self._pick(True, False)
        if func == "is_available" and ("distributed" in name or name.startswith("dist.")):
            # torch.distributed is built into every CUDA build of torch, so a multi-process launch on
            # GPUs has it; one process may run a build without it, so there it stays unknown.
            return True if self.multi else UNKNOWN
        if func == "get_world_size":
            return self._pick(Span(2, float("inf")), 1)
        if func in ("get_rank", "get_local_rank"):
            return self._pick(Span(0, float("inf")), 0)
        if name.endswith("cuda.device_count"):
            # A multi-process launch on one machine gives each process every GPU, one per process at least.
            return Span(2, float("inf")) if self.multi else UNKNOWN
        if name.endswith("cuda.is_available"):
            # Every rule judges a run on GPUs (NCCL, one process per GPU), so a multi-process launch
            # has CUDA; one process may be a CPU run, so there the answer stays unknown.
            return True if self.multi else UNKNOWN
        if func == "get_quantization_config" and self.passed & {"load_in_4bit", "load_in_8bit"}:
            return OBJECT  # TRL builds a BitsAndBytesConfig when the launch asks for 4/8-bit
        if func[:1].isupper() and func not in ("PartialState", "Accelerator"):
            return OBJECT  # `BitsAndBytesConfig(...)`: an instance, never None
        # What the call gives as the file tells it: a helper of the file returning a condition
        # (`def use_zero3(): return is_deepspeed_zero3_enabled()`), `getattr(args, "deepspeed", None)`.
        values = {_freeze(self.value(v, depth + 1)) if v is not None else UNKNOWN for v in self.lookup(call)}
        return values.pop() if len(values) == 1 and UNKNOWN not in values else UNKNOWN

    def _compare(self, expr: ast.Compare, depth: int) -> object:
        left = self.value(expr.left, depth + 1)
        result: object = True
        for op, right_expr in zip(expr.ops, expr.comparators, strict=True):
            # `"LOCAL_RANK" in os.environ`
            if isinstance(op, (ast.In, ast.NotIn)) and _is_environ(right_expr) and isinstance(left, str):
                present = self._pick(True, False) if left in WORLD_ENV | RANK_ENV else UNKNOWN
                outcome: object = present if present is UNKNOWN or isinstance(op, ast.In) else not present
                right = self.value(right_expr, depth + 1)
            else:
                right = self.value(right_expr, depth + 1)
                outcome = _compare(op, left, right)
            if outcome is False:
                return False
            if outcome is UNKNOWN:
                result = UNKNOWN
            left = right
        return result


_ORDER = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _compare(op: ast.cmpop, left: object, right: object) -> object:
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    if left is OBJECT or right is OBJECT:
        if isinstance(op, (ast.Is, ast.IsNot)) and None in (left, right):
            return isinstance(op, ast.IsNot)
        return UNKNOWN
    if isinstance(op, (ast.Is, ast.IsNot)):
        if isinstance(left, Span) or isinstance(right, Span):
            if left is not None and right is not None:
                return UNKNOWN
            same = False
        else:
            same = left is right or (type(left) is type(right) and left == right)
        return same if isinstance(op, ast.Is) else not same
    if isinstance(op, (ast.In, ast.NotIn)):
        if isinstance(right, tuple) and not isinstance(left, Span) and UNKNOWN not in right:
            found = left in right
            return found if isinstance(op, ast.In) else not found
        if isinstance(left, str) and isinstance(right, str):  # `"zero3" in args.deepspeed`, the config's path
            found = left in right
            return found if isinstance(op, ast.In) else not found
        return UNKNOWN
    fn = _ORDER.get(type(op))
    if fn is None:
        return UNKNOWN
    if isinstance(left, Span) or isinstance(right, Span):
        return _compare_span(type(op), left, right)
    try:
        return fn(left, right)
    except TypeError:
        return UNKNOWN


def _compare_span(op: type, left: object, right: object) -> object:
    flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
    if isinstance(right, Span) and not isinstance(left, Span):
        left, right = right, left
        op = flipped.get(op, op)
    if not isinstance(left, Span) or not isinstance(right, (int, float)) or isinstance(right, bool):
        return UNKNOWN
    lo, hi = left.low, left.high
    if op is ast.Eq:
        return False if not (lo <= right <= hi) else (True if lo == hi == right else UNKNOWN)
    if op is ast.NotEq:
        return True if not (lo <= right <= hi) else UNKNOWN
    if op is ast.Gt:
        return True if lo > right else (False if hi <= right else UNKNOWN)
    if op is ast.GtE:
        return True if lo >= right else (False if hi < right else UNKNOWN)
    if op is ast.Lt:
        return True if hi < right else (False if lo >= right else UNKNOWN)
    if op is ast.LtE:
        return True if hi <= right else (False if lo > right else UNKNOWN)
    return UNKNOWN


def _freeze(value: object) -> object:
    return value if not isinstance(value, list) else tuple(value)


def _is_environ(expr: ast.expr) -> bool:
    return (dotted(expr) or "").endswith("environ")


def _env_read(expr: ast.expr) -> str | None:
    """The variable name of `os.environ["X"]`, `os.environ.get("X", d)`, `os.getenv("X", d)`."""
    if isinstance(expr, ast.Subscript) and _is_environ(expr.value):
        key = expr.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
        return None
    if isinstance(expr, ast.Call) and expr.args:
        name = dotted(expr.func) or ""
        key = expr.args[0]
        if name.endswith(ENV_READERS) and isinstance(key, ast.Constant):
            return key.value if isinstance(key.value, str) else None
    return None


def _stage_read(expr: ast.expr) -> bool:
    """A read of the stage from a DeepSpeed config dict: `ds_config["zero_optimization"]["stage"]`,
    `config.get("zero_optimization", {}).get("stage", 0)`."""
    if isinstance(expr, ast.Subscript):
        key, owner = expr.slice, expr.value
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "get" and expr.args:
        key, owner = expr.args[0], expr.func.value
    else:
        return False
    if not (isinstance(key, ast.Constant) and key.value == "stage"):
        return False
    return any(isinstance(n, ast.Constant) and n.value == "zero_optimization" for n in ast.walk(owner))


def is_env_read(expr: ast.expr, names: set[str]) -> bool:
    return _env_read(expr) in names


# -- paths that exclude each other -------------------------------------------------------------

# What a condition's outcome says of one value: it is one of `values` ("in"), none of them ("not in"),
# true ("truthy") or false ("falsy"). Only literals are compared, so two facts on one value either
# contradict or may both hold.
Fact = tuple[ast.expr, str, tuple[object, ...]]
# Whether two facts on one name speak of the same value: nothing between the two tests gives the name
# a value the later fact allows (it is not bound again, or only to literals the later fact rules out).
SameValue = Callable[[Fact, Fact], bool]
_FLIPPED = {"in": "not in", "not in": "in", "truthy": "falsy", "falsy": "truthy"}
NO_LITERAL = object()


def facts_of(test: ast.expr, outcome: bool) -> list[Fact]:
    """`args.bits in [4, 8]` true -> args.bits is 4 or 8; `a and not b` true -> a true, b false;
    `a or b` false -> both false. A condition that says nothing certain of one value gives no fact."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return facts_of(test.operand, not outcome)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) is outcome:  # `a and b` true, or `a or b` false: each part is
            return [fact for value in test.values for fact in facts_of(value, outcome)]
        return []
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _comparison_fact(test.left, test.ops[0], test.comparators[0], outcome)
    if is_subject(test):
        return [(test, "truthy" if outcome else "falsy", ())]
    return []


def _comparison_fact(left: ast.expr, op: ast.cmpop, right: ast.expr, outcome: bool) -> list[Fact]:
    if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
        if not is_subject(left):
            left, right = right, left
        value = literal(right)
        if not is_subject(left) or value is NO_LITERAL:
            return []
        kind = "in" if isinstance(op, (ast.Eq, ast.Is)) else "not in"
        return [(left, kind if outcome else _FLIPPED[kind], (value,))]
    if isinstance(op, (ast.In, ast.NotIn)) and is_subject(left) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        values = tuple(literal(element) for element in right.elts)
        if NO_LITERAL in values:
            return []
        kind = "in" if isinstance(op, ast.In) else "not in"
        return [(left, kind if outcome else _FLIPPED[kind], values)]
    return []


def is_subject(expr: ast.expr) -> bool:
    """A value read by name (`bits`, `args.bits`, `cfg["bits"]`): the same at two tests unless re-bound."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        if isinstance(expr, ast.Subscript) and not (isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str)):
            return False
        expr = expr.value
    return isinstance(expr, ast.Name)


def literal(expr: ast.expr) -> object:
    """The value of a literal (`16`, `-1`, `"8bit"`, `None`); NO_LITERAL for anything else."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) and isinstance(expr.operand, ast.Constant):
        if isinstance(expr.operand.value, (int, float)) and not isinstance(expr.operand.value, bool):
            return -expr.operand.value
    return NO_LITERAL


def fails(value: object, fact: Fact) -> bool:
    """The literal `value` does not satisfy the fact."""
    return contradict((fact[0], "in", (value,)), fact)


def contradict(first: Fact, second: Fact) -> bool:
    """No value satisfies both facts (taken to be of the same value)."""
    # Two facts: a comparison, not a sort (asked once per branch passed).
    if _ORDER_OF_KINDS[second[1]] < _ORDER_OF_KINDS[first[1]]:
        first, second = second, first
    (_, kind, values), (_, other_kind, other_values) = first, second
    if kind == "in":
        if other_kind == "in":
            return not any(_equal(a, b) for a in values for b in other_values)
        if other_kind == "not in":
            return all(any(_equal(a, b) for b in other_values) for a in values)
        return all(bool(a) is (other_kind == "falsy") for a in values)
    return {kind, other_kind} == {"truthy", "falsy"}


_ORDER_OF_KINDS = {"in": 0, "not in": 1, "truthy": 2, "falsy": 3}


def _equal(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a literal's __eq__ cannot fail, but a bytes/str comparison may warn
        return True


def exclude(first: list[Fact], second: list[Fact], same_value: SameValue, subject: Callable[[ast.expr], str] = ast.dump) -> bool:
    """Some fact of one path contradicts a fact of the other on the same value: no run takes both.
    `subject` names the value a fact is about (facts on equal names speak of it). Each fact of
    `second` is tried against only the facts of `first` that can contradict it (see _OneValue), so
    the cost is the facts plus the pairs that contradict, not every pair: the paths down an if/elif
    chain on one value hold a fact per branch passed. Symmetric: so are `contradict` and, as a
    resolver's, `same_value`."""
    if not first or not second:
        return False
    return FactIndex(first, subject).contradicted(second, same_value)


class FactIndex:
    """The facts of one path, filed by the value they are about, to try other facts against."""

    __slots__ = ("by_subject", "subject")

    def __init__(self, facts: list[Fact], subject: Callable[[ast.expr], str] = ast.dump) -> None:
        self.subject = subject
        self.by_subject: dict[str, _OneValue] = {}
        for fact in facts:
            key = subject(fact[0])
            filed = self.by_subject.get(key)
            if filed is None:
                filed = self.by_subject[key] = _OneValue()
            filed.add(fact)

    def contradicted(self, facts: Iterable[Fact], same_value: SameValue) -> bool:
        """Some fact of `facts` contradicts one filed here, of the same value."""
        for fact in facts:
            filed = self.by_subject.get(self.subject(fact[0]))
            if filed is None or (fact[1] == "not in" and not filed.within):
                continue
            for other in filed.contradicting(fact):
                if same_value(other, fact):
                    return True
        return False


class _OneValue:
    """The facts of one path on one value, filed so that those that can contradict a fact are found
    without trying the others: a `not in` fact contradicts only an `in` fact whose values it all
    excludes, so it is filed under each value it excludes; two `not in` facts, or a `not in` and a
    truthiness, never contradict."""

    __slots__ = ("facts", "within", "excluding", "excluding_unhashable", "truthy", "falsy")

    def __init__(self) -> None:
        self.facts: list[Fact] = []
        self.within: list[int] = []  # the positions of its `in` facts
        self.excluding: dict[object, list[int]] = {}  # a value -> the `not in` facts that list it
        self.excluding_unhashable: list[int] = []
        self.truthy: list[int] = []
        self.falsy: list[int] = []

    def add(self, fact: Fact) -> None:
        position = len(self.facts)
        self.facts.append(fact)
        kind, values = fact[1], fact[2]
        if kind == "in":
            self.within.append(position)
        elif kind == "not in":
            for value in values:
                try:
                    self.excluding.setdefault(value, []).append(position)
                except TypeError:
                    self.excluding_unhashable.append(position)
        else:
            (self.truthy if kind == "truthy" else self.falsy).append(position)

    def contradicting(self, fact: Fact) -> Iterator[Fact]:
        """The facts that contradict `fact`, in the order they were added."""
        kind, values = fact[1], fact[2]
        if kind == "not in":
            tried: Iterable[int] = self.within  # in order already
        elif kind == "in":
            tried = sorted({*self.within, *self.truthy, *self.falsy, *self._excluding_any(values)})
        else:
            tried = sorted({*self.within, *(self.falsy if kind == "truthy" else self.truthy)})
        for position in tried:
            other = self.facts[position]
            if contradict(fact, other):
                yield other

    def _excluding_any(self, values: tuple[object, ...]) -> list[int]:
        """The `not in` facts that may exclude all of `values`: all of them when there are none (an
        empty `in` contradicts everything), else those that list the first value (equal literals
        hash alike) or a value that cannot be hashed."""
        if not values:
            return [p for positions in self.excluding.values() for p in positions] + self.excluding_unhashable
        try:
            listing = self.excluding.get(values[0], [])
        except TypeError:
            listing = [p for positions in self.excluding.values() for p in positions]
        return [*listing, *self.excluding_unhashable]
