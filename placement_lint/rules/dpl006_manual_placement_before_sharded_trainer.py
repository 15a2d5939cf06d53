"""DPL006 manual-placement-before-sharded-trainer."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.analysis.names import SELF_RETURNING, dotted, keyword, last_segment
from placement_lint.distributed import SINGLE, Mode
from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.patterns import LazyPattern
from placement_lint.rules.base import (
    PEFT_WRAPPERS,
    CheckedFile,
    FixAvailability,
    Message,
    Rule,
    Violation,
    fix,
    moved_call,
    under,
    wrapped_model,
    written,
)

if TYPE_CHECKING:
    from placement_lint.analysis.dataflow import Candidate
    from placement_lint.analysis.placements import ModelLoad

_DTYPES = {"float16", "half", "bfloat16", "float32", "float", "float64", "double"}
# These hand back the transformers model itself; the others wrap it in a new module, whose own `.to()` and
# `.cuda()` are torch's and never reach transformers' bitsandbytes checks.
_SAME_MODEL = {"prepare_model_for_kbit_training", "prepare_model_for_int8_training"}
# How a bitsandbytes load is written (PlacementAnalysis._quantized): one of these passed as a keyword
# or a kwargs key. A mention in a docstring, an import or an annotation is none of these.
_QUANTIZED_LOAD = LazyPattern(rb"""(?:load_in_[48]bit|quantization_config)(?:\s*=[^=]|["']\s*[:\]])""")
_PLACERS = (
    b"Trainer(",
    b".prepare(",
    b"prepare_model(",
    b"deepspeed.initialize",
    b"load_in_",
    b"quantization_config",  # a quantized load may name no BitsAndBytesConfig (TRL's get_quantization_config)
    b"BitsAndBytesConfig",
    b"_full_eval",
)
_SHARDING_CONSUMERS = (ConsumerKind.TRAINER, ConsumerKind.PREPARE, ConsumerKind.DEEPSPEED)
_QUANTIZATION_ARGUMENTS = ("quantization_config", "load_in_4bit", "load_in_8bit")


class ManualPlacementBeforeShardedTrainer(Rule):
    code = "DPL006"
    name = "manual-placement-before-sharded-trainer"
    summary = "`model.to(device)` / `model.cuda()` before ZeRO-3 or FSDP shards the model, or a cast of a bitsandbytes model"
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b".to(", b".cuda(")
    anchors = (b"from_pretrained",)
    pre_check_tokens = (b"from_pretrained", *_PLACERS, b"return", b"trainer", b"load_in_", b"quantization_config", b"_full_eval")
    context_free = True  # casting a bitsandbytes model fails in any setup
    valid = (
        # Single process: the Trainer moves it again, harmlessly.
        'from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\nmodel = AutoModelForCausalLM.from_pretrained("m")\n'
        'model.to("cuda")\nTrainer(model=model, args=TrainingArguments("out")).train()\n',
    )
    invalid = (
        'from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\nargs = TrainingArguments("out", fsdp="full_shard")\n'
        'model = AutoModelForCausalLM.from_pretrained("m")\nmodel.to("cuda")\nTrainer(model=model, args=args).train()\n',
    )

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        """A placement, a loaded model, and something that places it (a trainer, prepare, DeepSpeed) or a bitsandbytes load."""
        return super().could_fire(raw) and b"from_pretrained" in raw and any(token in raw for token in _PLACERS)

    @classmethod
    def could_fire_when_launched(cls, raw: bytes) -> bool:
        # A helper that returns the model to an importer that trains it, or a trainer subclass from
        # another module (`from trainers import CustomSFT`): only the launch context can tell.
        return super().could_fire(raw) and b"from_pretrained" in raw and (b"return" in raw or b"trainer" in raw)

    @classmethod
    def could_fire_without_context(cls, raw: bytes) -> bool:
        # The rare tokens first: this runs on every file that mentions from_pretrained.
        quantized = (b"load_in_" in raw or b"quantization_config" in raw) and _QUANTIZED_LOAD.search(raw) is not None
        return (quantized or b"_full_eval" in raw) and cls.could_fire(raw)

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        loads = {id(load.call): load for load in file.analysis_for(SINGLE).model_loads}
        if not loads:
            return
        full_eval = self._full_eval(file)
        holders = _model_holders(file, loads)
        for method in ("to", "cuda"):
            for call in file.resolver.index.calls_by_name.get(method, []):
                if not isinstance(call.func, ast.Attribute):
                    continue
                owner = call.func.value
                if not isinstance(owner, ast.Call) and dotted(owner) not in holders:
                    continue  # batches and tensors: only names a model is assigned to are resolved
                held = self._model_of(file, owner, loads, 0)
                if held is None:
                    continue
                load, wrapped = held
                move = self._move(call)
                if move is None:
                    continue
                violation = self._judge(file, call, load, move, full_eval, wrapped)
                if violation is not None:
                    yield violation

    def _judge(
        self, file: CheckedFile, call: ast.Call, load: ModelLoad, move: str, full_eval: ast.keyword | None, wrapped: bool
    ) -> Violation | None:
        placement = _placement_text(file, call)
        meets, always = (
            _quantized_paths(file, call, load)
            if move in ("dtype", "cuda") and load.quantized and not wrapped and (move == "dtype" or _eight_bit(file, load))
            else (False, False)
        )
        if meets:
            error = (
                '"You cannot cast a bitsandbytes model in a new `dtype`"'
                if move == "dtype"
                else '"Calling `cuda()` is not supported for `8-bit` quantized models"'
            )
            message = Message(
                f"{placement} on a bitsandbytes-quantized model ({load.loader.name}, line {load.loader.line})",
                f"transformers raises {error}",
                "remove it: the quantized weights are already placed and typed by the load",
            )
            # A run that reaches the cast without a quantized load may need it (a 16-bit run's cast).
            return self.violation(file, call, message, self._fix(file, call) if always else None, None)
        if move == "dtype":
            return None
        trainers = [c for c in load.consumers if c.kind in _SHARDING_CONSUMERS and _before(call, c.node)]
        if not trainers:
            return None
        consumer = trainers[0]
        for context in file.contexts.contexts_at(call):
            setup = context.setup
            # ZeRO-0/1/2 engines move the whole module to the GPU themselves: there the move is only redundant.
            if (setup.zero3 or setup.mode is Mode.FSDP) and not setup.single_process:
                if setup.zero3 and load.after_zero3_config:
                    break  # built under zero.Init: .to() moves only the partition placeholders
                framework = "DeepSpeed ZeRO-3" if setup.zero3 else "FSDP"
                message = Message(
                    f"{placement} puts a full copy of the model on each rank's GPU before {consumer.name} shards it {under(setup)}",
                    help="remove it",
                    facts=(
                        *_attachment_facts(file, consumer),
                        (
                            "effect",
                            f"{framework} places the model itself (the Trainer skips its own move for it), so every rank "
                            "holds the whole unsharded model on its GPU first (out of memory on big models; on "
                            'transformers 4.x with FSDP efficient loading, "Cannot copy out of meta tensor")',
                        ),
                    ),
                )
                violation = self.violation(file, call, message, self._fix(file, call), context, (consumer,))
                return _with_attachment(file, violation, consumer)
        if full_eval is not None and consumer.kind is ConsumerKind.TRAINER:
            message = Message(
                f"{placement} puts the full-precision model on the GPU before {full_eval.arg}=True casts it "
                f"(line {full_eval.lineno})",
                help="remove it",
                facts=(
                    (
                        "effect",
                        f"{consumer.name} casts the model before placing it, so the fp32 copy lands on the GPU "
                        "first (wasted memory, out of memory on big models)",
                    ),
                ),
            )
            return self.violation(file, call, message, self._fix(file, call), None, (consumer,))
        return None

    def _fix(self, file: CheckedFile, call: ast.Call) -> Fix | None:
        statement = file.resolver.parent(call)
        owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        standalone = isinstance(statement, ast.Expr)
        rebinding = (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and owner is not None
            and dotted(statement.targets[0]) == owner
        )
        if not ((standalone and isinstance(call.func.value, (ast.Name, ast.Attribute))) or rebinding):  # type: ignore[union-attr]
            # `teacher = X.from_pretrained(...).to(device)`, `student.teacher = teacher.cuda()`,
            # `teacher.requires_grad_(False).cuda()`: the module without its move (both return the module
            # itself), and the rest of the chain kept.
            if not isinstance(call.func, ast.Attribute):
                return None
            _, start = file.source.node_span(call.func.value)
            _, end = file.source.node_span(call)
            return fix(Applicability.UNSAFE, "Remove the manual placement", Edit(start, end, ""))
        edit = file.remove_statement(statement)  # type: ignore[arg-type]
        return fix(Applicability.UNSAFE, "Remove the manual placement", edit) if edit else None

    def _model_of(
        self, file: CheckedFile, owner: ast.expr, loads: dict[int, ModelLoad], depth: int
    ) -> tuple[ModelLoad, bool] | None:
        """The model load `owner` holds here, and whether through a wrapper that is a module of its own
        (a PEFT model), not the transformers model itself."""
        if depth > 6:
            return None
        if isinstance(owner, ast.Call):
            candidates = [owner]
        else:
            candidates = []
            for candidate in file.resolver.candidates(owner):
                if isinstance(candidate.value, ast.Call):
                    candidates.append(candidate.value)
                elif candidate.value is None and candidate.via:
                    for item in _returned_items(file, owner, candidate.via[-1]):
                        found = self._model_of(file, item, loads, depth + 1)
                        if found is not None:
                            return found
        for value in candidates:
            if id(value) in loads:
                return loads[id(value)], False
            if isinstance(value.func, ast.Attribute) and value.func.attr in SELF_RETURNING:
                # `X.from_pretrained(...).eval().requires_grad_(False)`: the module itself
                found = self._model_of(file, value.func.value, loads, depth + 1)
                if found is not None:
                    return found
            model = wrapped_model(value)
            if model is not None:
                found = self._model_of(file, model, loads, depth + 1)
                if found is not None:
                    return found[0], found[1] or last_segment(dotted(value.func)) not in _SAME_MODEL
        return None

    @staticmethod
    def _move(call: ast.Call) -> str | None:
        """ "cuda" for .cuda(), "dtype" for a cast, "device" for a move to a GPU, None for the CPU or a non-move."""
        assert isinstance(call.func, ast.Attribute)
        if call.func.attr == "cuda":
            return "cuda"
        if keyword(call, "dtype") is not None and keyword(call, "device") is None and not call.args:
            return "dtype"
        target = call.args[0] if call.args else (keyword(call, "device").value if keyword(call, "device") else None)  # type: ignore[union-attr]
        if target is None:
            return None
        if isinstance(target, ast.Attribute) and (target.attr in _DTYPES or target.attr in ("dtype", "torch_dtype")):
            return "dtype"  # `torch.bfloat16`, or a dtype read off something (`model.dtype`)
        if isinstance(target, ast.Constant):
            if isinstance(target.value, str):
                return None if target.value.startswith(("cpu", "meta")) else "device"
            return "device" if isinstance(target.value, int) else None
        return "device"

    @staticmethod
    def _full_eval(file: CheckedFile) -> ast.keyword | None:
        for call in file.resolver.index.calls:
            for name in ("fp16_full_eval", "bf16_full_eval"):
                found = keyword(call, name)
                if found is not None and isinstance(found.value, ast.Constant) and found.value.value is True:
                    return found
        return None


def _attachment_facts(file: CheckedFile, consumer: Consumer) -> tuple[tuple[str, str], ...]:
    if consumer.attached is None:
        return ()
    return (
        (
            "attached",
            f"{written(file, consumer.attached)}, line {consumer.attached.lineno}: a submodule of the model "
            f"{consumer.name} takes, so it is sharded and trained with it",
        ),
    )


def _with_attachment(file: CheckedFile, violation: Violation, consumer: Consumer) -> Violation:
    """The statement that made the moved model part of the trained one, as a span of the finding's path."""
    if consumer.attached is None:
        return violation
    from placement_lint.rules.spans import ROLES, Related

    start, end = file.source.node_span(consumer.attached)
    row, column = file.source.position(start)
    end_row, end_column = file.source.position(end)
    span = Related("attached", file.display, row, column, end_row, end_column, "attached to the trained model")
    return violation._replace(related=tuple(sorted((*violation.related, span), key=lambda s: ROLES.index(s.role))))


def _model_holders(file: CheckedFile, loads: dict[int, ModelLoad]) -> set[str]:
    """Names that some statement binds to a model load, a PEFT wrapper call, or a call of a function of
    this file (which may return a load: `model = load_model(name)`) (the cheap filter)."""
    names: set[str] = set()
    functions = {node.name for node in file.resolver.index.functions}
    for node in file.resolver.index.nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            value = node.value
            if (
                id(value) in loads
                or last_segment(dotted(value.func)) in PEFT_WRAPPERS
                or _loads_inside(value, loads)
                or _innermost_callee(value) in functions
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                        key = dotted(element)
                        if key:
                            names.add(key)
    return names


def _placement_text(file: CheckedFile, call: ast.Call) -> str:
    """`model.to("cuda")`; a move chained on the load, `AutoModel.from_pretrained(...).cuda()` (its
    arguments would leave no room for the rest of the headline)."""
    loaded = moved_call(call)
    if loaded is None or not isinstance(loaded.func, ast.Attribute):
        return written(file, call, limit=40)
    arguments = written(file, call, limit=200)[len(written(file, call.func, limit=200)) :]
    shown = arguments if len(arguments) <= 24 else "(...)"
    return f"{written(file, loaded.func, limit=40)}(...).{call.func.attr}{shown}"


def _returned_items(file: CheckedFile, owner: ast.expr, binding: ast.AST) -> list[ast.expr]:
    """`model, tokenizer = load(name)` with `load` a function of this file that returns `model, tok`:
    the expressions its returns give for the item `owner` is bound to."""
    if not (isinstance(binding, ast.Assign) and len(binding.targets) == 1 and isinstance(binding.targets[0], ast.Tuple)):
        return []
    call = binding.value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return []
    written = dotted(owner)
    position = next((i for i, item in enumerate(binding.targets[0].elts) if dotted(item) == written), None)
    called = file.resolver.called_function(call, call.func.id)
    if position is None or called is None or called[1] is not None:
        return []
    return [
        node.value.elts[position]
        for node in ast.walk(called[0])
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) > position
    ]


def _innermost_callee(call: ast.Call) -> str | None:
    """`load_model` of `load_model(name).eval()`: the bare name the chain of calls starts with."""
    current: ast.expr = call
    while isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute):
        current = current.func.value
    return current.func.id if isinstance(current, ast.Call) and isinstance(current.func, ast.Name) else None


def _loads_inside(call: ast.Call, loads: dict[int, ModelLoad]) -> bool:
    """`model = AutoModel.from_pretrained(...).to(device)` and the like."""
    current: ast.AST = call
    while isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute):
        current = current.func.value
        if id(current) in loads:
            return True
    return False


def _before(call: ast.Call, consumer: ast.AST | None) -> bool:
    """The move comes first. A consumer in an importer (no node here) gets the model once the function
    that loads (and moves) it has returned."""
    if consumer is None:
        return True
    return (call.lineno, call.col_offset) < (consumer.lineno, consumer.col_offset)  # type: ignore[attr-defined]


def _eight_bit(file: CheckedFile, load: ModelLoad) -> bool:
    found = keyword(load.call, "load_in_8bit")
    if found is not None:
        return isinstance(found.value, ast.Constant) and found.value.value is True
    config = keyword(load.call, "quantization_config")
    if config is None:
        return False
    for candidate in file.resolver.candidates(config.value):
        value = candidate.value
        if isinstance(value, ast.Call):
            flag = keyword(value, "load_in_8bit")
            if flag is not None and isinstance(flag.value, ast.Constant) and flag.value.value is True:
                return True
    return False


def _quantized_paths(file: CheckedFile, call: ast.Call, load: ModelLoad) -> tuple[bool, bool]:
    """Whether the load is quantized on some path that reaches the cast, and on every such path. Each
    value of its quantization arguments is joined with the conditions of its path (`bnb_config = ...`
    under `if args.bits in [4, 8]:`), and a value whose conditions the cast's contradict (`if
    args.bits == 16:`) never meets it."""
    resolver = file.resolver
    reaching = resolver.guards_to(call, resolver.scope_of(call))
    if reaching is None:
        return False, False
    meets = False
    always = False
    for values in _quantization_values(file, load):
        if values is None:  # a splat whose keys are not known here
            meets = True
            continue
        live = [c for c in values if not (c.conditions and resolver.excludes(c.conditions, reaching))]
        quantized = [c for c in live if _quantizes(c.value)]
        meets = meets or bool(quantized)
        always = always or (bool(live) and len(quantized) == len(live))
    return meets, always


def _quantization_values(file: CheckedFile, load: ModelLoad) -> list[list[Candidate] | None]:
    """The values each quantization argument of the load can take (a keyword, or a key of a `**kwargs`)."""
    from placement_lint.analysis.dataflow import ABSENT  # the analyses load only when a file is checked

    found: list[list[Candidate] | None] = []
    for item in load.call.keywords:
        if item.arg in _QUANTIZATION_ARGUMENTS:
            found.append(file.resolver.candidates(item.value))
        elif item.arg is None:
            for name in _QUANTIZATION_ARGUMENTS:
                values = file.resolver.key_candidates(item.value, name)
                if values is None or any(c.value is not ABSENT for c in values):
                    found.append(values)
    return found


def _quantizes(value: object) -> bool:
    """A value that makes the load quantized: not None/False, not absent, and resolved to something (a
    name read of nothing the file binds, such as `self.bnb_config`, may well be None)."""
    from placement_lint.analysis.dataflow import ABSENT

    if value is None or value is ABSENT or isinstance(value, (ast.Name, ast.Attribute)):
        return False
    return not (isinstance(value, ast.Constant) and not value.value)
