"""Where a loaded model goes: a trainer, `accelerator.prepare`, a DDP/FSDP wrapper, or only inference.

We follow the value of a loader call through assignments, re-bindings by wrappers
(`get_peft_model`, `prepare_model_for_kbit_training`), and helper functions that return it, within
one file.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.names import ImportTable, dotted, last_segment

MODEL_ARGUMENTS = (
    "model",
    "ref_model",
    "reward_model",
    "reward_funcs",
    "value_model",
    "teacher_model",
    "policy",
    "ref_policy",
    "model_init",
)
WRAPPERS = {
    "get_peft_model",
    "prepare_model_for_kbit_training",
    "prepare_model_for_int8_training",
    "PeftModel.from_pretrained",
    "PeftModelForCausalLM.from_pretrained",
    "AutoModelForCausalLMWithValueHead.from_pretrained",
    "AutoModelForSeq2SeqLMWithValueHead.from_pretrained",
}
# Trainers that load a model id string themselves and reset its device_map to None under MULTI_GPU
# and DEEPSPEED (trl >= 0.27; domain.md §1.4). Not under FSDP, and not the experimental
# OnlineDPO/XPO/NashMD/CPO/ORPO/BCO/GKD/MiniLLM trainers.
TRL_GUARDED_TRAINERS = {
    "SFTTrainer", "DPOTrainer", "GRPOTrainer", "RLOOTrainer", "KTOTrainer", "RewardTrainer",
    "DistillationTrainer", "ServerDistillationTrainer", "GOLDTrainer", "IWOPDTrainer", "SDFTTrainer",
    "SDPOTrainer", "SSDTrainer", "TPOTrainer", "AsyncGRPOTrainer",
}  # fmt: skip
_INFERENCE_METHODS = {"generate", "eval", "forward", "score", "encode", "sample"}


class ConsumerKind(enum.Enum):
    TRAINER = "trainer"
    PREPARE = "prepare"
    DEEPSPEED = "deepspeed.initialize"
    WRAPPER = "wrapper"  # DDP(...), FSDP(...), fully_shard(...)
    INFERENCE = "inference"


@dataclass(frozen=True)
class Consumer:
    kind: ConsumerKind
    name: str  # as written: "SFTTrainer", "accelerator.prepare", "DDP"
    node: ast.AST

    @property
    def trains(self) -> bool:
        return self.kind is not ConsumerKind.INFERENCE


class ModelFlow:
    def __init__(self, module: ast.Module, imports: ImportTable, resolver: Resolver) -> None:
        self.module = module
        self.imports = imports
        self.resolver = resolver
        self.index = resolver.index
        self.trainer_classes = _trainer_classes(self.index.classes)
        self._uses: dict[tuple[str, int], list[Consumer]] = {}

    def is_trainer(self, call: ast.Call) -> bool:
        name = last_segment(self.imports.qualify(call.func))
        return name in self.trainer_classes or name.endswith("Trainer")

    def trainer_name(self, call: ast.Call) -> str:
        return last_segment(self.imports.qualify(call.func))

    def consumers(self, value: ast.expr, depth: int = 0) -> list[Consumer]:
        """Every place the object produced by `value` (a call expression) flows into."""
        if depth > 4:
            return []
        parent = self.resolver.parent(value)
        consumer = self._consumer_of_argument(value, parent)
        if consumer is not None:
            if consumer.kind is ConsumerKind.WRAPPER and consumer.name in WRAPPERS:
                return self.consumers(consumer.node, depth + 1)  # type: ignore[arg-type]
            return [consumer]
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            found: list[Consumer] = []
            for target in targets:
                key = dotted(target)
                if key:
                    found += self._uses_of(key, parent, depth)
            return found
        if isinstance(parent, ast.Return):
            function = self.resolver.scope_of(parent)
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return [c for call in self._calls_to(function.name) for c in self.consumers(call, depth + 1)]
        return []

    def _uses_of(self, key: str, assignment: ast.AST, depth: int) -> list[Consumer]:
        cache_key = (key, id(assignment))
        if cache_key not in self._uses:
            self._uses[cache_key] = []  # a cycle through re-bindings ends here
            self._uses[cache_key] = self._find_uses(key, assignment, depth)
        return self._uses[cache_key]

    def _loads_in(self, key: str, scope: ast.AST) -> list[ast.Name | ast.Attribute]:
        """Reads of `key` in `scope`, including functions nested in it."""
        if scope is self.module:
            return self.index.loads_by_name.get(key, [])
        return [
            node
            for node in ast.walk(scope)
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and dotted(node) == key
        ]

    def _find_uses(self, key: str, assignment: ast.AST, depth: int) -> list[Consumer]:
        scope = self.resolver.scope_of(assignment)
        after = assignment.end_lineno or 0  # type: ignore[attr-defined]
        found: list[Consumer] = []
        for node in self._loads_in(key, scope):
            if (node.lineno, node.col_offset) <= (after, 0):
                continue
            parent = self.resolver.parent(node)
            consumer = self._consumer_of_argument(node, parent)
            if consumer is not None:
                if consumer.kind is ConsumerKind.WRAPPER and consumer.name in WRAPPERS:
                    found += self.consumers(consumer.node, depth + 1)  # type: ignore[arg-type]
                else:
                    found.append(consumer)
            elif isinstance(parent, ast.Attribute) and parent.attr in _INFERENCE_METHODS:
                found.append(Consumer(ConsumerKind.INFERENCE, f"{key}.{parent.attr}", parent))
            elif isinstance(parent, ast.Call) and parent.func is node:
                found.append(Consumer(ConsumerKind.INFERENCE, f"{key}(...)", parent))
            elif isinstance(parent, ast.Return):
                function = self.resolver.scope_of(parent)
                if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for call in self._calls_to(function.name):
                        found += self.consumers(call, depth + 1)
        return found

    def _consumer_of_argument(self, node: ast.AST, parent: ast.AST | None) -> Consumer | None:
        call: ast.AST | None = parent
        keyword_name: str | None = None
        if isinstance(parent, ast.keyword):
            keyword_name = parent.arg
            call = self.resolver.parent(parent)
        elif isinstance(parent, (ast.List, ast.Tuple)):  # reward_funcs=[model_a, model_b]
            outer = self.resolver.parent(parent)
            if isinstance(outer, ast.keyword):
                keyword_name = outer.arg
                call = self.resolver.parent(outer)
        if not isinstance(call, ast.Call) or call.func is node:
            return None
        qualified = self.imports.qualify(call.func) or ""
        written = dotted(call.func) or ""
        func = last_segment(qualified)
        positional = keyword_name is None and node in call.args
        if self.is_trainer(call):
            if keyword_name in MODEL_ARGUMENTS or (positional and call.args.index(node) == 0):  # type: ignore[arg-type]
                return Consumer(ConsumerKind.TRAINER, self.trainer_name(call), call)
            return None
        if func in ("prepare", "prepare_model") and isinstance(call.func, ast.Attribute):
            return Consumer(ConsumerKind.PREPARE, written, call)
        if func == "initialize" and "deepspeed" in qualified:
            return Consumer(ConsumerKind.DEEPSPEED, "deepspeed.initialize", call)
        if func in ("DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard"):
            return Consumer(ConsumerKind.WRAPPER, written, call)
        wrapper = _wrapper_name(written, qualified)
        if wrapper and (positional or keyword_name == "model"):
            return Consumer(ConsumerKind.WRAPPER, wrapper, call)
        if func == "pipeline":
            return Consumer(ConsumerKind.INFERENCE, "pipeline", call)
        return None

    def _calls_to(self, function: str) -> list[ast.Call]:
        return self.index.calls_by_name.get(function, [])


def _wrapper_name(written: str, qualified: str) -> str | None:
    for candidate in (written, qualified):
        tail = ".".join(candidate.split(".")[-2:])
        if tail in WRAPPERS:
            return tail
        if last_segment(candidate) in WRAPPERS:
            return last_segment(candidate)
    return None


def _trainer_classes(found: list[ast.ClassDef]) -> set[str]:
    """Classes in this file that subclass a trainer (`class SavePeftModelTrainer(Trainer)`)."""
    classes = {node.name: node for node in found}
    trainers: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, node in classes.items():
            if name in trainers:
                continue
            for base in node.bases:
                base_name = last_segment(dotted(base))
                if base_name in trainers or base_name.endswith("Trainer"):
                    trainers.add(name)
                    changed = True
                    break
    return trainers
