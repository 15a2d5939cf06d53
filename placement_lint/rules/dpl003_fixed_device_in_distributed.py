"""DPL003 fixed-device-in-distributed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial

from placement_lint.analysis.names import dotted, keyword, last_segment
from placement_lint.analysis.placements import DeviceMap
from placement_lint.analysis.values import CurrentDevice, Placement
from placement_lint.context.evidence import Context
from placement_lint.distributed import Mode, Setup
from placement_lint.edits import Applicability, Fix
from placement_lint.rules.base import (
    PER_PROCESS_MAP,
    CheckedFile,
    FixAvailability,
    Rule,
    Violation,
    fix,
    passed_by_launch,
    state_exists_at_load,
    written,
    zero3_live_at_load,
)

# Calls that may bind this process to its GPU without it being certain that they make it the
# current device: `init_process_group(device_id=...)` (torch >= 2.3) and DeepSpeed's
# `init_distributed()`, which passes device_id on (deepspeed/comm/torch.py). Silent after them.
_MAYBE_SETS_DEVICE = {"init_distributed"}


class FixedDeviceInDistributed(Rule):
    code = "DPL003"
    name = "fixed-device-in-distributed"
    summary = 'One fixed device (`0`, `"cuda:0"`, `{"": 0}`) for every process of a distributed run'
    fix_availability = FixAvailability.ALWAYS
    valid = (
        'import torch.distributed as dist\nfrom accelerate import PartialState\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": PartialState().local_process_index})\n',
        # A single-process script may pin its one GPU.
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": 0})\n',
    )
    invalid = (
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": 0})\n',
    )

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        yield from self._fixed(file)
        yield from self._current_device(file)

    def _fixed(self, file: CheckedFile) -> Iterator[Violation]:
        for device_map, context in file.placed(Placement.FIXED):
            setup = context.setup
            if setup.zero3 and zero3_live_at_load(device_map, context):
                continue  # DPL002: the load itself fails
            if setup.single_process or context.one_gpu_per_process:
                continue  # one process, or each process sees one GPU: that fixed device is its own
            device = device_map.classified.device
            message = (
                f"device_map={written(file, device_map.node)}{passed_by_launch(device_map)} puts every process's model on device {device!r}, but this "
                f"script runs under {setup.describe()} ({context.because(file.display)}): every rank loads onto the same GPU "
                f'(out of memory, or bitsandbytes\' "loaded ... on a different device" error); {_advice(setup)}'
            )
            yield self.placement_violation(file, device_map, context, message, partial(self._fix, file, device_map, setup))

    def _current_device(self, file: CheckedFile) -> Iterator[Violation]:
        """`"cuda"`, `torch.device("cuda")`, `torch.cuda.current_device()`: the current device, which is
        GPU 0 in every process until something sets it (domain.md §1.3 M1)."""
        for device_map, context in file.placed(Placement.PER_PROCESS):
            current = device_map.classified.device
            if not isinstance(current, CurrentDevice) or not _several_processes(context):
                continue
            setup = context.setup
            if setup.zero3 and zero3_live_at_load(device_map, context):
                continue  # DPL002: the load itself fails
            if state_exists_at_load(device_map, context) or _device_maybe_set(file, device_map):
                continue
            version = ""
            if current.local_rank_from_transformers_5:
                below = context.pinned_below("transformers", "5.0")
                if below is False:
                    continue  # transformers >= 5.0 maps "cuda" to this process's LOCAL_RANK
                version = f" with {below}" if below else ' on transformers < 5.0 (5.0 maps "cuda" to the local rank)'
            message = (
                f"device_map={written(file, device_map.node)}{passed_by_launch(device_map)} resolves to the current CUDA device{version}, "
                f"and nothing sets this process's device before the load (torch.cuda.set_device, Accelerator(), "
                f"PartialState() or TrainingArguments), but this script runs under "
                f"{setup.describe()} ({context.because(file.display)}): every rank loads onto GPU 0 (out of memory, or "
                f'bitsandbytes\' "loaded ... on a different device" error); {_advice(setup)}'
            )
            yield self.placement_violation(file, device_map, context, message, partial(self._fix, file, device_map, setup))

    @staticmethod
    def _fix(file: CheckedFile, device_map: DeviceMap, setup: Setup) -> Fix:
        if setup.mode is Mode.FSDP or setup.zero3:
            site = file.site(device_map)
            safe = Applicability.SAFE if site.confined else Applicability.UNSAFE
            return fix(safe, "Use device_map=None", file.replace(site.node, "None"))
        if setup.mode is Mode.DEEPSPEED and setup.zero_stage is None:
            return fix(Applicability.UNSAFE, "Use device_map=None", file.replace(file.site(device_map).node, "None"))
        return fix(
            Applicability.UNSAFE,
            f"Use device_map={PER_PROCESS_MAP}",
            file.replace(file.site(device_map).node, PER_PROCESS_MAP),
            file.add_import("accelerate", "PartialState"),
        )


def _advice(setup: Setup) -> str:
    if setup.zero3:
        return "the model loads before the ZeRO-3 config exists; ZeRO-3 places it itself: use device_map=None"
    if setup.mode is Mode.FSDP:
        return "FSDP shards and places the model itself: use device_map=None"
    if setup.mode is Mode.DEEPSPEED and setup.zero_stage is None:
        return "DeepSpeed places the model itself: use device_map=None"
    return f"give each process its own GPU: use device_map={PER_PROCESS_MAP}"


def _several_processes(context: Context) -> bool:
    """A launch (or in-file setup) that starts several processes, each seeing more than one GPU."""
    setup = context.setup
    return setup.distributed and not setup.single_process and not context.one_gpu_per_process


def _device_maybe_set(file: CheckedFile, device_map: DeviceMap) -> bool:
    """Inside `with torch.cuda.device(local_rank):`, or after a call that may bind the process to its GPU."""
    load = device_map.loader.node
    for ancestor in file.resolver.ancestors(load):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
            isinstance(item.context_expr, ast.Call) and (dotted(item.context_expr.func) or "").endswith("cuda.device")
            for item in ancestor.items
        ):
            return True
    binding = [
        call
        for call in file.resolver.index.calls
        if (name := last_segment(dotted(call.func) or "")) in _MAYBE_SETS_DEVICE
        or (name == "init_process_group" and keyword(call, "device_id") is not None)
    ]
    return bool(binding) and device_map.analysis.runs_before(load, binding)
