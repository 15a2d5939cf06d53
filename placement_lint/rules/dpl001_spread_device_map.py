"""DPL001 spread-device-map-in-distributed."""

from __future__ import annotations

from collections.abc import Iterator

from placement_lint.analysis.placements import DeviceMap, LoaderKind
from placement_lint.analysis.values import Placement
from placement_lint.distributed import Mode
from placement_lint.context.evidence import Context
from placement_lint.edits import Applicability, Fix
from placement_lint.rules.base import (
    CheckedFile,
    FixAvailability,
    Rule,
    Violation,
    consumer_phrase,
    fix,
    is_local,
    trl_overrides,
    written,
)


class SpreadDeviceMapInDistributed(Rule):
    code = "DPL001"
    name = "spread-device-map-in-distributed"
    summary = "A spreading `device_map` (\"auto\", \"balanced\", ...) in a script that runs as several processes"
    fix_availability = FixAvailability.SOMETIMES
    valid = (
        # One process spreading the model over its GPUs is naive pipeline parallelism: fine.
        'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n',
        # Per-process map under DDP.
        'import torch.distributed as dist\nfrom accelerate import PartialState\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": PartialState().local_process_index})\n',
    )
    invalid = (
        'from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n'
        'args = TrainingArguments("out", deepspeed="ds.json")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\nTrainer(model=model, args=args).train()\n',
    )

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        for device_map, context in file.device_maps:
            setup = context.setup
            if device_map.classified.placement is not Placement.SPREAD or trl_overrides(context, device_map):
                continue
            # Outside ZeRO-3 the crash comes when a trainer or prepare() sees the spread model; a model
            # that is only used for inference is DPL007's business. Under ZeRO-3 the load itself fails.
            if not setup.zero3 and (device_map.trained is False or device_map.loader.kind is LoaderKind.PIPELINE):
                continue
            message = self._message(file, device_map, context)
            yield self.violation(file, device_map.node, message, self._fix(file, device_map, context), context)

    def _message(self, file: CheckedFile, device_map: DeviceMap, context: Context) -> str:
        setup = context.setup
        value = f"device_map={written(file, device_map.node)}"
        if setup.zero3:
            consequence = 'transformers raises "DeepSpeed Zero-3 is not compatible with passing a `device_map`"'
        else:
            consequence = (
                "accelerate raises \"You can't train a model that has been loaded with `device_map='auto'` "
                'in any distributed mode"'
            )
        advice = "use device_map=None"
        if device_map.quantized and not device_map.after_distributed_state and setup.mode is Mode.DDP:
            advice = 'use device_map={"": PartialState().local_process_index} (a 4/8-bit model loaded before any distributed state lands on GPU 0 with None)'
        return (
            f"{value} spreads one process's model over every GPU, but this script runs under {setup.describe()} "
            f"({context.because(file.display)}){consumer_phrase(device_map)}: {consequence}; {advice}"
        )

    def _fix(self, file: CheckedFile, device_map: DeviceMap, context: Context) -> Fix:
        setup = context.setup
        if device_map.quantized and not device_map.after_distributed_state and setup.mode is Mode.DDP:
            return fix(
                Applicability.UNSAFE,
                'Use device_map={"": PartialState().local_process_index}',
                file.replace(device_map.node, '{"": PartialState().local_process_index}'),
                file.add_import("accelerate", "PartialState"),
            )
        safe = (
            bool(context.deciding or context.override)
            and device_map.trained is True
            and is_local(file, device_map)
            and not (device_map.quantized and not device_map.after_distributed_state)
        )
        return fix(Applicability.SAFE if safe else Applicability.UNSAFE, "Use device_map=None", file.replace(device_map.node, "None"))
