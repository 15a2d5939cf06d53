"""The DeepSpeed config a launched script takes by default, when its launch names none."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement_lint.context.commands import parse_command
from placement_lint.context.script_defaults import default_deepspeed_config

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
