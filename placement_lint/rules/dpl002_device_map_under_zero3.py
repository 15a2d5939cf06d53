"""DPL002 device-map-under-zero3."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from placement_lint.distributed import SINGLE, Mode, Setup
from placement_lint.edits import Applicability, Fix
from placement_lint.rules.base import (
    CheckedFile,
    FixAvailability,
    Message,
    RefusedLowCpuMemUsage,
    Rule,
    Violation,
    fix,
    shown_value,
    value_facts,
    zero3_live_at_load,
    zero3_load_consequence,
)

if TYPE_CHECKING:
    from placement_lint.analysis.placements import DeviceMap

_DDP = Setup(Mode.DDP)


class DeviceMapUnderZero3(Rule):
    code = "DPL002"
    name = "device-map-under-zero3"
    summary = "Any non-None `device_map` where DeepSpeed ZeRO-3 is active"
    fix_availability = FixAvailability.ALWAYS
    valid = (
        "from transformers import AutoModelForCausalLM, TrainingArguments\n"
        'args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map=None)\n',
    )
    invalid = (
        "import os\nfrom transformers import AutoModelForCausalLM, TrainingArguments\n"
        'args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": int(os.environ["LOCAL_RANK"])})\n',
    )

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        from placement_lint.analysis.values import Placement

        for device_map, context in file.placed(Placement.FIXED, Placement.PER_PROCESS, Placement.CPU, Placement.OTHER):
            # Only a load while the ZeRO-3 config is live raises; a load before it is DPL008's concern.
            if not context.setup.zero3 or not zero3_live_at_load(device_map, context):
                continue
            consequence = zero3_load_consequence(
                context,
                "every process loads the whole model where the map says before DeepSpeed partitions it (out of memory on big models)",
            )
            flag = RefusedLowCpuMemUsage.in_load(file, device_map, context)
            message = Message(
                f"{shown_value(file, device_map)} is not allowed under DeepSpeed ZeRO-3",
                consequence,
                f"ZeRO-3 partitions and places the model itself: use device_map=None{RefusedLowCpuMemUsage.also(flag)}",
                value_facts(file, device_map),
            )
            make_fix = partial(self._fix, file, device_map, flag)
            yield self.placement_violation(file, device_map, context, message, make_fix, RefusedLowCpuMemUsage.spans(flag))

    def _fix(self, file: CheckedFile, device_map: DeviceMap, flag: RefusedLowCpuMemUsage | None) -> Fix:
        site = file.site(device_map)
        applicability = Applicability.SAFE if site.confined else Applicability.UNSAFE
        # A value bound under a condition no launch decides may serve runs without ZeRO-3 that take
        # that branch: it is kept for them, as for a DDP run (and the fix is unsafe, placement_violation).
        serves_ddp = self._serves_ddp(file, device_map)
        if serves_ddp or file.on_one_path(device_map):
            start, end = file.source.node_span(site.node)
            original = file.source.text[start:end]
            return fix(
                applicability,
                f"Use None under ZeRO-3 and keep the map for {'the DDP path' if serves_ddp else 'runs without it'}",
                file.replace(site.node, f"None if is_deepspeed_zero3_enabled() else {original}"),
                file.add_import("transformers.integrations", "is_deepspeed_zero3_enabled"),
                flag.edit(keep_without_zero3=True) if flag else None,
            )
        title = f"Use device_map=None{RefusedLowCpuMemUsage.also(flag)}"
        return fix(applicability, title, file.replace(site.node, "None"), flag.edit(keep_without_zero3=False) if flag else None)

    @staticmethod
    def _serves_ddp(file: CheckedFile, device_map: DeviceMap) -> bool:
        """A run without ZeRO-3 needs the value: it sits behind a condition on the process count
        (`if ddp:`), or the file is also launched under DDP or DeepSpeed ZeRO-1/2."""
        contexts = file.contexts.contexts_at(device_map.loader.node)
        if any(c.setup.distributed and not c.setup.zero3 for c in contexts):
            return True
        if not device_map.candidate.guards:
            return False
        ddp, single = file.resolver_for(_DDP), file.resolver_for(SINGLE)
        return any(
            ddp.truth(test) is outcome and single.truth(test) is (not outcome) for test, outcome in device_map.candidate.guards
        )
