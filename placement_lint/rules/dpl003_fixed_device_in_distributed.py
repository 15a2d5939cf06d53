"""DPL003 fixed-device-in-distributed."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from placement_lint.analysis.placements import DeviceMap
from placement_lint.analysis.values import Placement
from placement_lint.distributed import Mode, Setup
from placement_lint.edits import Applicability, Fix
from placement_lint.rules.base import (
    PER_PROCESS_MAP,
    CheckedFile,
    FixAvailability,
    Message,
    Rule,
    Violation,
    fix,
    passed_by_launch,
    shown_value,
    under,
    zero3_live_at_load,
)


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
        for device_map, context in file.placed(Placement.FIXED):
            setup = context.setup
            if setup.zero3 and zero3_live_at_load(device_map, context):
                continue  # DPL002: the load itself fails
            if setup.single_process or context.one_gpu_per_process:
                continue  # one process, or each process sees one GPU: that fixed device is its own
            device = device_map.classified.device
            if setup.zero3:
                advice = "the model loads before the ZeRO-3 config exists; ZeRO-3 places it itself: use device_map=None"
            elif setup.mode is Mode.FSDP:
                advice = "FSDP shards and places the model itself: use device_map=None"
            elif setup.mode is Mode.DEEPSPEED and setup.zero_stage is None:
                advice = "DeepSpeed places the model itself: use device_map=None"
            else:
                advice = f"give each process its own GPU: use device_map={PER_PROCESS_MAP}"
            message = Message(
                f"{shown_value(file, device_map)} puts every rank's model on device {device!r} {under(setup)}",
                help=advice,
                facts=(
                    *passed_by_launch(device_map),
                    (
                        "effect",
                        "every rank loads onto the same GPU (out of memory, or bitsandbytes' "
                        '"loaded ... on a different device" error)',
                    ),
                ),
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
