"""DPL001 spread-device-map-in-distributed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from placement_lint.analysis.consumers import ConsumerKind
from placement_lint.analysis.names import dotted, last_segment
from placement_lint.context.evidence import Context
from placement_lint.distributed import Mode
from placement_lint.edits import Applicability, Fix
from placement_lint.rules.base import (
    DDP_WRAP_ERROR,
    PER_PROCESS_MAP,
    SPREAD_PREPARE_ERROR,
    CheckedFile,
    FixAvailability,
    Message,
    RefusedLowCpuMemUsage,
    Rule,
    Violation,
    fix,
    shown_value,
    spread_prepare_consequence,
    state_exists_at_load,
    under,
    value_facts,
    wrapped_by_ddp,
    zero3_live_at_load,
    zero3_load_consequence,
)

if TYPE_CHECKING:
    from placement_lint.analysis.placements import DeviceMap

# deepspeed.initialize, with no accelerate prepare() or Trainer around it, never meets accelerate's
# check: its engine moves the module to the rank's GPU (`self.module.to(self.device)` in
# DeepSpeedEngine._configure_distributed_model), through the move accelerate's dispatch_model wraps.
_DEEPSPEED_MOVE = (
    "deepspeed.initialize then moves each rank's whole copy onto its own GPU: accelerate warns \"You shouldn't move "
    'a model that is dispatched using accelerate hooks", and raises "You can\'t move a model that has some modules '
    'offloaded to cpu or disk" where the map put layers there'
)


def _only_deepspeed_trains(device_map: DeviceMap) -> bool:
    training = [c for c in device_map.consumers if c.kind is not ConsumerKind.INFERENCE]
    return bool(training) and all(c.kind is ConsumerKind.DEEPSPEED for c in training)


class SpreadDeviceMapInDistributed(Rule):
    code = "DPL001"
    name = "spread-device-map-in-distributed"
    summary = 'A spreading `device_map` ("auto", "balanced", ...) in a script that runs as several processes'
    fix_availability = FixAvailability.SOMETIMES
    valid = (
        # One process spreading the model over its GPUs is naive pipeline parallelism: fine.
        'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n',
        # Per-process map under DDP.
        'import torch.distributed as dist\nfrom accelerate import PartialState\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": PartialState().local_process_index})\n',
    )
    invalid = (
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        'args = TrainingArguments("out", deepspeed="ds.json")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\nTrainer(model=model, args=args).train()\n',
    )

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        from placement_lint.analysis.placements import LoaderKind
        from placement_lint.analysis.values import Placement

        for device_map, context in file.placed(Placement.SPREAD):
            loads_under_zero3 = _raises_at_load(device_map, context)
            # Outside ZeRO-3 the crash comes when a trainer or prepare() sees the spread model; a model
            # that is only used for inference is DPL007's business. Under ZeRO-3 the load itself fails.
            if not loads_under_zero3 and (device_map.trained is False or device_map.loader.kind is LoaderKind.PIPELINE):
                continue
            # A computed map (infer_auto_device_map, dispatch_model) is big-model inference machinery:
            # report it only when the model is seen going into training.
            if not loads_under_zero3 and device_map.trained is None and _computed(device_map):
                continue
            # One process spreading its model is big-model inference; only training it trips accelerate's
            # check (`python train.py --deepspeed ds.json`), so an unknown use is not enough there.
            if not loads_under_zero3 and context.setup.single_process and device_map.trained is not True:
                continue
            # ACCELERATE_BYPASS_DEVICE_MAP=true is accelerate's explicit opt-out of its check; a process
            # that sees one GPU maps the model onto that GPU (domain.md §2.2).
            if not loads_under_zero3 and (
                file.bypasses_device_map_check or context.bypasses_device_map_check or context.one_gpu_per_process
            ):
                continue
            flag = RefusedLowCpuMemUsage.in_load(file, device_map, context) if loads_under_zero3 else None
            message = self._message(file, device_map, context, flag)
            make_fix = partial(self._fix, file, device_map, context, flag)
            yield self.placement_violation(file, device_map, context, message, make_fix, RefusedLowCpuMemUsage.spans(flag))

    @staticmethod
    def _per_rank_needed(device_map: DeviceMap, context: Context) -> bool:
        """None would be wrong here: a hand-written DDP wrapper needs the model on this rank's GPU, and a
        4/8-bit model loaded before any distributed state exists would land on GPU 0."""
        if context.setup.mode is not Mode.DDP:
            return False
        return wrapped_by_ddp(device_map) or (device_map.quantized and not state_exists_at_load(device_map, context))

    def _message(self, file: CheckedFile, device_map: DeviceMap, context: Context, flag: RefusedLowCpuMemUsage | None) -> Message:
        setup = context.setup
        if _raises_at_load(device_map, context):
            consequence = zero3_load_consequence(
                context, SPREAD_PREPARE_ERROR.replace("accelerate raises", "accelerate then raises", 1)
            )
        elif wrapped_by_ddp(device_map):
            consequence = DDP_WRAP_ERROR
        elif _only_deepspeed_trains(device_map):
            consequence = _DEEPSPEED_MOVE
        else:
            consequence = spread_prepare_consequence(context, device_map.classified.device == "auto")
        advice = f"use device_map=None{RefusedLowCpuMemUsage.also(flag)}"
        if self._per_rank_needed(device_map, context):
            reason = (
                "DDP needs the model on this rank's GPU"
                if wrapped_by_ddp(device_map)
                else "with None a 4/8-bit model loaded before any distributed state exists lands on GPU 0"
            )
            advice = f"use device_map={PER_PROCESS_MAP} ({reason})"
        return Message(
            f"{shown_value(file, device_map)} spreads each rank's model over every GPU {under(setup)}",
            consequence,
            advice,
            value_facts(file, device_map),
        )

    def _fix(self, file: CheckedFile, device_map: DeviceMap, context: Context, flag: RefusedLowCpuMemUsage | None) -> Fix:
        if self._per_rank_needed(device_map, context):
            return fix(
                Applicability.UNSAFE,
                f"Use device_map={PER_PROCESS_MAP}",
                file.replace(file.site(device_map).node, PER_PROCESS_MAP),
                file.add_import("accelerate", "PartialState"),
            )
        safe = (
            bool(context.deciding or context.override)
            and device_map.trained is True
            and not any(c.kind is ConsumerKind.WRAPPER for c in device_map.consumers)
            # A helper whose model trains in an importer may serve other importers too (an inference script).
            and all(c.node is not None for c in device_map.consumers)
            and file.site(device_map).confined
            and not (device_map.quantized and not state_exists_at_load(device_map, context))
            # `python train.py` beside the distributed launch spreads the model on purpose (naive model parallelism).
            and not file.launched_alone(device_map.loader.node)
        )
        return fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            f"Use device_map=None{RefusedLowCpuMemUsage.also(flag)}",
            file.replace(file.site(device_map).node, "None"),
            flag.edit(keep_without_zero3=False) if flag else None,
        )


def _raises_at_load(device_map: DeviceMap, context: Context) -> bool:
    """transformers refuses the map when the model loads under a live ZeRO-3 config; its check is in
    from_pretrained, and accelerate's dispatch_model has none."""
    from placement_lint.analysis.placements import LoaderKind

    if device_map.loader.kind is LoaderKind.DISPATCH:
        return False
    return bool(context.setup.zero3) and zero3_live_at_load(device_map, context)


def _computed(device_map: DeviceMap) -> bool:
    from placement_lint.analysis.placements import LoaderKind

    node = device_map.node
    computed = isinstance(node, ast.Call) and last_segment(dotted(node.func)) == "infer_auto_device_map"
    return computed or device_map.loader.kind is LoaderKind.DISPATCH
