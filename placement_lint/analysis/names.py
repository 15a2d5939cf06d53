"""What a name in a call refers to: import aliases resolved to dotted qualified names."""

from __future__ import annotations

import ast


def dotted(expr: ast.AST) -> str | None:
    """`a.b.c` for a chain of attributes on a name, `Foo` for `Foo()` callee chains; None otherwise."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Call):
        # `PartialState().local_process_index`, `deepspeed.zero.Init(...)`: keep the callee's chain.
        inner = dotted(expr.func)
        if inner is None:
            return None
        parts.append(inner + "()")
        return ".".join(reversed(parts))
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


class ImportTable:
    """Local name -> qualified name, from every import in the module (any nesting level)."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        self.aliases: dict[str, str] = aliases if aliases is not None else {}

    @classmethod
    def of(cls, module: ast.Module, nodes: list[ast.AST] | list[ast.Import | ast.ImportFrom] | None = None) -> ImportTable:
        """`nodes`: the module's nodes in the index's order, or its imports alone (ModuleIndex.imports)."""
        table = cls()
        for node in nodes if nodes is not None else ast.walk(module):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        table.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        table.aliases.setdefault(top, top)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        table.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        return table

    def qualify(self, expr: ast.AST) -> str | None:
        """`tf.AutoModel` -> `transformers.AutoModel` when `import transformers as tf`."""
        name = dotted(expr)
        return None if name is None else self.qualify_dotted(name)

    def qualify_dotted(self, name: str) -> str:
        """`qualify` for a name already written out (`dotted`)."""
        head, _, rest = name.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return name
        return f"{target}.{rest}" if rest else target


def past_self_returning(expr: ast.expr) -> ast.expr:
    """What a chain of SELF_RETURNING calls is called on: `X.from_pretrained(...)` of
    `X.from_pretrained(...).eval().cuda()`, `teacher` of `teacher.eval()`; `expr` itself otherwise."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in SELF_RETURNING:
        expr = expr.func.value
    return expr


def last_segment(qualified: str | None) -> str:
    if not qualified:
        return ""
    return qualified.rsplit(".", 1)[-1].removesuffix("()")


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def argument(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    kw = keyword(call, name)
    if kw is not None:
        return kw.value
    if position is not None and len(call.args) > position:
        arg = call.args[position]
        if not isinstance(arg, ast.Starred):
            return arg
    return None


# Calls whose name says which device_map they give (`analysis.values` classifies them by it), so a
# definition of one in the repository is not followed: its name is what the library promises.
PER_PROCESS_CALLS = frozenset({"get_kbit_device_map", "current_device", "get_current_device", "get_local_device"})
SPREADING_CALLS = frozenset({"infer_auto_device_map"})
# nn.Module methods that return the module itself: `X.from_pretrained(...).eval().to(device)` is still
# the loaded model, and so is `teacher.to(device)` where its result is attached or returned.
SELF_RETURNING = frozenset({"to", "cuda", "cpu", "half", "float", "bfloat16", "double", "eval", "train", "requires_grad_"})
# Calls that take a loaded model and give back one that wraps it (or the same model prepared);
# `analysis.flow` follows the model through them. The rules read these tables without the analyses.
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
