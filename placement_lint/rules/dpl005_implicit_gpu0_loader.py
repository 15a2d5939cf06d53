"""DPL005 implicit-gpu0-loader."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from placement_lint.analysis.names import dotted, keyword
from placement_lint.context.evidence import Context
from placement_lint.distributed import Mode
from placement_lint.edits import Applicability, Fix
from placement_lint.rules.base import (
    PER_PROCESS_MAP,
    CheckedFile,
    FixAvailability,
    Message,
    Rule,
    Violation,
    fix,
    reachable_under,
    state_exists_at_load,
    under,
)

if TYPE_CHECKING:
    from placement_lint.analysis.placements import ModelLoad

# unsloth's loaders default to device_map="sequential": one process fills GPU 0 first (unsloth#2457).
_UNSLOTH = {"FastLanguageModel", "FastModel", "FastVisionModel"}


class ImplicitGpu0Loader(Rule):
    code = "DPL005"
    name = "implicit-gpu0-loader"
    summary = "A loader whose default puts every process's model on GPU 0 (unsloth, or a 4/8-bit model loaded before the process's GPU is set)"
    fix_availability = FixAvailability.ALWAYS
    triggers = (
        b"load_in_",
        b"quantization_config",
        b"BitsAndBytesConfig",
        b"FastLanguageModel",
        b"FastModel",
        b"FastVisionModel",
    )

    anchors = (b"from_pretrained",)
    pre_check_tokens = (b"from_pretrained",)

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        return b"from_pretrained" in raw and super().could_fire(raw)

    valid = (
        "import torch.distributed as dist\nfrom transformers import AutoModelForCausalLM, TrainingArguments\n"
        'dist.init_process_group("nccl")\nargs = TrainingArguments("out")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", load_in_4bit=True)\n',
    )
    invalid = (
        "import torch.distributed as dist\nfrom transformers import AutoModelForCausalLM\n"
        'dist.init_process_group("nccl")\nmodel = AutoModelForCausalLM.from_pretrained("m", load_in_4bit=True)\n',
    )

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        reported: set[int] = set()
        for variant in file.contexts.variants():
            setup = variant.setup
            if not setup.distributed or setup.single_process:
                continue
            for load in file.analysis_for(setup, variant.arguments).model_loads:
                if id(load.call) in reported or not (
                    load.device_map_given is False or _explicit_none(load) or _none_on_every_path(file, load, variant)
                ):
                    continue
                unsloth = load.loader.name.split(".")[0] in _UNSLOTH
                if unsloth and (setup.mode is not Mode.DDP or not self._unsloth_branch_runs(file, load, variant)):
                    continue  # unsloth trains with DDP only; an opt-in `if args.use_unsloth:` the launch leaves off
                if not unsloth and not (
                    load.quantized and not state_exists_at_load(load, variant) and not self._inside_device_block(file, load)
                ):
                    continue
                if not reachable_under(file, load.call, setup, variant.arguments):
                    continue
                context = next((c for c in file.contexts.contexts_at(load.call) if c.setup == setup), None)
                if context is None or context.one_gpu_per_process:
                    continue
                if not unsloth and (setup.zero3 or setup.mode is Mode.FSDP):
                    continue  # QLoRA under ZeRO-3/FSDP is documented without a device_map
                reported.add(id(load.call))
                yield self._violation(file, load, context, unsloth)

    @staticmethod
    def _unsloth_branch_runs(file: CheckedFile, load: ModelLoad, context: Context) -> bool:
        """Scripts that offer unsloth as an option guard it with a flag (`if args.use_unsloth:`), here or
        around the helper's call; then the branch runs only if the launch passes that flag."""
        sites: list[ast.AST] = [load.call]
        function = file.resolver.scope_of(load.call)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sites += file.resolver.index.calls_by_name.get(function.name, [])
        guarded = any(
            isinstance(a, ast.If) and "unsloth" in ast.unparse(a.test).lower()
            for site in sites
            for a in file.resolver.ancestors(site)
        )
        if not guarded:
            return True
        return any(
            "unsloth" in name.lower() and value.lower() not in ("false", "0", "no") for name, value, _ in context.arguments
        )

    @staticmethod
    def _inside_device_block(file: CheckedFile, load: ModelLoad) -> bool:
        """`with torch.cuda.device(local_rank):` makes that GPU current for the load."""
        for ancestor in file.resolver.ancestors(load.call):
            if isinstance(ancestor, (ast.With, ast.AsyncWith)):
                for item in ancestor.items:
                    call = item.context_expr
                    if isinstance(call, ast.Call) and (dotted(call.func) or "").endswith("cuda.device"):
                        return True
        return False

    def _violation(self, file: CheckedFile, load: ModelLoad, context: Context, unsloth: bool) -> Violation:
        setup = context.setup
        if unsloth:
            headline = f"{load.loader.name}(...) without device_map fills GPU 0 first in every rank {under(setup)}"
            why = (
                'unsloth\'s default map is "sequential", which unsloth releases without per-rank pinning '
                "(before PR #11129) fill from GPU 0 in every process"
            )
        else:
            headline = f"{load.loader.name}(...) loads a 4/8-bit model onto GPU 0 in every rank {under(setup)}"
            why = (
                "no device_map, and nothing has set this process's GPU yet (TrainingArguments, a TRL config, "
                "Accelerator() or PartialState()), so bitsandbytes puts it on the current device, GPU 0"
            )
        message = Message(
            headline,
            "every rank loads onto the same GPU (out of memory, or \"You can't train a model that has been loaded in "
            '8-bit or 4-bit precision on a different device")',
            f"pass device_map={PER_PROCESS_MAP}",
            (("why", why),),
        )
        return self.violation(file, load.call.func, message, self._fix(file, load), context, load.consumers, "load")

    @staticmethod
    def _fix(file: CheckedFile, load: ModelLoad) -> Fix:
        given = keyword(load.call, "device_map")
        if given is not None:  # None, as written or on every path of the run: the value the call passes
            edit = file.replace(given.value, PER_PROCESS_MAP)
        else:
            edit = file.add_keyword(load.call, f"device_map={PER_PROCESS_MAP}")
        return fix(
            Applicability.UNSAFE,
            f"Pass device_map={PER_PROCESS_MAP}",
            edit,
            file.add_import("accelerate", "PartialState"),
        )


def _none_on_every_path(file: CheckedFile, load: ModelLoad, variant: Context) -> bool:
    """The map the call passes is None on every path the run takes (`device_map=device_map`, set to None
    in the branch of `if args.load_in_4_bit:` that the launch's `--load_in_4_bit` picks)."""
    from placement_lint.analysis.values import Placement  # the analyses load only with a file to check

    if keyword(load.call, "device_map") is None:
        return False
    values = file.values_taken(load.call, variant)
    return bool(values) and all(value.classified.placement is Placement.NONE for value in values)


def _explicit_none(load: ModelLoad) -> bool:
    given = keyword(load.call, "device_map")
    return given is not None and isinstance(given.value, ast.Constant) and given.value.value is None
