"""DPL003 fixed-device-in-distributed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from placement_lint.analysis.names import dotted, keyword, last_segment
from placement_lint.context.evidence import Context
from placement_lint.distributed import SINGLE, Mode, Setup
from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.rules.base import (
    PER_PROCESS_MAP,
    CheckedFile,
    FixAvailability,
    Message,
    Rule,
    Violation,
    fix,
    main_process_only,
    move_text,
    shown_value,
    state_exists_at_load,
    under,
    value_facts,
    wrapped_model,
    zero3_live_at_load,
)

if TYPE_CHECKING:
    from placement_lint.analysis.placements import DeviceMap
    from placement_lint.analysis.values import GlobalRank

# Calls that may bind this process to its GPU without it being certain that they make it the
# current device: `init_process_group(device_id=...)` (torch >= 2.3) and DeepSpeed's
# `init_distributed()`, which passes device_id on (deepspeed/comm/torch.py). Silent after them.
_MAYBE_SETS_DEVICE = {"init_distributed"}

# A fixed device that is the main process's own when it alone loads.
_FIRST_GPU = (0, "cuda:0", "0")

_SAME_GPU = (
    "effect",
    'every rank loads onto the same GPU (out of memory, or bitsandbytes\' "loaded ... on a different device" error)',
)


class FixedDeviceInDistributed(Rule):
    code = "DPL003"
    name = "fixed-device-in-distributed"
    summary = (
        'One fixed device (`0`, `"cuda:0"`, `{"": 0}`) for every process of a distributed run, or the current device '
        '(`"cuda"`, `.to("cuda")`) before the process has set it'
    )
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"device_map", b".to(", b".cuda(")
    anchors = (b"device_map", b"from_pretrained")
    valid = (
        'import torch.distributed as dist\nfrom accelerate import PartialState\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": PartialState().local_process_index})\n',
        # A single-process script may pin its one GPU.
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": 0})\n',
        'import torch\nimport torch.distributed as dist\ndist.init_process_group("nccl")\ntorch.cuda.set_device(0)\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="cuda")\n',
    )
    invalid = (
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map={"": 0})\n',
        # The current device before anything has set this process's device: GPU 0 in every rank.
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map=torch.device("cuda"))\n',
    )

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        """A device_map, or a loaded model that a `.to(` / `.cuda(` may move."""
        return b"device_map" in raw or (b"from_pretrained" in raw and (b".to(" in raw or b".cuda(" in raw))

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        yield from self._fixed(file)
        yield from self._current_device(file)
        yield from self._global_rank(file)
        yield from self._moves_to_current_device(file)

    def _global_rank(self, file: CheckedFile) -> Iterator[Violation]:
        """`{"": PartialState().process_index}`, `int(os.environ["RANK"])`, `dist.get_rank()`: the global
        rank, each process's own GPU on the first node only (domain.md §9, DPL003b). Under DDP and
        DeepSpeed 1/2; ZeRO-3 refuses every map (DPL002) and FSDP places the model itself."""
        from placement_lint.analysis.values import GlobalRank, Placement

        for device_map, context in file.placed(Placement.PER_PROCESS):
            rank = device_map.classified.device
            setup = context.setup
            if not isinstance(rank, GlobalRank) or not _several_processes(context):
                continue
            if not (setup.mode is Mode.DDP or setup.mode is Mode.DEEPSPEED and setup.zero_stage in (0, 1, 2)):
                continue  # ZeRO-3 refuses or ignores every map (DPL002, DPL008); FSDP places the model itself
            if setup.single_process or context.one_gpu_per_process:
                continue
            message = Message(
                f"{shown_value(file, device_map)} is the global rank {under(setup)}: past the first node, a GPU the node does not have",
                help='use the local rank: PartialState().local_process_index, or int(os.environ["LOCAL_RANK"])',
                facts=(
                    *value_facts(file, device_map),
                    (
                        "why",
                        f"{rank.written} counts the processes of every node, a node's GPUs from 0: on every node after "
                        "the first it names a GPU the node does not have",
                    ),
                ),
            )
            yield self.placement_violation(file, device_map, context, message, partial(self._local_rank_fix, file, rank))

    @staticmethod
    def _local_rank_fix(file: CheckedFile, rank: GlobalRank) -> Fix | None:
        """`process_index` -> `local_process_index`, `"RANK"` -> `"LOCAL_RANK"`: the same value on one node."""
        node = rank.node
        if isinstance(node, ast.Attribute):
            start, end = file.source.node_span(node)
            if file.source.text[end - len("process_index") : end] != "process_index":
                return None
            return fix(Applicability.SAFE, "Use the local rank", Edit(end - len("process_index"), end, "local_process_index"))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            start, end = file.source.node_span(node)
            written = file.source.text[start:end]
            local = {"RANK": "LOCAL_RANK", "SLURM_PROCID": "SLURM_LOCALID"}[node.value]
            return fix(Applicability.SAFE, "Use the local rank", Edit(start, end, written.replace(node.value, local, 1)))
        return None

    def _fixed(self, file: CheckedFile) -> Iterator[Violation]:
        from placement_lint.analysis.values import Placement

        for device_map, context in file.placed(Placement.FIXED):
            setup = context.setup
            if setup.zero3 and zero3_live_at_load(device_map, context):
                continue  # DPL002: the load itself fails
            if setup.single_process or context.one_gpu_per_process:
                continue  # one process, or each process sees one GPU: that fixed device is its own
            device = device_map.classified.device
            if device in _FIRST_GPU and main_process_only(file, device_map.loader.node):
                continue  # only the main process loads, and GPU 0 is its own
            message = Message(
                f"{shown_value(file, device_map)} puts every rank's model on device {device!r} {under(setup)}",
                help=_advice(setup),
                facts=(*value_facts(file, device_map), _SAME_GPU),
            )
            yield self.placement_violation(file, device_map, context, message, partial(self._fix, file, device_map, setup))

    def _current_device(self, file: CheckedFile) -> Iterator[Violation]:
        """`"cuda"`, `torch.device("cuda")`, `torch.cuda.current_device()`: the current device, which is
        GPU 0 in every process until something sets it (domain.md §1.3 M1)."""
        from placement_lint.analysis.values import CurrentDevice, Placement

        for device_map, context in file.placed(Placement.PER_PROCESS):
            current = device_map.classified.device
            if not isinstance(current, CurrentDevice) or not _several_processes(context):
                continue
            setup = context.setup
            if setup.zero3 and zero3_live_at_load(device_map, context):
                continue  # DPL002: the load itself fails
            if state_exists_at_load(device_map, context) or _device_maybe_set(file, device_map):
                continue
            if main_process_only(file, device_map.loader.node):
                continue  # the current device of the main process is GPU 0, its own
            version = ""
            if current.local_rank_from_transformers_5:
                below = context.pinned_below("transformers", "5.0")
                if below is False:
                    continue  # transformers >= 5.0 maps "cuda" to this process's LOCAL_RANK
                version = f" with {below}" if below else ' on transformers < 5.0 (5.0 maps "cuda" to the local rank)'
            message = Message(
                f"{shown_value(file, device_map)} is GPU 0 in every rank {under(setup)}: nothing set this process's device",
                help=_advice(setup),
                facts=(
                    *value_facts(file, device_map),
                    (
                        "why",
                        f"it resolves to the current CUDA device{version}, and nothing sets it before the load "
                        "(torch.cuda.set_device, Accelerator(), PartialState() or TrainingArguments)",
                    ),
                    _SAME_GPU,
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

    def _moves_to_current_device(self, file: CheckedFile) -> Iterator[Violation]:
        """`model.to("cuda")` / `model.cuda()` before the device is set, under DDP: the model goes to GPU 0
        in every process. Under DeepSpeed and FSDP a move before the framework places the model is DPL006's."""
        calls = [c for name in ("to", "cuda") for c in file.resolver.index.calls_by_name.get(name, [])]
        if not calls:
            return
        analysis = file.analysis_for(SINGLE)
        loads = {id(load.call) for load in analysis.model_loads}
        if not loads:
            return  # no move here can be of a model this file loads
        for call in calls:
            if not isinstance(call.func, ast.Attribute):
                continue
            # DeepSpeed and FSDP place the model themselves: DPL006 judges a move before them. Asked
            # first: the move's values need the flow of its function, which nothing else may ask for.
            ddp = [c for c in file.contexts.contexts_at(call) if _several_processes(c) and c.setup.mode is Mode.DDP]
            if not ddp or not _to_current_device(file, call) or not _holds_a_model(file, call.func.value, loads):
                continue
            for context in ddp:
                setup = context.setup
                if any(e.origin == "import" for e in context.deciding) or analysis.state_before(call):
                    break  # an importer, or this file, has set the device by then
                if _in_device_block(file, call) or main_process_only(file, call):
                    break  # the device is made current, or only the main process, whose GPU 0 is, moves it
                message = Message(
                    f"{move_text(file, call)} moves each rank's model to GPU 0 {under(setup)}: nothing set its device",
                    help="call torch.cuda.set_device(local_rank) first, or move it to PartialState().device",
                    facts=(
                        (
                            "why",
                            "it moves the model to the current CUDA device, and nothing sets this process's device before "
                            "it (torch.cuda.set_device, Accelerator(), PartialState() or TrainingArguments)",
                        ),
                        (
                            "effect",
                            "every rank puts its copy on GPU 0 (out of memory; a DistributedDataParallel(device_ids=[local_rank]) of it then fails)",
                        ),
                    ),
                )
                yield self.violation(file, call, message, None, context, role="finding")
                break


def _to_current_device(file: CheckedFile, call: ast.Call) -> bool:
    """`.cuda()`, `.to("cuda")`, `.to(torch.device("cuda"))`, `.to(device=...)`, or a name bound only to those."""
    from placement_lint.analysis.values import CurrentDevice, classify

    assert isinstance(call.func, ast.Attribute)
    if call.func.attr == "cuda":
        return not call.args and not call.keywords
    given = keyword(call, "device")
    target = call.args[0] if call.args else (given.value if given is not None else None)
    if target is None:
        return False
    values = [target] if isinstance(target, (ast.Constant, ast.Call)) else [c.value for c in file.resolver.candidates(target)]
    return bool(values) and all(
        isinstance(v, ast.expr) and isinstance(classify(v, lambda e: []).device, CurrentDevice) for v in values
    )


def _holds_a_model(file: CheckedFile, owner: ast.expr, loads: set[int], depth: int = 0) -> bool:
    """`from_pretrained(...).to(...)`, or a name every binding of which is a model load, or a PEFT
    wrapper of one (`model = get_peft_model(model, config)`, as DPL006 follows it)."""
    if isinstance(owner, ast.Call):
        wrapped = wrapped_model(owner)
        if wrapped is not None and depth < 3:
            return _holds_a_model(file, wrapped, loads, depth + 1)
        return id(owner) in loads
    if not isinstance(owner, (ast.Name, ast.Attribute)):
        return False
    values = [c.value for c in file.resolver.candidates(owner)]
    return bool(values) and all(isinstance(v, ast.Call) and _holds_a_model(file, v, loads, depth) for v in values)


def _in_device_block(file: CheckedFile, node: ast.AST) -> bool:
    """Inside `with torch.cuda.device(local_rank):`, which makes that GPU current."""
    return any(
        isinstance(ancestor, (ast.With, ast.AsyncWith))
        and any(
            isinstance(item.context_expr, ast.Call) and (dotted(item.context_expr.func) or "").endswith("cuda.device")
            for item in ancestor.items
        )
        for ancestor in file.resolver.ancestors(node)
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
    if _in_device_block(file, load):
        return True
    binding = [
        call
        for call in file.resolver.index.calls
        if (name := last_segment(dotted(call.func) or "")) in _MAYBE_SETS_DEVICE
        or (name == "init_process_group" and keyword(call, "device_id") is not None)
    ]
    return bool(binding) and device_map.analysis.runs_before(load, binding)
