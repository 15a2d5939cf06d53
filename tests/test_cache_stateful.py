"""A cached run answers as a fresh one, whatever happened to the repository in between: random steps
(git init or removal, settings written or removed, a launch script, doc or config edited, removed or
restored, a Python file edited, in place, into a launcher written in Python and back, a subset of
paths checked), each followed by a cached run and a `--no-cache` run of the command line, in this
process, over the same paths: same output, same exit.

CI runs a short sequence; `PLACEMENT_LINT_STATEFUL_EXAMPLES=300 PLACEMENT_LINT_STATEFUL_STEPS=40`
runs a long one (12,000 steps)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from placement_lint.cli import main

TRAIN = {
    "auto": """\
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

parser = HfArgumentParser(TrainingArguments)
(args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")
Trainer(model=model, args=args).train()
""",
    "none": """\
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

parser = HfArgumentParser(TrainingArguments)
(args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("m", device_map=None)
Trainer(model=model, args=args).train()
""",
    "cuda": """\
from transformers import AutoModelForCausalLM, Trainer

model = AutoModelForCausalLM.from_pretrained("m", device_map="cuda")
Trainer(model=model).train()
""",
    "broken": "def broken(:\n",
}
MODEL_UTILS = {
    "auto": 'from transformers import AutoModelForCausalLM\n\n\ndef load():\n    return AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n',
    "none": 'from transformers import AutoModelForCausalLM\n\n\ndef load():\n    return AutoModelForCausalLM.from_pretrained("m")\n',
    # Edits inside a function's body, which a cached context may outlive (context/facets.py): what the
    # importers' calls decide, a parser field read, the helper module the loader goes through.
    "for_eval": (  # DPL003 only when a launched importer passes for_eval=True
        "from transformers import AutoModelForCausalLM\n\n\ndef load(for_eval=False):\n    if for_eval:\n"
        '        return AutoModelForCausalLM.from_pretrained("m", device_map={"": 0})\n'
        '    return AutoModelForCausalLM.from_pretrained("m")\n'
    ),
    "quantized": (
        "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n\n\ndef load(args=None):\n"
        "    if args.use_4bit:\n"
        '        return AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True))\n'
        '    return AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
    ),
    "through_helper": "from helpers import build\n\n\ndef load():\n    model = build()\n    return model\n",
}
HELPERS = {
    "auto": 'from transformers import AutoModelForCausalLM\n\n\ndef build():\n    return AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n',
    "moved": 'from transformers import AutoModelForCausalLM\n\n\ndef build():\n    model = AutoModelForCausalLM.from_pretrained("m")\n    model.cuda()\n    return model\n',
}
LAUNCHED_TRAIN = {
    "plain": "from transformers import Trainer\nfrom model_utils import load\n\nTrainer(model=load()).train()\n",
    # The same outline: only main's body differs (the literals passed, what the model goes to).
    "main": "from transformers import Trainer\nfrom model_utils import load\n\n\ndef main():\n    model = load()\n    Trainer(model=model).train()\n\n\nmain()\n",
    "main_eval": (
        "from transformers import Trainer\nfrom model_utils import load\n\n\ndef main():\n    model = load(for_eval=True)\n"
        "    model.cuda()\n    Trainer(model=model).train()\n\n\nmain()\n"
    ),
    "main_unused": "from transformers import Trainer\nfrom model_utils import load\n\n\ndef main():\n    model = load()\n    print(model)\n\n\nmain()\n",
    "parser": (
        "import argparse\n\nfrom transformers import Trainer\nfrom model_utils import load\n\n\ndef parse():\n"
        "    parser = argparse.ArgumentParser()\n    parser.add_argument('--use_4bit', action='store_true')\n"
        "    return parser.parse_args()\n\n\nargs = parse()\nTrainer(model=load(args)).train()\n"
    ),
    "parser_on": (
        "import argparse\n\nfrom transformers import Trainer\nfrom model_utils import load\n\n\ndef parse():\n"
        "    parser = argparse.ArgumentParser()\n    parser.add_argument('--use_4bit', default=True)\n"
        "    return parser.parse_args()\n\n\nargs = parse()\nTrainer(model=load(args)).train()\n"
    ),
}
ZERO = {stage: f'{{"zero_optimization": {{"stage": {stage}}}}}\n' for stage in (2, 3)}

# Each file the steps change, and what it may hold (None: removed).
FILES: dict[str, list[str | None]] = {
    "train.py": [*TRAIN.values(), None],
    # The first of each is what the repository starts with: a loader whose finding depends on what its
    # launched importer passes, so that an edit of the importer's body changes the loader's findings.
    "launch/model_utils.py": [MODEL_UTILS["for_eval"], *MODEL_UTILS.values(), None],
    "launch/helpers.py": [*HELPERS.values(), None],
    "launch/train.py": [LAUNCHED_TRAIN["main"], *LAUNCHED_TRAIN.values(), None],
    "scripts/run.sh": [
        "torchrun --nproc_per_node 8 train.py --deepspeed configs/ds.json\n",
        "python train.py\n",
        "accelerate launch --num_processes 2 train.py\n",
        "deepspeed train.py --deepspeed launch/ds.json\n",
        None,
    ],
    "launch/run.sh": [
        "torchrun --nproc_per_node 8 launch/train.py\n",
        "deepspeed launch/train.py --deepspeed launch/ds.json\n",
        "python launch/train.py\n",
        None,
    ],
    "README.md": [
        "# Train\n\n```bash\ntorchrun --nproc_per_node 4 train.py --deepspeed configs/ds.json\n```\n",
        "# Train\n",
        None,
    ],
    "configs/ds.json": [ZERO[3], ZERO[2], None],
    "launch/ds.json": [ZERO[3], ZERO[2], None],
    ".gitignore": ["scripts/\n", "launch/\n", "*.json\n", "tools/\n", None],
    # Python files edited in place into launchers and back (their folders' names do not change).
    "other.py": [
        "print('hello')\n",
        'import subprocess\n\nsubprocess.run(["torchrun", "--nproc_per_node", "8", "train.py", "--deepspeed", "configs/ds.json"])\n',
        'import os\n\nos.system("deepspeed launch/train.py --deepspeed launch/ds.json")\n',
        'import subprocess\n\nsubprocess.run(["python", "train.py"])\n',
    ],
    "tools/run.py": [
        'import subprocess\n\nprint("hello")\n',
        'import subprocess\n\nsubprocess.run(["accelerate", "launch", "--num_processes", "2", "train.py"])\n',
        'import subprocess\n\nsubprocess.run(["deepspeed", "launch/train.py", "--deepspeed", "launch/ds.json"])\n',
        None,
    ],
}
FOLDERS = ["launch", "scripts", "configs", "tools"]
MODULES = ["launch/train.py", "launch/model_utils.py", "launch/helpers.py"]
PATHS = [
    ".",
    "train.py",
    "launch",
    "launch/model_utils.py",
    "launch/helpers.py",
    "launch/train.py",
    "other.py",
    "scripts",
    "scripts/run.sh",
    "README.md",
    "configs/ds.json",
    "tools",
    "tools/run.py",
]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


class CachedAsFresh(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="placement-lint-stateful-"))
        (self.root / "launch").mkdir()
        (self.root / "other.py").write_text("print('hello')\n")
        for name, contents in FILES.items():
            self._write(name, contents[0])
        self.steps = 0

    def _write(self, name: str, content: str | None) -> None:
        path = self.root / name
        if content is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(exist_ok=True)
        path.write_text(content)

    def _run(self, paths: list[str], cache: bool) -> tuple[int, str]:
        here = os.getcwd()
        os.chdir(self.root)
        try:
            result = CliRunner().invoke(main, ["check", *([] if cache else ["--no-cache"]), *paths], catch_exceptions=False)
        finally:
            os.chdir(here)
        return result.exit_code, result.output

    def _compare(self, paths: list[str]) -> None:
        self.steps += 1
        cached = self._run(paths, cache=True)
        fresh = self._run(paths, cache=False)
        assert cached == fresh, f"check {' '.join(paths)}: cached {cached} != fresh {fresh}"

    @rule(paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=3, unique=True))
    def check(self, paths: list[str]) -> None:
        self._compare(paths)

    @rule(data=st.data(), name=st.sampled_from(sorted(FILES)), paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=2))
    def edit(self, data: st.DataObject, name: str, paths: list[str]) -> None:
        self._write(name, data.draw(st.sampled_from(FILES[name]), label=name))
        self._compare(paths)

    @rule(
        data=st.data(),
        name=st.sampled_from(MODULES),
        paths=st.lists(st.sampled_from(MODULES), min_size=1, max_size=2, unique=True),
    )
    def edit_a_module_after_a_cached_run(self, data: st.DataObject, name: str, paths: list[str]) -> None:
        """The cache holds a context of the modules as they are; then one is edited (its body, most
        often), and the modules it calls, or itself, are checked: a pre-commit run."""
        self._run(["."], cache=True)
        self._write(name, data.draw(st.sampled_from([c for c in FILES[name] if c is not None]), label=name))
        self._compare(paths)

    @rule(
        name=st.sampled_from(["other.py", "tools/run.py"]),
        launcher=st.booleans(),
        paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=2),
    )
    def python_file_into_a_launcher_and_back(self, name: str, launcher: bool, paths: list[str]) -> None:
        """In place, as an editor that rewrites the file does: no name changes in its folder."""
        contents = [content for content in FILES[name] if content is not None]
        path = self.root / name
        if path.exists():
            path.write_text(contents[1] if launcher else contents[0])
        self._compare(paths)

    @rule(name=st.sampled_from(sorted(FILES)), paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=2))
    def save_as_an_editor_does(self, name: str, paths: list[str]) -> None:
        """The same bytes written to a new file that replaces the old one: its folder's mtime changes."""
        path = self.root / name
        if path.exists():
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_bytes(path.read_bytes())
            os.replace(temporary, path)
        self._compare(paths)

    @precondition(lambda self: not (self.root / ".git").exists())
    @rule(paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=2))
    def git_init(self, paths: list[str]) -> None:
        (self.root / ".git").mkdir()  # what marks a repository's root (git itself is not needed)
        self._compare(paths)

    @precondition(lambda self: (self.root / ".git").exists())
    @rule(paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=2))
    def remove_git(self, paths: list[str]) -> None:
        shutil.rmtree(self.root / ".git")
        self._compare(paths)

    @rule(
        exclude=st.lists(st.sampled_from([*FOLDERS, "*.sh", "train.py"]), unique=True, max_size=2),
        launch_exclude=st.lists(st.sampled_from([*FOLDERS, "*.md"]), unique=True, max_size=1),
        ignores=st.sampled_from([None, {"launch/*": ["DPL001"]}, {"train.py": ["DPL0"]}]),
        select=st.sampled_from([None, ["DPL001"], ["DPL002", "DPL003"]]),
        gitignore=st.sampled_from([None, False]),
        paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=2),
    )
    def write_settings(
        self,
        exclude: list[str],
        launch_exclude: list[str],
        ignores: dict[str, list[str]] | None,
        select: list[str] | None,
        gitignore: bool | None,
        paths: list[str],
    ) -> None:
        lines = ["[tool.placement-lint]"]
        if exclude:
            lines.append(f"extend-exclude = {_toml_list(exclude)}")
        if launch_exclude:
            lines.append(f"launch-exclude = {_toml_list(launch_exclude)}")
        if select is not None:
            lines.append(f"select = {_toml_list(select)}")
        if gitignore is not None:
            lines.append("respect-gitignore = false")
        if ignores is not None:
            lines.append("[tool.placement-lint.per-file-ignores]")
            lines += [f'"{pattern}" = {_toml_list(codes)}' for pattern, codes in ignores.items()]
        (self.root / "pyproject.toml").write_text("\n".join(lines) + "\n")
        self._compare(paths)

    @rule(paths=st.lists(st.sampled_from(PATHS), min_size=1, max_size=2))
    def remove_settings(self, paths: list[str]) -> None:
        (self.root / "pyproject.toml").unlink(missing_ok=True)
        self._compare(paths)

    def teardown(self) -> None:
        STEPS.append(self.steps)
        shutil.rmtree(self.root, ignore_errors=True)


STEPS: list[int] = []

CachedAsFresh.TestCase.settings = settings(
    max_examples=int(os.environ.get("PLACEMENT_LINT_STATEFUL_EXAMPLES", "40")),
    stateful_step_count=int(os.environ.get("PLACEMENT_LINT_STATEFUL_STEPS", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCachedAsFresh = CachedAsFresh.TestCase
