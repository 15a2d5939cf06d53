"""DPL008 zero3-config-after-model-load."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from placement_lint.analysis.names import dotted
from placement_lint.rules.base import (
    CheckedFile,
    Message,
    Rule,
    Violation,
    reachable_under,
    trl_config_call,
    zero3_live_at_load,
)

if TYPE_CHECKING:
    from placement_lint.analysis.placements import ModelLoad
    from placement_lint.context.evidence import Context

# TrainingArguments, HfDeepSpeedConfig, Accelerator(), argument parsing, deepspeed.initialize; TRL configs below.
_ZERO3_CONFIG_TOKENS = (b"TrainingArguments", b"HfDeepSpeedConfig", b"Accelerator(", b"parse_args", b"deepspeed.initialize")


class Zero3ConfigAfterModelLoad(Rule):
    code = "DPL008"
    name = "zero3-config-after-model-load"
    summary = "Under DeepSpeed ZeRO-3, a model loaded before the config that makes ZeRO-3 visible to transformers"
    triggers = (b"from_pretrained",)
    # `model=`: a launched script handing its trainer a model that a function of another module loaded.
    anchors = (b"from_pretrained", b"from_config", b"model=")
    pre_check_tokens = (b"from_pretrained", b"from_config", *_ZERO3_CONFIG_TOKENS)

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        # The file itself builds what makes ZeRO-3 visible (or hands the model to DeepSpeed): modules that
        # only load under their importer's setup are judged at the importer.
        return (b"from_pretrained" in raw or b"from_config" in raw) and (
            any(t in raw for t in _ZERO3_CONFIG_TOKENS) or trl_config_call(raw)
        )

    @classmethod
    def could_fire_when_launched(cls, raw: bytes) -> bool:
        """A launched script may load its model through a function of another module of the repository
        (`model = build_model(args)`), then hand it on (`Trainer(model=model)`): what makes ZeRO-3
        visible and that keyword are enough."""
        return cls.could_fire(raw) or (b"model=" in raw and (any(t in raw for t in _ZERO3_CONFIG_TOKENS) or trl_config_call(raw)))

    valid = (
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        'args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})\n'
        'model = AutoModelForCausalLM.from_pretrained("m")\nTrainer(model=model, args=args).train()\n',
    )
    invalid = (
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        'model = AutoModelForCausalLM.from_pretrained("m")\n'
        'args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})\n'
        "Trainer(model=model, args=args).train()\n",
    )

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        reported: set[int] = set()
        for variant in file.contexts.variants():
            if not variant.setup.zero3 or variant.override is not None:
                continue  # an override says ZeRO-3 but not where its config is built
            analysis = file.analysis_for(variant.setup, variant.arguments)
            # Loads through another module's functions only in a launched script (its pre-check reads
            # every script that builds the config, with or without a load written in it).
            launched = any(e.origin == "launch" for e in variant.evidence)
            for load in [*analysis.model_loads, *(analysis.imported_model_loads if launched else ())]:
                if id(load.call) in reported or not load.order_known or load.trained is False:
                    continue
                if load.quantized:  # transformers never uses zero.Init for a quantized model, whatever the order
                    continue
                if not _runs_under(file, load, variant):
                    continue  # in a branch this ZeRO-3 launch does not take (`if args.train_type == "lora":`)
                context = next(
                    (c for c in file.contexts.contexts_at(load.call) if c.setup.zero3 and c.arguments == variant.arguments), None
                )
                if context is None or zero3_live_at_load(load, context):
                    continue  # built after the config, or an importer builds it before it calls in here
                config = analysis.first_zero3_config_after(load.call)
                if config is None:
                    later = "no TrainingArguments, TRL config, Accelerator or HfDeepSpeedConfig exists when it loads"
                    advice = "create HfDeepSpeedConfig(ds_config) (or the TrainingArguments) before the load and keep a reference to it"
                else:
                    later = f"{dotted(config.func) or 'the config'}(...) is only created at line {config.lineno}"
                    advice = f"create {dotted(config.func) or 'it'}(...) before the load and keep it alive"
                reported.add(id(load.call))
                # A function of another module that loads the model: where, so the reader finds the load.
                inner = tuple(
                    ("loads with", f"{step.name} in {step.function}, {step.path}:{step.call.lineno}")
                    for step in load.loader.through
                )
                message = Message(
                    f"{load.loader.name}(...) runs before transformers knows of ZeRO-3: no zero.Init, a full copy per rank",
                    help=advice,
                    facts=(
                        *inner,
                        ("why", later),
                        (
                            "effect",
                            "the load cannot use deepspeed.zero.Init, so every rank materialises the whole model before "
                            "DeepSpeed partitions it (N full copies in CPU RAM, out of memory on big models), and the "
                            "ZeRO-3 check on device_map is skipped",
                        ),
                    ),
                )
                yield self.violation(file, load.call.func, message, None, context, load.consumers, "load")


def _runs_under(file: CheckedFile, load: ModelLoad, context: Context) -> bool:
    """The launch behind `context` can run the load: no condition around it rules it out, and, in a
    helper, some call of the helper in this file sits in a branch the launch takes (`load_lora(args)`
    only under `if args.train_type == "lora":` does not run under a `--train_type all` launch)."""
    setup, arguments = context.setup, context.arguments
    if not reachable_under(file, load.call, setup, arguments):
        return False
    function = file.resolver.scope_of(load.call)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    calls = file.resolver.index.calls_by_name.get(function.name, [])
    return not calls or any(reachable_under(file, call, setup, arguments) for call in calls)
