"""An import a fix adds lands where isort and ruff's I001 put it: a sorted file stays sorted.

Each case is checked against the ruff the test extra installs: the file before is I001-clean, and
so is the file after the import is added."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from placement_lint.decode import read_source
from placement_lint.fixes.apply import apply_edits
from placement_lint.rules.added_imports import import_edit
from placement_lint.source import parse_python

from helpers import lint_file

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
needs_ruff = pytest.mark.skipif(RUFF is None, reason="needs ruff (the test extra installs it)")


def sorted_by_ruff(project: Path, path: Path) -> bool:
    done = subprocess.run(
        [str(RUFF), "check", "--isolated", "--no-cache", "--select", "I", "--quiet", str(path)],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0


def added(project: Path, text: str, module: str, name: str) -> str:
    path = project / "train.py"
    path.write_text(text)
    source = read_source(path, path.read_bytes())
    return apply_edits(text, [import_edit(source, parse_python(source), module, name)])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "utils.py").write_text("helper = 1\n")  # a first-party module
    return tmp_path


CASES = {
    "sorted into its section": (
        "import os\n\nimport torch\nfrom torch.nn.parallel import DistributedDataParallel\nfrom transformers import AutoModel\n\nx = 1\n",
        "import os\n\nimport torch\nfrom accelerate import PartialState\nfrom torch.nn.parallel import DistributedDataParallel\nfrom transformers import AutoModel\n\nx = 1\n",
    ),
    "last of its section": (
        "import os\n\nfrom abc_lib import thing\n\nfrom utils import helper\n",
        "import os\n\nfrom abc_lib import thing\nfrom accelerate import PartialState\n\nfrom utils import helper\n",
    ),
    "into the statement for its module, by type": (
        "import os\n\nfrom accelerate import Accelerator, notebook_launcher\n",
        "import os\n\nfrom accelerate import Accelerator, PartialState, notebook_launcher\n",
    ),
    "into a statement one name a line": (
        "from accelerate import (\n    Accelerator,\n    notebook_launcher,\n)\n",
        "from accelerate import (\n    Accelerator,\n    PartialState,\n    notebook_launcher,\n)\n",
    ),
    "at the end of a statement one name a line": (
        "from accelerate import (\n    Accelerator,\n    DataLoaderConfiguration,\n)\n",
        "from accelerate import (\n    Accelerator,\n    DataLoaderConfiguration,\n    PartialState,\n)\n",
    ),
    "a section of its own after the standard library": (
        '"""Train."""\n\nfrom __future__ import annotations\n\nimport os\nimport sys\n\nx = 1\n',
        '"""Train."""\n\nfrom __future__ import annotations\n\nimport os\nimport sys\n\nfrom accelerate import PartialState\n\nx = 1\n',
    ),
    "a section of its own before first party and local": (
        "from utils import helper\n\nfrom .sibling import other\n",
        "from accelerate import PartialState\n\nfrom utils import helper\n\nfrom .sibling import other\n",
    ),
    "no imports: after the docstring, a blank line before the code": (
        '"""Train."""\nx = 1\n',
        '"""Train."""\nfrom accelerate import PartialState\n\nx = 1\n',
    ),
    "no imports: below the opening comments, two blank lines before a function": (
        "#!/usr/bin/env python\n# Train it.\n@decorated\ndef main():\n    pass\n",
        "#!/usr/bin/env python\n# Train it.\nfrom accelerate import PartialState\n\n\n@decorated\ndef main():\n    pass\n",
    ),
    "no imports: the blank lines already there count": (
        '"""Train."""\n\n\nclass Trainer:\n    pass\n',
        '"""Train."""\nfrom accelerate import PartialState\n\n\nclass Trainer:\n    pass\n',
    ),
}


@needs_ruff
@pytest.mark.parametrize(("before", "after"), CASES.values(), ids=CASES.keys())
def test_the_added_import_keeps_a_sorted_file_sorted(project: Path, before: str, after: str) -> None:
    assert added(project, before, "accelerate", "PartialState") == after
    assert sorted_by_ruff(project, project / "train.py")  # before
    (project / "train.py").write_text(after)
    assert sorted_by_ruff(project, project / "train.py")


@needs_ruff
def test_a_submodule_import_sorts_after_its_package(project: Path) -> None:
    before = "import torch\nfrom transformers import AutoModel, Trainer\n"
    after = added(project, before, "transformers.integrations", "is_deepspeed_zero3_enabled")
    assert after == before + "from transformers.integrations import is_deepspeed_zero3_enabled\n"
    (project / "train.py").write_text(after)
    assert sorted_by_ruff(project, project / "train.py")


@needs_ruff
def test_a_fixed_file_passes_ruffs_import_sorting(project: Path) -> None:
    """End to end: DPL003's unsafe fix adds `from accelerate import PartialState` to a sorted script."""
    path = project / "train.py"
    path.write_text(
        "import os\n\nimport torch.distributed as dist\nfrom transformers import AutoModelForCausalLM\n\n"
        'dist.init_process_group("nccl")\n'
        'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map=0)\n'
    )
    assert sorted_by_ruff(project, path)
    result = lint_file(path, fix=True, unsafe_fixes=True)
    assert result.fixed and "from accelerate import PartialState\nfrom transformers" in path.read_text()
    assert sorted_by_ruff(project, path)


def test_in_a_notebook_nothing_goes_above_its_ipython_lines(tmp_path: Path) -> None:
    """A notebook's magics and shell lines read as `pass`: the import goes below them, never on them."""
    import json

    cells = ["%pip install accelerate\n!nvidia-smi", "x = 1\n"]
    data = {
        "cells": [{"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": c} for c in cells],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(data))
    source = read_source(path, path.read_bytes())
    edit = import_edit(source, parse_python(source), "accelerate", "PartialState")
    assert source.location(edit.start)[:2] == (2, 1)  # the top of the next cell
    assert edit.content == "from accelerate import PartialState\n\n"
