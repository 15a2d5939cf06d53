"""DPL007 spread-device-map-in-distributed-inference."""

from __future__ import annotations

from collections.abc import Iterator

from placement_lint.rules.base import (
    PER_PROCESS_MAP,
    CheckedFile,
    Message,
    Rule,
    Violation,
    main_process_only,
    shown_value,
    under,
    value_facts,
    zero3_live_at_load,
)


class SpreadDeviceMapInDistributedInference(Rule):
    code = "DPL007"
    name = "spread-device-map-in-distributed-inference"
    summary = (
        'A spreading `device_map` ("auto", ...) on a model only used for inference, in a script that runs as several processes'
    )
    valid = (
        # One process spreading a model it only generates with: fine.
        'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
        "model.generate(input_ids)\n",
        'from accelerate import PartialState\nimport torch.distributed as dist\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": PartialState().local_process_index})\n'
        "model.generate(input_ids)\n",
    )
    invalid = (
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\nmodel.generate(input_ids)\n',
    )

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        from placement_lint.analysis.placements import LoaderKind
        from placement_lint.analysis.values import Placement

        for device_map, context in file.placed(Placement.SPREAD):
            setup = context.setup
            if setup.zero3 and zero3_live_at_load(device_map, context):
                continue  # the load itself raises: DPL001
            if not (device_map.trained is False or device_map.loader.kind is LoaderKind.PIPELINE):
                continue  # trained or unknown: DPL001's business
            if context.one_gpu_per_process or main_process_only(file, device_map.loader.node):
                continue
            message = Message(
                f"{shown_value(file, device_map)} spreads a copy of the model over every GPU in each rank {under(setup)}",
                help=f"if the model fits on one GPU, use device_map={PER_PROCESS_MAP} and split the inputs between "
                "processes; if it does not, keep the spreading map and run inference in one process",
                facts=(
                    *value_facts(file, device_map),
                    (
                        "effect",
                        "the model is only used for inference, and N processes load N copies that compete for the same memory",
                    ),
                ),
            )
            yield self.value_violation(file, device_map, context, message, None)
