"""The DeepSpeed config a launched script reads that its launch does not name as `--deepspeed`: its
`--deepspeed` default, or an option of its own that it hands DeepSpeed as the config."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from placement_lint.context.commands import parse_command
from placement_lint.context.script_defaults import (
    ConfigSection,
    _sections,
    config_sinks,
    deepspeed_config_flag,
    default_deepspeed_config,
)

_ARGPARSE = 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--deepspeed", default="ds/z3.json")\n'
_SWITCHED = (
    'import argparse\np = argparse.ArgumentParser()\np.add_argument("--deepspeed", action="store_true")\n'
    'p.add_argument("--deepspeed_config", default="ds/z3.json")\n'
)
_DATACLASS = 'from dataclasses import dataclass\n@dataclass\nclass A:\n    deepspeed: str = "ds/z3.json"\n'


@pytest.mark.parametrize(
    ("script", "command", "expected"),
    [
        (_ARGPARSE, "torchrun train.py", "ds/z3.json"),
        (_ARGPARSE, "torchrun train.py --deepspeed ds/z2.json", None),  # the launch names its own
        (_DATACLASS, "torchrun train.py", "ds/z3.json"),
        (
            _ARGPARSE.replace('default="ds/z3.json"', "default=DS").replace("p =", 'DS = "ds/z3.json"\np ='),
            "torchrun train.py",
            "ds/z3.json",
        ),
        (_SWITCHED, "deepspeed train.py", None),  # the switch is off: the config is not used
        (_SWITCHED, "deepspeed train.py --deepspeed", "ds/z3.json"),
        (
            'import argparse\np = argparse.ArgumentParser()\np.add_argument("--deepspeed", default=None)\n',
            "torchrun train.py",
            None,
        ),
    ],
)
def test_the_default_config_counts_only_when_the_launch_names_none(
    tmp_path: Path, script: str, command: str, expected: str | None
) -> None:
    (tmp_path / "train.py").write_text(script)
    launch = parse_command(command)
    assert launch is not None
    assert default_deepspeed_config(launch, tmp_path / "train.py") == expected


_PARSER = 'import argparse\nimport json\nimport deepspeed\np = argparse.ArgumentParser()\np.add_argument("--ds_file", default="ds/z2.json")\np.add_argument("--data")\nargs = p.parse_args()\n'


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            "with open(args.ds_file) as fh, open(args.data) as data:\n    cfg = json.load(fh)\n"
            "deepspeed.initialize(model=None, config=cfg)\n",
            {"ds_file": "deepspeed.initialize as config="},
            id="with open as, json.load",
        ),
        pytest.param(
            "deepspeed.initialize(model=None, config_params=json.load(open(args.ds_file)))\n",
            {"ds_file": "deepspeed.initialize as config_params="},
            id="inline",
        ),
        pytest.param(
            "from pathlib import Path\ndef main():\n    path = args.ds_file\n"
            "    deepspeed.initialize(config=json.loads(Path(path).read_text()))\n",
            {"ds_file": "deepspeed.initialize as config="},
            id="through a name, read_text",
        ),
        pytest.param(
            "from transformers.integrations import HfDeepSpeedConfig\nkeep = HfDeepSpeedConfig(args.ds_file)\n",
            {"ds_file": "HfDeepSpeedConfig"},
            id="a path to HfDeepSpeedConfig",
        ),
        pytest.param(
            'from transformers import TrainingArguments\nTrainingArguments("out", deepspeed=args.ds_file)\n',
            {"ds_file": "TrainingArguments as deepspeed="},
            id="a path to TrainingArguments",
        ),
        pytest.param(
            "cfg = json.load(open(args.data))\ndeepspeed.initialize(model=None, config=cfg['deepspeed'])\n",
            {},
            id="an entry of another file",
        ),
        pytest.param(
            'cfg = json.load(open("ds/z3.json"))\nprint(args.ds_file)\ndeepspeed.initialize(model=None, config=cfg)\n',
            {},
            id="a literal path",
        ),
        pytest.param("print(json.load(open(args.ds_file)))\ndeepspeed.initialize(model=None)\n", {}, id="read, never handed"),
        pytest.param(
            "import yaml\nwith open(args.ds_file) as f:\n    cfg = yaml.safe_load(f)\ndeepspeed.initialize(model=None, config=cfg)\n",
            {"ds_file": "deepspeed.initialize as config="},
            id="YAML",
        ),
        pytest.param(
            "cfg = json.load(open(args.ds_file))\ncfg['zero_optimization']['stage'] = 2\n"
            "deepspeed.initialize(model=None, config=cfg)\n",
            {},
            id="the script sets the stage itself",
        ),
        pytest.param(
            "def read_json(path):\n    with open(path) as f:\n        return json.load(f)\n"
            "deepspeed.initialize(model=None, config=read_json(args.ds_file))\n",
            {"ds_file": "deepspeed.initialize as config="},
            id="a helper of the script reads it",
        ),
        pytest.param(
            "def read_json(path, stage):\n    cfg = json.load(open(path))\n    cfg['zero_optimization']['stage'] = stage\n"
            "    return cfg\ndeepspeed.initialize(model=None, config=read_json(args.ds_file, 2))\n",
            {},
            id="a helper of the script that sets the stage",
        ),
        pytest.param(
            "def describe(path):\n    return {'path': path}\ndeepspeed.initialize(model=None, config=describe(args.ds_file))\n",
            {},
            id="a helper of the script that reads no file",
        ),
        pytest.param(
            "def build(path):\n    return {'zero_optimization': {'stage': 2}, 'source': str(path)}\n"
            "deepspeed.initialize(model=None, config=build(args.ds_file))\n",
            {},
            id="a helper of the script that only names the file",
        ),
        pytest.param(
            "from utils.io import jload\ndeepspeed.initialize(model=None, config=jload(args.ds_file))\n",
            {"ds_file": "deepspeed.initialize as config="},
            id="an imported reader, by its name",
        ),
        pytest.param(
            "from utils.io import build_config\ndeepspeed.initialize(model=None, config=build_config(args.ds_file))\n",
            {},
            id="an imported helper not named as a reader",
        ),
    ],
)
def test_the_options_a_script_hands_deepspeed_as_its_config(body: str, expected: dict[str, str]) -> None:
    assert config_sinks(ast.parse(_PARSER + body)) == expected


_HANDS = _PARSER + "deepspeed.initialize(model=None, config=json.load(open(args.ds_file)))\n"
_SWITCHED_SINK = _PARSER.replace("args =", 'p.add_argument("--use_ds", action="store_true")\nargs =') + (
    "if args.use_ds:\n    deepspeed.initialize(model=None, config=json.load(open(args.ds_file)))\n"
)


@pytest.mark.parametrize(
    ("script", "command", "expected"),
    [
        (_HANDS, "deepspeed train.py --ds_file ds/z3.json", ("ds_file", "ds/z3.json", True)),
        (_HANDS, "deepspeed train.py --ds-file ds/z3.json", ("ds-file", "ds/z3.json", True)),  # as the launch spells it
        (_HANDS, "deepspeed train.py", ("ds_file", "ds/z2.json", False)),  # the option's default
        (_HANDS, "deepspeed train.py --ds_file $DS_CONFIG", None),  # only known when it runs
        (_HANDS.replace('default="ds/z2.json"', "default=None"), "deepspeed train.py", None),
        (_PARSER + "deepspeed.initialize(model=None)\n", "deepspeed train.py --ds_file ds/z3.json", None),
        # `--deepspeed` is read as the launch's DeepSpeed option (launch_setup, default_deepspeed_config), not here.
        (_HANDS.replace("ds_file", "deepspeed"), "deepspeed train.py --deepspeed ds/z3.json", None),
        # Handed to DeepSpeed only behind a switch: the launch must turn it on.
        (_SWITCHED_SINK, "torchrun train.py --ds_file ds/z3.json", None),
        (_SWITCHED_SINK, "torchrun train.py --ds_file ds/z3.json --use_ds", ("ds_file", "ds/z3.json", True)),
    ],
)
def test_the_config_a_launch_names_through_the_scripts_own_option(
    tmp_path: Path, script: str, command: str, expected: tuple[str, str, bool] | None
) -> None:
    (tmp_path / "train.py").write_text(script)
    launch = parse_command(command)
    assert launch is not None
    found = deepspeed_config_flag(launch, tmp_path / "train.py")
    assert ((found.option, found.value, found.given) if found else None) == expected


_SECTION_IMPORTS = "import json\nimport deepspeed\nfrom omegaconf import OmegaConf\nfrom transformers import HfArgumentParser, TrainingArguments\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param('TrainingArguments(**config["training_args"])\n', [(("training_args",), True)], id="spread"),
        pytest.param(
            'def from_dict(**kwargs):\n    training_args = kwargs.get("training_args", None)\n'
            "    return TrainingArguments(**training_args)\n",
            [(("training_args",), True)],
            id="through a name bound to a get",
        ),
        pytest.param(
            "TrainingArguments(**OmegaConf.to_container(cfg.train.args, resolve=True))\n",
            [(("train", "args"), True)],
            id="OmegaConf attributes, passed through",
        ),
        pytest.param(
            'HfArgumentParser(TrainingArguments).parse_dict(config["training"])\n', [(("training",), True)], id="parse_dict"
        ),
        pytest.param(
            'TrainingArguments("out", deepspeed=cfg["train"]["deepspeed"])\n', [(("train", "deepspeed"), False)], id="deepspeed="
        ),
        pytest.param(
            'deepspeed.initialize(model=None, config=json.load(open(cfg["ds"]["path"])))\n',
            [(("ds", "path"), False)],
            id="a file a key names, read for deepspeed.initialize",
        ),
        pytest.param("TrainingArguments(**vars(args))\n", [], id="the mapping itself"),
        pytest.param('print(**config["training_args"])\n', [], id="spread into something else"),
    ],
)
def test_the_sections_of_a_loaded_file_a_script_hands_on(body: str, expected: list[tuple[tuple[str, ...], bool]]) -> None:
    assert _sections(ast.parse(_SECTION_IMPORTS + body)) == [ConfigSection(keys, whole) for keys, whole in expected]


def test_a_name_bound_again_and_again_gives_a_bounded_number_of_sections() -> None:
    rebound = "".join(f'cfg = cfg["k{i}"]\n' for i in range(200))
    spread = "".join(f'TrainingArguments(**cfg["a{i}"])\n' for i in range(200))
    assert 0 < len(_sections(ast.parse(_SECTION_IMPORTS + rebound + spread))) <= 64


def test_a_launched_script_read_for_its_setup_is_parsed_once_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its `--deepspeed` default is read from the tree the module graph keeps of it (it imports the
    repository), which the propagation and the checker take too."""
    from helpers import lint_repo

    (tmp_path / ".git").mkdir()
    (tmp_path / "utils.py").write_text(
        "def load(name, **kwargs):\n    return AutoModelForCausalLM.from_pretrained(name, **kwargs)\n"
    )
    script = (
        "import argparse\nfrom transformers import AutoModelForCausalLM, Trainer, TrainingArguments\nfrom utils import load\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--deepspeed', default='ds_z3.json')\nargs = parser.parse_args()\n"
        "model = AutoModelForCausalLM.from_pretrained('m', device_map='auto')\n"
        "Trainer(model=model, args=TrainingArguments('out', deepspeed=args.deepspeed)).train()\n"
    )
    (tmp_path / "train.py").write_text(script)
    (tmp_path / "ds_z3.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus 8 train.py\n")
    parsed: list[bytes] = []
    parse = ast.parse

    def counted(source, *args, **kwargs):  # type: ignore[no-untyped-def]
        parsed.append(source if isinstance(source, bytes) else source.encode())
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counted)
    result = lint_repo(tmp_path, jobs=1)
    (checked,) = [file for file in result.files if file.display.endswith("train.py")]
    launch = [e.text for f in checked.findings for e in f.context.evidence if e.origin == "launch"]
    assert launch and all("the script's default --deepspeed ds_z3.json" in text for text in launch)
    assert parsed.count(script.encode()) == 1
