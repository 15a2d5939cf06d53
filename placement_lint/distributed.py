"""The vocabulary every layer shares: which distributed setup runs a piece of code."""

from __future__ import annotations

import enum

from placement_lint.records import NamedTuple


class Mode(enum.Enum):
    SINGLE = "single"  # one process: `python train.py`, or nothing says otherwise
    POSSIBLE = "possible"  # written for multi-process (LOCAL_RANK reads, Accelerator) but no proof
    DDP = "ddp"  # several processes, each with the whole model (torchrun, accelerate MULTI_GPU)
    DEEPSPEED = "deepspeed"
    FSDP = "fsdp"


class Setup(NamedTuple):
    mode: Mode
    zero_stage: int | None = None  # DeepSpeed only; None when no config shows it
    single_process: bool = False  # distributed machinery in one process (`python train.py --deepspeed ds.json`)

    @property
    def distributed(self) -> bool:
        return self.mode in (Mode.DDP, Mode.DEEPSPEED, Mode.FSDP)

    @property
    def zero3(self) -> bool:
        return self.mode is Mode.DEEPSPEED and self.zero_stage == 3

    @property
    def accelerate_type(self) -> str:
        """accelerate's `DistributedType` name for this setup."""
        return {
            Mode.DDP: "MULTI_GPU",
            Mode.DEEPSPEED: "DEEPSPEED",
            Mode.FSDP: "FSDP",
        }.get(self.mode, "NO")

    def describe(self) -> str:
        if self.mode is Mode.DEEPSPEED:
            if self.zero_stage is None:
                return "DeepSpeed"
            return f"DeepSpeed ZeRO-{self.zero_stage}"
        if self.mode is Mode.DDP and self.single_process:
            # accelerate's MULTI_GPU with num_processes 1, `torchrun --nproc_per_node 1`: a process group of one.
            return "DDP in one process"
        return {
            Mode.DDP: "multi-process DDP",
            Mode.FSDP: "FSDP",
            Mode.SINGLE: "a single process",
            Mode.POSSIBLE: "possibly several processes",
        }[self.mode]


SINGLE = Setup(Mode.SINGLE)

# The names `--context`, the pragma and the config accept.
NAMED_SETUPS: dict[str, Setup] = {
    "single": SINGLE,
    "ddp": Setup(Mode.DDP),
    "deepspeed": Setup(Mode.DEEPSPEED),
    "zero1": Setup(Mode.DEEPSPEED, 1),
    "zero2": Setup(Mode.DEEPSPEED, 2),
    "zero3": Setup(Mode.DEEPSPEED, 3),
    "fsdp": Setup(Mode.FSDP),
}
