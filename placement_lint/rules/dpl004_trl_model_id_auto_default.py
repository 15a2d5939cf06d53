"""DPL004 trl-model-id-auto-default."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from placement_lint.analysis.names import TRL_GUARDED_TRAINERS, argument, dotted, keyword, last_segment
from placement_lint.context.evidence import EFFICIENT_LOADING, Context
from placement_lint.distributed import Mode
from placement_lint.edits import Applicability, Edit
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.rules.base import (
    SPREAD_PREPARE_ERROR,
    CheckedFile,
    FixAvailability,
    Message,
    Rule,
    Violation,
    fix,
    spread_prepare_consequence,
    trl_config_call,
    under,
    zero3_load_consequence,
)

# TRL trainers that load a model id string with `device_map="auto"` unless the kwargs name one, and
# never reset it for a distributed run (domain.md §1.4 gaps; trl/experimental/*/*_trainer.py).
_ALWAYS_AUTO = {"OnlineDPOTrainer", "XPOTrainer", "NashMDTrainer"}
_AUTO_WHEN_KWARGS_SET = {"CPOTrainer", "ORPOTrainer", "BCOTrainer"}
_UNGUARDED_TEACHER = {"GKDTrainer", "MiniLLMTrainer"}
_KNOWN = _ALWAYS_AUTO | _AUTO_WHEN_KWARGS_SET | _UNGUARDED_TEACHER | TRL_GUARDED_TRAINERS
# Which config field each model argument's id string is loaded with.
# String `reward_funcs` are loaded with a plain from_pretrained (no "auto" default), so they are not here.
_KWARGS_FIELD = {"model": "model_init_kwargs", "ref_model": "model_init_kwargs", "teacher_model": "teacher_model_init_kwargs"}
_ID_LIKE = LazyPattern(r"(name_or_path|model_id|model_name|_path|_repo|checkpoint)$", re.I)


class _Kwargs(NamedTuple):
    """Where a trainer's init kwargs come from: a dict we can edit, a config call to add it to, or unknown."""

    value: ast.expr | None  # the kwargs expression, when one is set
    config: ast.Call | None  # the config construction, when it is in this file
    known: bool  # False: set somewhere we cannot see (a parser, a launch argument)


class TrlModelIdAutoDefault(Rule):
    code = "DPL004"
    name = "trl-model-id-auto-default"
    summary = 'A model id string given to a TRL trainer that loads it with `device_map="auto"` in a distributed run'
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"Trainer",)
    anchors = (b"Trainer", b"model=")
    valid = (
        # SFTTrainer resets device_map to None itself under DDP and DeepSpeed.
        'from trl import SFTConfig, SFTTrainer\nargs = SFTConfig("out", deepspeed="ds.json")\n'
        'SFTTrainer(model="Qwen/Qwen2.5-0.5B", args=args)\n',
        "from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer\n"
        'args = OnlineDPOConfig("out", deepspeed="ds.json", model_init_kwargs={"device_map": None})\n'
        'OnlineDPOTrainer(model="Qwen/Qwen2.5-0.5B", args=args)\n',
    )
    invalid = (
        "from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer\n"
        'args = OnlineDPOConfig("out", deepspeed="ds.json")\nOnlineDPOTrainer(model="Qwen/Qwen2.5-0.5B", args=args)\n',
    )

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        # A trainer subclass from another module need not say Trainer (`MyXPO(model=..., args=XPOConfig(...))`).
        return super().could_fire(raw) or (b"model=" in raw and trl_config_call(raw))

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        candidates = []
        for call in file.resolver.index.calls:
            arguments = list(_model_arguments(call))
            if not arguments:
                continue
            called = last_segment(file.imports.qualify(call.func)) or ""
            if called not in _KNOWN and not called[:1].isupper():
                continue  # not a class: no trainer
            # What the class is (read from the modules its bases come from) is asked only of a call
            # where a launch keeps many processes on the GPUs, and what its arguments hold only of a
            # trainer's: transformers' trainer.py calls forty classes with a first argument.
            contexts = [context for context in file.contexts.contexts_at(call) if _many_processes_on_gpus(context)]
            if contexts:
                candidates.append((call, arguments, called, contexts))
        if not candidates:
            return
        bases = _trainer_bases(file, {called for _, _, called, _ in candidates})
        for call, arguments, called, contexts in candidates:
            trainer = bases.get(called) or _imported_trainer(file, call.func)
            if trainer is None:
                continue
            given = [(name, ids) for name, value in arguments if (ids := self._id_strings(file, value))]
            for name, ids in given:
                field = _KWARGS_FIELD[name]
                if trainer in _UNGUARDED_TEACHER and name != "teacher_model":
                    continue  # the student goes through SFT/GRPO's guarded path
                for id_node in ids:
                    for context in contexts:
                        why = self._auto_stays(trainer, name, context)
                        if why is None:
                            continue
                        kwargs = _init_kwargs(file, call, field)
                        if not kwargs.known or self._names_device_map(file, kwargs):
                            break
                        if trainer in _AUTO_WHEN_KWARGS_SET and kwargs.value is None:
                            break  # without kwargs these trainers load on the CPU
                        yield self._violation(file, call, trainer, name, id_node, field, kwargs, context, why)
                        break

    @staticmethod
    def _auto_stays(trainer: str, argument_name: str, context: Context) -> str | None:
        """Why TRL keeps "auto" for this load in this setup, or None when it does not."""
        setup = context.setup
        if not _many_processes_on_gpus(context):
            return None
        if trainer in TRL_GUARDED_TRAINERS:
            before_auto = context.pinned_below("trl", "0.26")
            if before_auto:
                return None  # before TRL 0.26 an id string loads with no device_map, on the CPU
            pin = context.pinned_below("trl", "0.27") if setup.mode is Mode.DDP and before_auto is False else None
            if pin:  # TRL 0.26.x
                return f"with {pin}, {trainer} resets it to None only under DEEPSPEED (MULTI_GPU too since TRL 0.27)"
            if setup.mode is not Mode.FSDP:
                return None  # reset to None under MULTI_GPU and DEEPSPEED (TRL >= 0.27)
            if any(EFFICIENT_LOADING in e.text for e in context.deciding):
                return None  # rank 0 loads, transformers skips dispatch: no multi-device map reaches prepare()
            return f"{trainer} resets it to None only under MULTI_GPU and DEEPSPEED, not FSDP"
        if trainer in _UNGUARDED_TEACHER:
            return f"{trainer} loads the teacher with teacher_model_init_kwargs as given"
        return f"{trainer} (trl.experimental) never resets it for a distributed run"

    @staticmethod
    def _id_strings(file: CheckedFile, value: ast.expr) -> list[ast.expr]:
        elements = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        found = []
        for element in elements:
            candidates = file.resolver.candidates(element)
            if any(_is_id(c.value) for c in candidates) and not any(isinstance(c.value, ast.Call) for c in candidates):
                found.append(element)
        return found

    @staticmethod
    def _names_device_map(file: CheckedFile, kwargs: _Kwargs) -> bool:
        """The kwargs name a device_map (or might): then TRL uses it and DPL001 judges its value."""
        from placement_lint.analysis.dataflow import ABSENT

        if kwargs.value is None:
            return False
        values = file.resolver.key_candidates(kwargs.value, "device_map")
        return values is None or any(c.value is not ABSENT for c in values)

    def _violation(
        self, file: CheckedFile, call: ast.Call, trainer: str, name: str, id_node: ast.expr,
        field: str, kwargs: _Kwargs, context: Context, why: str,
    ) -> Violation:  # fmt: skip
        setup = context.setup
        if setup.zero3:
            consequence = zero3_load_consequence(
                context, SPREAD_PREPARE_ERROR.replace("accelerate raises", "accelerate then raises", 1)
            )
        else:
            consequence = spread_prepare_consequence(context, True)
        message = Message(
            f'{_trainer_written(call, trainer)}({name}=<model id>) loads {_shown(file, id_node)} with device_map="auto" {under(setup)}',
            consequence,
            f'add "device_map": None to {field}',
            (
                ("why", f"TRL's default for id strings since 0.26; {why}"),
                ("effect", "every process spreads its copy over every GPU"),
            ),
        )
        edit = _add_none_device_map(file, kwargs, field)
        made = fix(Applicability.SAFE, f'Add "device_map": None to {field}', edit) if edit else None
        return self.violation(file, id_node, message, made, context)


def _many_processes_on_gpus(context: Context) -> bool:
    """Where "auto" spreads each process's copy over every GPU, if the trainer keeps it."""
    setup = context.setup
    return setup.distributed and not setup.single_process and not context.one_gpu_per_process


def _imported_trainer(file: CheckedFile, name: ast.expr) -> str | None:
    """The TRL trainer a class imported from the repository's modules subclasses (`CustomSFT` -> SFTTrainer)."""
    written = dotted(name)
    if not written:
        return None
    return next((base for base in file.ancestors(written) if base in _KNOWN), None)


def _trainer_bases(file: CheckedFile, called: set[str]) -> dict[str, str]:
    """TRL trainer names, and this file's subclasses of them (also through a class imported from the
    repository) among the `called` classes and their bases here, mapped to the TRL trainer they
    behave as. Only those: each other class's bases would be looked up in the modules they come from
    (modeling_utils.py's mixins: 30 ms), and what a class resolves to depends only on its bases."""
    bases = {name: name for name in _KNOWN}
    written = {node.name: node for node in file.resolver.index.classes}
    wanted = [name for name in called if name in written]
    for name in wanted:  # grows as it goes: the bases written here of each class wanted
        for base in written[name].bases:
            below = last_segment(dotted(base)) or ""
            if below in written and below not in wanted:
                wanted.append(below)
    classes = {name: node for name, node in written.items() if name in wanted}  # in the file's order
    for _ in range(len(classes)):
        changed = False
        for name, node in classes.items():
            if name in bases:
                continue
            for base in node.bases:
                found = bases.get(last_segment(dotted(base)) or "") or _imported_trainer(file, base)
                if found:
                    bases[name] = found
                    changed = True
                    break
        if not changed:
            break
    return bases


def _trainer_written(call: ast.Call, trainer: str) -> str:
    written = last_segment(dotted(call.func)) or trainer
    return written if written == trainer else f"{written} (a {trainer})"


def _model_arguments(call: ast.Call) -> Iterator[tuple[str, ast.expr]]:
    for name in _KWARGS_FIELD:
        value = argument(call, name, 0) if name == "model" else keyword(call, name) and keyword(call, name).value  # type: ignore[union-attr]
        if value is not None:
            yield name, value


def _is_id(value: object) -> bool:
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str) and bool(value.value)
    if isinstance(value, ast.Attribute):  # `model_args.model_name_or_path`, unresolved: a command-line argument
        return bool(_ID_LIKE.search(value.attr))
    return False


def _shown(file: CheckedFile, node: ast.expr) -> str:
    start, end = file.source.node_span(node)
    text = file.source.text[start:end]
    return text if len(text) <= 40 else text[:37] + "..."


def _init_kwargs(file: CheckedFile, call: ast.Call, field: str) -> _Kwargs:
    """The trainer's `field` (model_init_kwargs ...): on the trainer (TRL <= 0.11), on the config call,
    or assigned to the config object (`training_args.model_init_kwargs = model_kwargs`)."""
    on_trainer = keyword(call, field)
    if on_trainer is not None:
        return _Kwargs(on_trainer.value, None, True)
    config = argument(call, "args", 1)
    if config is None:
        return _Kwargs(None, None, True)  # the trainer builds a default config: no kwargs
    if any(name == field and where for name, _, where in file.resolver.arguments):
        return _Kwargs(None, None, False)  # passed on the launch's command line
    key = dotted(config)
    if key is not None:
        assigned = file.resolver.bindings(f"{key}.{field}", call)
        if assigned:
            values = [b.value for b in assigned if isinstance(b.value, ast.expr)]
            return _Kwargs(values[0], None, True) if len(values) == 1 else _Kwargs(None, None, False)
    calls = [c.value for c in file.resolver.candidates(config) if isinstance(c.value, ast.Call)]
    if len(calls) == 1:
        found = keyword(calls[0], field)
        return _Kwargs(found.value if found else None, calls[0], True)
    # A config from a parser (TrlParser, HfArgumentParser): the field keeps its default, None,
    # unless the command line sets it, which the launch arguments above would show.
    return _Kwargs(None, None, True)


def _add_none_device_map(file: CheckedFile, kwargs: _Kwargs, field: str) -> Edit | None:
    value = kwargs.value
    if isinstance(value, ast.Dict):
        if not value.keys:
            start, end = file.source.node_span(value)
            return Edit(start, end, '{"device_map": None}')
        start, _ = file.source.node_span(value)
        return Edit(start + 1, start + 1, '"device_map": None, ')
    if isinstance(value, ast.Call) and dotted(value.func) == "dict" and not value.args:
        _, end = file.source.node_span(value)
        separator = ", " if value.keywords else ""
        return Edit(end - 1, end - 1, f"{separator}device_map=None")
    if value is None and kwargs.config is not None:
        config = kwargs.config
        _, end = file.source.node_span(config)
        separator = ", " if config.args or config.keywords else ""
        return Edit(end - 1, end - 1, f'{separator}{field}={{"device_map": None}}')
    return None
