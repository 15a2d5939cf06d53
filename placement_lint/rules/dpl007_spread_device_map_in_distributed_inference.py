"""DPL007 spread-device-map-in-distributed-inference."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from placement_lint.analysis.placements import DeviceMap, LoaderKind
from placement_lint.analysis.values import Placement
from placement_lint.rules.base import (
    PER_PROCESS_MAP,
    CheckedFile,
    Message,
    Rule,
    Violation,
    shown_value,
    under,
    value_facts,
    zero3_live_at_load,
)

# `if accelerator.is_main_process:`, `if rank == 0:`, `if local_rank in (-1, 0):`: only one process loads.
_MAIN_PROCESS = re.compile(
    r"(is_main_process|is_local_main_process|is_world_process_zero|is_rank_zero"
    r"|\b(get_|local_|global_)?rank(\(\))?\s*(==\s*0|in\s*[\[(]\s*(-1\s*,\s*)?0\b|<\s*1\b|<=\s*0\b))"
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
        for device_map, context in file.placed(Placement.SPREAD):
            setup = context.setup
            if setup.zero3 and zero3_live_at_load(device_map, context):
                continue  # the load itself raises: DPL001
            if not (device_map.trained is False or device_map.loader.kind is LoaderKind.PIPELINE):
                continue  # trained or unknown: DPL001's business
            if context.one_gpu_per_process or self._one_process_loads(file, device_map):
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
            yield self.violation(file, file.site(device_map).node, message, None, context, device_map.consumers, "load")

    @staticmethod
    def _one_process_loads(file: CheckedFile, device_map: DeviceMap) -> bool:
        """The load runs only on the main process (`if accelerator.is_main_process:`)."""
        child: ast.AST = device_map.loader.node
        for ancestor in file.resolver.ancestors(device_map.loader.node):
            if isinstance(ancestor, ast.If) and child in ancestor.body and _MAIN_PROCESS.search(ast.unparse(ancestor.test)):
                return True
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return False
            child = ancestor
        return False
