"""Items of a tuple a first-party helper returns, followed to where its importers unpack them:
`model, tokenizer = utils.load_model(args)` sends item 0 to the trainer, item 1 elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.flow import ModelFlow, returned_item, unpacked_positions
from placement_lint.analysis.names import ImportTable
from placement_lint.context.repo import build_repo_context
from placement_lint.distributed import SINGLE
from placement_lint.settings import Settings

from helpers import CODES

LOADER = """
from transformers import AutoModelForCausalLM, AutoTokenizer

def load_model(name):
    tokenizer = AutoTokenizer.from_pretrained(name)
    model = AutoModelForCausalLM.from_pretrained(name)
    return model, tokenizer
"""


def _flow(source: str, remote: dict[str, tuple[Consumer, ...]]) -> tuple[ModelFlow, ast.Module]:
    module = ast.parse(source)
    resolver = Resolver(module, SINGLE)
    return ModelFlow(module, ImportTable.of(module, resolver.index.nodes), resolver, remote), module


def _load_call(module: ast.Module) -> ast.Call:
    return next(
        n
        for n in ast.walk(module)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "from_pretrained" and "AutoModel" in ast.unparse(n.func)
    )


def test_an_item_of_a_returned_tuple_reaches_what_importers_do_with_that_item_only() -> None:
    trainer = Consumer(ConsumerKind.TRAINER, "SFTTrainer", None, "train.py:9")
    other = Consumer(ConsumerKind.INFERENCE, "tokenizer(...)", None, "train.py:10")
    flow, module = _flow(LOADER, {returned_item("load_model", 0): (trainer,), returned_item("load_model", 1): (other,)})
    assert flow.consumers(_load_call(module)) == [trainer]


def test_the_whole_value_of_a_helper_is_not_an_item_of_it() -> None:
    trainer = Consumer(ConsumerKind.TRAINER, "SFTTrainer", None, "train.py:9")
    flow, module = _flow(LOADER, {"load_model": (trainer,)})
    assert flow.consumers(_load_call(module)) == []


def test_unpacked_positions() -> None:
    module = ast.parse("a, b = f()\nc = f()\nd, *e = f()\nx = y = f()\n")
    resolver = Resolver(module, SINGLE)
    calls = [n for n in ast.walk(module) if isinstance(n, ast.Call)]
    positions = sorted((c.lineno, tuple(unpacked_positions(c, resolver))) for c in calls)
    assert positions == [(1, (0, 1)), (2, ()), (3, ()), (4, ())]


def _repo(tmp_path: Path, caller: str) -> dict[str, tuple[Consumer, ...]]:
    (tmp_path / ".git").mkdir()
    (tmp_path / "model_utils.py").write_text(LOADER)
    (tmp_path / "train.py").write_text(caller)
    (tmp_path / "run.sh").write_text("#!/bin/bash\ntorchrun --nproc_per_node 2 train.py\n")
    built = build_repo_context(tmp_path, Settings(root=tmp_path, codes=CODES), str)
    return built.consumers.get((tmp_path / "model_utils.py").resolve(), {})


def test_an_importer_unpacking_the_tuple_records_each_item(tmp_path: Path) -> None:
    found = _repo(
        tmp_path,
        "from trl import SFTTrainer\nimport model_utils\n"
        "model, tokenizer = model_utils.load_model('m')\nSFTTrainer(model=model, processing_class=tokenizer).train()\n",
    )
    assert [c.name for c in found[returned_item("load_model", 0)]] == ["SFTTrainer"]
    assert returned_item("load_model", 1) not in found


def test_a_starred_unpacking_records_no_item(tmp_path: Path) -> None:
    found = _repo(
        tmp_path,
        "from trl import SFTTrainer\nfrom model_utils import load_model\n"
        "model, *rest = load_model('m')\nSFTTrainer(model=model).train()\n",
    )
    assert not any(key.startswith("load_model[") for key in found)
