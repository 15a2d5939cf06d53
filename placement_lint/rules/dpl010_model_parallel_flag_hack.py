"""DPL010 model-parallel-flag-hack."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from placement_lint.analysis.names import dotted
from placement_lint.distributed import Mode
from placement_lint.rules.base import CheckedFile, Message, Rule, Violation, reachable_under, under

_FLAGS = ("is_parallelizable", "model_parallel")


class ModelParallelFlagHack(Rule):
    code = "DPL010"
    name = "model-parallel-flag-hack"
    summary = "`model.is_parallelizable = True` / `model.model_parallel = True` in a script that runs under multi-process DDP"
    triggers = (b"is_parallelizable", b"model_parallel")
    valid = (
        # alpaca-lora: naive model parallelism only when the run is not DDP.
        'import os\nimport torch.distributed as dist\ndist.init_process_group("nccl")\n'
        'ddp = int(os.environ.get("WORLD_SIZE", 1)) != 1\n'
        "if not ddp and torch.cuda.device_count() > 1:\n    model.is_parallelizable = True\n    model.model_parallel = True\n",
        # One process may split the model over its GPUs.
        "model.is_parallelizable = True\nmodel.model_parallel = True\n",
    )
    invalid = ('import torch.distributed as dist\ndist.init_process_group("nccl")\nmodel.is_parallelizable = True\n',)

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        for node in file.resolver.index.calls_and_assigns:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True):
                continue
            for target in node.targets:
                if not (isinstance(target, ast.Attribute) and target.attr in _FLAGS):
                    continue
                owner = dotted(target.value)
                if owner is None or owner.split(".")[0] in ("self", "cls"):
                    continue  # a model class setting its own flag is the library's model-parallel code
                for context in file.contexts.contexts_at(node):
                    setup = context.setup
                    if not setup.distributed or setup.single_process or not reachable_under(file, node, setup, context.arguments):
                        continue
                    if setup.mode in (Mode.DEEPSPEED, Mode.FSDP):
                        continue  # the Trainer never places the model there itself: the flags change nothing
                    message = Message(
                        f"{owner}.{target.attr} = True asks for naive model parallelism {under(setup)}",
                        help="remove it, or set it only when the run is a single process (`if not ddp:`)",
                        facts=(
                            (
                                "effect",
                                "the two contradict each other: on transformers <= 4.57 the Trainer then treats the model as "
                                "split over GPUs (is_model_parallel) and skips placing it; since 5.0 the flag is ignored",
                            ),
                        ),
                    )
                    yield self.violation(file, node, message, None, context)
                    break
