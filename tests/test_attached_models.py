"""Where ModelFlow sends a model that is moved, frozen or aliased on the way, held by a module class of
the file, or kept (not prepared) by a trainer subclass of the file (issue 28, kind 3)."""

from __future__ import annotations

import ast

import pytest

from placement_lint.analysis.consumers import ConsumerKind
from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.flow import ModelFlow
from placement_lint.analysis.names import ImportTable
from placement_lint.distributed import SINGLE

HEADER = "from torch import nn\nfrom transformers import AutoModelForCausalLM, Trainer\n"


def _consumers(source: str, load_of: str = "teacher") -> list[tuple[ConsumerKind, str, int | None]]:
    module = ast.parse(HEADER + source)
    resolver = Resolver(module, SINGLE)
    flow = ModelFlow(module, ImportTable.of(module, resolver.index.nodes), resolver)
    load = next(
        n
        for n in ast.walk(module)
        if isinstance(n, ast.Call)
        and getattr(n.func, "attr", "") == "from_pretrained"
        and isinstance(n.args[0], ast.Constant)
        and n.args[0].value == load_of
    )
    return [(c.kind, c.name, c.attached.lineno if c.attached else None) for c in flow.consumers(load)]


@pytest.mark.parametrize(
    "source",
    [
        # chained at the load: the module methods return the model itself
        'teacher = AutoModelForCausalLM.from_pretrained("teacher").eval().requires_grad_(False).cuda()\nTrainer(model=teacher)\n',
        # moved inside the call that takes it
        'teacher = AutoModelForCausalLM.from_pretrained("teacher")\nTrainer(model=teacher.to("cuda"))\n',
        # another name for it
        'teacher = AutoModelForCausalLM.from_pretrained("teacher")\nmodel = teacher\nTrainer(model=model)\n',
    ],
)
def test_a_model_moved_frozen_or_renamed_on_the_way_still_reaches_its_trainer(source: str) -> None:
    assert [kind for kind, _, _ in _consumers(source)] == [ConsumerKind.TRAINER]


def test_a_helper_that_moves_the_model_before_returning_it_hands_it_to_the_callers_trainer() -> None:
    source = (
        'def load(device):\n    m = AutoModelForCausalLM.from_pretrained("teacher")\n    return m.to(device)\n'
        'student = AutoModelForCausalLM.from_pretrained("student")\nstudent.teacher = load("cuda")\nTrainer(model=student)\n'
    )
    assert _consumers(source) == [(ConsumerKind.TRAINER, "Trainer", 7)]


MODULE_CLASS = (
    "class Distiller(nn.Module):\n"
    "    def __init__(self, student, teacher=None, scorer=None):\n"
    "        super().__init__()\n"
    "        self.student = student\n"
    "        self.teacher = teacher\n"
    "        self._scorer = [scorer]\n"
    'student = AutoModelForCausalLM.from_pretrained("student")\n'
    'teacher = AutoModelForCausalLM.from_pretrained("teacher")\n'
)


@pytest.mark.parametrize("call", ["Distiller(student, teacher)", "Distiller(student, teacher=teacher)"])
def test_a_module_class_of_the_file_that_registers_the_model_takes_it_into_what_it_is_handed_to(call: str) -> None:
    assert _consumers(MODULE_CLASS + f"wrapper = {call}\nTrainer(model=wrapper)\n") == [(ConsumerKind.TRAINER, "Trainer", 11)]


def test_a_model_a_module_class_keeps_out_of_its_submodules_is_not_taken_with_it() -> None:
    assert _consumers(MODULE_CLASS + "Trainer(model=Distiller(student, scorer=teacher))\n") == []


TRAINER_CLASS = (
    "class KDTrainer(Trainer):\n"
    "    def __init__(self, teacher_model=None, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.teacher = teacher_model\n"
    "{extra}"
    'teacher = AutoModelForCausalLM.from_pretrained("teacher")\n'
    "KDTrainer(model=None, teacher_model=teacher)\n"
)


def test_a_teacher_a_trainer_subclass_only_stores_is_run_beside_the_trained_model() -> None:
    assert [kind for kind, _, _ in _consumers(TRAINER_CLASS.format(extra=""))] == [ConsumerKind.INFERENCE]


def test_a_teacher_a_trainer_subclass_prepares_is_sharded_with_it() -> None:
    extra = "    def setup(self):\n        self.teacher = self.accelerator.prepare_model(self.teacher)\n"
    assert [kind for kind, _, _ in _consumers(TRAINER_CLASS.format(extra=extra))] == [ConsumerKind.TRAINER]
