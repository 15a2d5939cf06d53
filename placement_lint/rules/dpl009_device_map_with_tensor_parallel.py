"""DPL009 device-map-with-tensor-parallel."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from placement_lint.analysis.names import keyword, last_segment
from placement_lint.analysis.values import Placement, classify
from placement_lint.distributed import Mode, Setup
from placement_lint.edits import Applicability
from placement_lint.rules.base import CheckedFile, FixAvailability, Rule, Violation, fix, written

_TENSOR_PARALLEL = ("tp_plan", "tp_size", "distributed_config")
_ANY_LAUNCH = Setup(Mode.POSSIBLE)  # context-free: a value guarded on the world size counts either way


class DeviceMapWithTensorParallel(Rule):
    code = "DPL009"
    name = "device-map-with-tensor-parallel"
    summary = "`device_map` together with tensor parallelism (`tp_plan`, `tp_size`, `distributed_config`) in one load"
    fix_availability = FixAvailability.ALWAYS
    triggers = (b"tp_plan", b"tp_size", b"distributed_config")
    context_free = True  # transformers raises whatever the launch
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
            if device_map is None or not self._set(file, device_map.value):
                continue
            parallel = next((kw for kw in call.keywords if kw.arg in _TENSOR_PARALLEL and self._tensor_parallel(file, kw)), None)
            if parallel is None:
                continue
            error = (
                '"Tensor parallelism and `device_map` are mutually exclusive."'
                if parallel.arg == "distributed_config"
                else '"`tp_plan` and `device_map` are mutually exclusive. Choose either one for parallelization."'
            )
            message = (
                f"device_map={written(file, device_map.value)} together with {parallel.arg}= (line {parallel.lineno}): "
                f"tensor parallelism places every weight itself, and transformers raises {error}; remove device_map"
            )
            edit = fix(Applicability.SAFE, "Remove device_map", file.remove_keyword(call, device_map))
            yield self.violation(file, device_map, message, edit, None)

    @staticmethod
    def _set(file: CheckedFile, value: ast.expr) -> bool:
        """Some path gives the argument a known non-None value."""
        resolver = file.resolver_for(_ANY_LAUNCH)
        return any(
            classify(c.value, resolver.candidates).placement not in (Placement.NONE, Placement.UNKNOWN)
            for c in resolver.candidates(value)
        )

    @staticmethod
    def _tensor_parallel(file: CheckedFile, argument: ast.keyword) -> bool:
        for candidate in file.resolver_for(_ANY_LAUNCH).candidates(argument.value):
            value = candidate.value
            if not isinstance(value, ast.expr) or (isinstance(value, ast.Constant) and value.value is None):
                continue
            if argument.arg != "distributed_config":
                return True
            size = _tp_size(value)
            if size is not None and size > 1:
                return True
        return False


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
