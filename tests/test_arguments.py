"""A launch's script arguments bound to the script's parser fields (analysis.arguments)."""

from __future__ import annotations

import ast

import pytest

from placement_lint.analysis.arguments import UNDECIDED, bind, parser_fields

PARSERS = """
import argparse
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ModelArguments:
    use_4bit: bool = field(default=False)
    spread: Optional[bool] = True
    model_name_or_path: str = "gpt2"
    bits: int = 16


parser = argparse.ArgumentParser()
parser.add_argument("--use-lora", action="store_true")
parser.add_argument("--no-ds", dest="ds", action="store_false")
parser.add_argument("--q_lora", type=bool, default=False)
parser.add_argument("--checkpointing", type=str2bool, default=True)
parser.add_argument("--strtobool", type=lambda x: bool(strtobool(x)))
parser.add_argument("--exact", type=lambda x: str(x) == "True")
parser.add_argument("--big", type=lambda x: x.lower() == "true")
parser.add_argument("--layers", nargs="+", type=int)
parser.add_argument("--maybe", nargs="?", const=True, default=False)
"""


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("use_4bit", "", "True"),  # HfArgumentParser: a bare bool flag is True
        ("use_4bit", "yes", "True"),
        ("use_4bit", "False", "False"),
        ("use_4bit", "maybe", UNDECIDED),  # HfArgumentParser would refuse it
        ("no_spread", "", "False"),  # the complement HfArgumentParser adds for a field defaulting to True
        ("model_name_or_path", "True", "'True'"),  # text stays text
        ("bits", "4", "4"),
        ("bits", "four", UNDECIDED),
        ("use_lora", "", "True"),  # `--use-lora`, dashes as underscores
        ("no_ds", "", "False"),  # store_false under another dest
        ("q_lora", "False", "True"),  # type=bool: any non-empty text is True
        ("checkpointing", "no", "False"),
        ("big", "TRUE", "True"),
        ("big", "yes", "False"),  # the lambda's own test, not a general str-to-bool
        ("strtobool", "on", "True"),
        ("exact", "true", "False"),
        ("exact", "True", "True"),
        ("layers", "1", UNDECIDED),
        ("maybe", "", "True"),  # nargs="?" with const
        ("load_in_4bit", "true", "True"),  # a TRL ModelConfig field, wherever the parser is
    ],
)
def test_launch_values_follow_the_parser(name: str, text: str, expected: str) -> None:
    fields = parser_fields(ast.parse(PARSERS))
    target = {"no_spread": "spread", "no_ds": "ds"}.get(name, name)
    assert bind(fields, [(name, text)]) == {target: expected}


def test_defaults_follow_the_parser() -> None:
    fields = parser_fields(ast.parse(PARSERS))
    assert {name: fields[name].default for name in ("use_4bit", "spread", "use_lora", "ds", "checkpointing", "big")} == {
        "use_4bit": "False",
        "spread": "True",
        "use_lora": "False",
        "ds": "True",
        "checkpointing": "True",
        "big": "None",
    }


def test_arguments_no_parser_field_takes_are_left_out() -> None:
    assert bind(parser_fields(ast.parse(PARSERS)), [("output_dir", "out"), ("seed", "1")]) == {}


@pytest.mark.parametrize(
    "dynamic",
    [
        'for name in FLAGS:\n    parser.add_argument(f"--{name}", action="store_true")\n',
        "parser.add_argument(**SPEC)\n",
        'parser.add_argument("--x", dest=name)\n',
        "parser.set_defaults(**vars(defaults))\n",
    ],
)
def test_a_parser_the_tool_cannot_follow_decides_nothing(dynamic: str) -> None:
    fields = parser_fields(ast.parse(PARSERS + dynamic))
    assert bind(fields, [("use_4bit", "true"), ("use_lora", "")]) == {"use_4bit": UNDECIDED, "use_lora": UNDECIDED}
    assert all(field.default == UNDECIDED for field in fields.values())


def test_the_imported_modules_dataclasses_count() -> None:
    arguments = ast.parse("@dataclass\nclass ScriptArguments:\n    use_peft: bool = False\n    lora_r: int = 8\n")
    fields = parser_fields(ast.parse("parser = HfArgumentParser((ScriptArguments,))\n"), [arguments])
    assert bind(fields, [("use_peft", ""), ("lora_r", "16")]) == {"use_peft": "True", "lora_r": "16"}


def test_evidence_rows_of_another_shape_are_left_out() -> None:
    from placement_lint.analysis.arguments import fields_from

    good = ("use_4bit", "use_4bit", "bool", "False", "True", "", "", "dataclass")
    assert list(fields_from([good, ("x", "x", "bool"), ("y", 1, 2, 3, 4, 5, 6, 7)])) == ["use_4bit"]  # type: ignore[list-item]


@pytest.mark.parametrize(
    "source",
    [
        "parser.add_argument()\n",
        "parser.add_argument('--x', dest=1, action=Custom)\n",
        "@dataclass\nclass A:\n    x: 'bool' = field(default_factory=list)\n    y: int\n    z: Literal['a'] = 'a'\n",
        "parser.add_argument('--y', type=lambda: 1, nargs=N, const=C, default=f())\n",
    ],
)
def test_odd_parsers_do_not_crash(source: str) -> None:
    fields = parser_fields(ast.parse(source))
    bind(fields, [("x", ""), ("y", "1"), ("z", "b")])


def test_a_field_given_where_the_arguments_are_built_is_not_the_parsers() -> None:
    from placement_lint.analysis.dataflow import Resolver
    from placement_lint.distributed import Mode, Setup

    module = ast.parse(
        "@dataclass\nclass Args:\n    use_4bit: bool = False\n"
        "def main():\n    args = Args(use_4bit=True)\n    if args.use_4bit:\n        pass\n"
        "    training_args = TrainingArguments('out', deepspeed='ds.json')\n    if training_args.deepspeed:\n        pass\n"
    )
    tests = [node.test for node in ast.walk(module) if isinstance(node, ast.If)]
    resolver = Resolver(module, Setup(Mode.DDP), (("use_4bit", "False", "run.sh:1"),))
    assert [resolver.truth(test) for test in tests] == [True, True]


FIRE_SCRIPT = """
import fire


def train(base_model: str, fsdp_params: str = "", load_8bit: bool = False, lora_r: int = 8):
    pass


if __name__ == "__main__":
    fire.Fire(train)
"""


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("fsdp_params", "full_shard auto_wrap", "'full_shard auto_wrap'"),  # not a literal: the text itself
        ("load_8bit", "", "True"),  # `--load_8bit` alone
        ("load_8bit", "False", "False"),  # a Python literal
        ("load_8bit", "false", "'false'"),  # not one: fire keeps the text, which is truthy
        ("lora_r", "16", "16"),
        ("fsdp_params", "[a,b]", UNDECIDED),  # fire builds a container: not followed
    ],
)
def test_fire_reads_its_functions_parameters_as_options(name: str, text: str, expected: str) -> None:
    fields = parser_fields(ast.parse(FIRE_SCRIPT))
    assert bind(fields, [(name, text)]) == {name: expected}
    assert bind(fields, [("noload_8bit", "")]) == {"load_8bit": "False"}
    assert (fields["base_model"].default, fields["fsdp_params"].default) == (UNDECIDED, "''")


@pytest.mark.parametrize(
    "entry",
    ["fire.Fire(main)\nfire.Fire(train)\n", "fire.Fire(lambda: train())\n", "fire.Fire(train)\ntrain = wrap(train)\n"],
)
def test_fire_with_no_one_function_it_runs_makes_no_fields(entry: str) -> None:
    source = FIRE_SCRIPT.replace('if __name__ == "__main__":\n    fire.Fire(train)\n', entry)
    assert parser_fields(ast.parse(source)) == {}
