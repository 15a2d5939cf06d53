"""What a loaded model is handed to: the kinds of consumer `flow` finds. Kept apart from the flow
analysis so a cached result can be read back without importing it."""

from __future__ import annotations

import ast
import enum

from placement_lint.records import NamedTuple


class ConsumerKind(enum.Enum):
    TRAINER = "trainer"
    PREPARE = "prepare"
    DEEPSPEED = "deepspeed.initialize"
    WRAPPER = "wrapper"  # DDP(...), FSDP(...), fully_shard(...)
    INFERENCE = "inference"


class Consumer(NamedTuple):
    kind: ConsumerKind
    name: str  # as written: "SFTTrainer", "accelerator.prepare", "DDP"
    node: ast.AST | None  # None for a consumer in another file: then `location` says where
    location: str | None = None  # "train.py:42", for a consumer in an importer of this module
    # The statement that made the model part of the one this consumer takes (`model.teacher = teacher`,
    # `setattr(model, "ref", ref)`): the model is trained with it as a submodule. None: taken itself.
    attached: ast.stmt | None = None

    @property
    def trains(self) -> bool:
        return self.kind is not ConsumerKind.INFERENCE

    @property
    def where(self) -> str:
        """For a message: `line 42` in this file, `train.py:42` in an importer."""
        if self.location is not None or self.node is None:
            return self.location or "another file"
        return f"line {self.node.lineno}"  # type: ignore[attr-defined]

    def elsewhere(self, path: str) -> Consumer:
        """This consumer as seen from a module whose function returned the model to it: located, without a node."""
        return self if self.node is None else Consumer(self.kind, self.name, None, f"{path}:{self.node.lineno}")  # type: ignore[attr-defined]
