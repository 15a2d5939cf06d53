"""DPL009 device-map-with-tensor-parallel."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from placement_lint.analysis.names import keyword, last_segment
from placement_lint.distributed import Mode, Setup
from placement_lint.edits import Applicability
from placement_lint.patterns import LazyPattern
from placement_lint.rules.base import CheckedFile, FixAvailability, Message, Rule, Violation, fix, written

_TENSOR_PARALLEL = ("tp_plan", "tp_size", "distributed_config")
# A keyword argument: the name after `(` or `,` (see _passed). One pattern per name, each starting with
# its literal: `re` finds a literal fast, where a leading `[(,\s]` tried a match at every space.
_ARGUMENTS = tuple((name.encode(), LazyPattern(re.escape(name.encode()) + rb"\s*=[^=]")) for name in _TENSOR_PARALLEL)
_SPACE = frozenset(b" \t\n\r\f\v")
_OPENS_ARGUMENT = frozenset(b"(,")
_BACKSLASH = ord("\\")
# Context-free: judged for one process and for several, each on its own (a world-size condition picks one).
_SETUPS = (Setup(Mode.SINGLE), Setup(Mode.DDP))


class DeviceMapWithTensorParallel(Rule):
    code = "DPL009"
    name = "device-map-with-tensor-parallel"
    summary = "`device_map` together with tensor parallelism (`tp_plan`, `tp_size`, `distributed_config`) in one load"
    fix_availability = FixAvailability.ALWAYS
    triggers = (b"tp_plan", b"tp_size", b"distributed_config")
    context_free = True  # transformers raises whatever the launch
    anchors = (b"device_map",)
    pre_check_tokens = (b"device_map", *(name for name, _ in _ARGUMENTS))

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        # Model code names `_tp_plan` everywhere; only a load that also passes device_map matters.
        return b"device_map" in raw and any(name in raw and _passed(pattern, raw) for name, pattern in _ARGUMENTS)

    valid = (
        'model = AutoModelForCausalLM.from_pretrained("m", tp_plan="auto")\n',
        'model = AutoModelForCausalLM.from_pretrained("m", tp_plan="auto", device_map=None)\n',
        # tp_size 1 is no tensor parallelism: the map is used.
        'cfg = DistributedConfig(tp_size=1)\nmodel = AutoModelForCausalLM.from_pretrained("m", distributed_config=cfg, device_map="cuda")\n',
    )
    invalid = ('model = AutoModelForCausalLM.from_pretrained("m", tp_plan="auto", device_map="auto")\n',)

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        for call in file.resolver.index.calls_by_name.get("from_pretrained", []):
            device_map = keyword(call, "device_map")
            if device_map is None:
                continue
            found = self._together(file, call, device_map)
            if found is None:
                continue
            parallel, guarded = found
            error = (
                '"Tensor parallelism and `device_map` are mutually exclusive."'
                if parallel.arg == "distributed_config"
                else '"`tp_plan` and `device_map` are mutually exclusive. Choose either one for parallelization."'
            )
            message = Message(
                f"device_map={written(file, device_map.value)} together with {parallel.arg}= (line {parallel.lineno})",
                f"transformers raises {error}",
                "remove device_map",
                (("why", "tensor parallelism places every weight itself"),),
            )
            # A map chosen by a condition may serve the runs without tensor parallelism: removing it is a judgement.
            applicability = Applicability.UNSAFE if guarded else Applicability.SAFE
            edit = fix(applicability, "Remove device_map", file.remove_keyword(call, device_map))
            yield self.violation(file, device_map, message, edit, None, role="load")

    @staticmethod
    def _together(file: CheckedFile, call: ast.Call, device_map: ast.keyword) -> tuple[ast.keyword, bool] | None:
        """A tensor-parallel argument that some run passes together with a non-None map: under one
        setup (a world-size condition picks one or the other), on paths whose conditions agree."""
        from placement_lint.analysis.values import Placement, classify

        arguments = [argument for argument in call.keywords if argument.arg in _TENSOR_PARALLEL]
        if not arguments:
            return None  # the maps are not worked out for a load without one (most loads of a long script)
        for setup in _SETUPS:
            resolver = file.resolver_for(setup)
            maps = [
                c
                for c in resolver.candidates(device_map.value)
                if classify(c.value, resolver.candidates).placement not in (Placement.NONE, Placement.UNKNOWN)
            ]
            if not maps:
                continue
            for argument in arguments:
                for parallel in resolver.candidates(argument.value):
                    if not _tensor_parallel(argument.arg, parallel.value):
                        continue
                    for chosen in maps:
                        if _compatible(chosen.guards, parallel.guards):
                            return argument, bool(chosen.guards)
        return None


def _tensor_parallel(name: str, value: object) -> bool:
    if not isinstance(value, ast.expr) or (isinstance(value, ast.Constant) and value.value is None):
        return False
    if name != "distributed_config":
        return True
    size = _tp_size(value)
    return size is not None and size > 1


def _compatible(first: tuple[tuple[ast.expr, bool], ...], second: tuple[tuple[ast.expr, bool], ...]) -> bool:
    """No condition is taken one way on the first path and the other way on the second."""
    taken = {ast.dump(test): outcome for test, outcome in first}
    return all(taken.get(ast.dump(test), outcome) == outcome for test, outcome in second)


def _tp_size(config: ast.expr) -> int | None:
    """`tp_size` of a literal `DistributedConfig(tp_size=N)` or `{"tp_size": N}`; transformers' default is 1."""
    size: ast.expr | None = None
    if isinstance(config, ast.Call) and last_segment(ast.unparse(config.func)) == "DistributedConfig":
        found = keyword(config, "tp_size")
        if found is None:
            return 1
        size = found.value
    elif isinstance(config, ast.Dict):
        size = next(
            (v for k, v in zip(config.keys, config.values, strict=True) if isinstance(k, ast.Constant) and k.value == "tp_size"),
            None,
        )
        if size is None:
            return 1
    if isinstance(size, ast.Constant) and isinstance(size.value, int):
        return size.value
    return None


def _passed(pattern: LazyPattern, raw: bytes) -> bool:
    """Could the name `pattern` finds stand as a keyword argument somewhere? An argument follows `(` or
    `,`, past any spaces and line breaks; a statement (`tp_size = getattr(...)`, 2,000 lines into
    generation/utils.py) follows the end of another. A line with a `#` or a closing backslash may hide
    a comma in a comment or join lines: that answers yes."""
    for match in pattern.finditer(raw):
        at = match.start() - 1
        if at >= 0 and raw[at] not in _SPACE and raw[at] not in _OPENS_ARGUMENT:
            continue  # `self._tp_size = ...`, `cfg.tp_size = ...`: part of a longer name
        while at >= 0 and raw[at] in _SPACE:
            at -= 1
        if at < 0 or raw[at] in _OPENS_ARGUMENT or raw[at] == _BACKSLASH:
            return True
        if raw.find(b"#", raw.rfind(b"\n", 0, at) + 1, at + 1) != -1:  # the `#` may be the last byte: an empty comment
            return True
    return False
