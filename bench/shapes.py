"""More forms of one long training function, to find the ones whose analysis grows faster than the code.

    python bench/shapes.py [--shapes elif,loop,...] [--scales 1,2,4,8] [--runs 1] [--max-seconds 120]
                           [--write-only DIR]

Each shape is a launched train.py (a ZeRO-3 `deepspeed --num_gpus 8 train.py --deepspeed ds_z3.json`
launch script beside it, as bench/run.py's scaling section has it) whose long part holds `scale`
times the 1x body, about 280 lines at 1x. Prints, per shape and size, the lines and the CPU time of
`placement-lint check --no-cache .` (the machine may be shared, so CPU time, not wall), and the growth
t(8x)/t(2x), which is 4 when the analysis is linear. `--write-only DIR` writes the projects into DIR
(DIR/<shape>-<scale>x) without timing them. bench/run.py's scaling section times the shapes of
run.LONG_FUNCTION_SHAPES that come from here (SCALING_SHAPES) beside its own.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

BIN = Path(sys.executable).parent
WORK = Path(os.environ.get("PLACEMENT_LINT_BENCH_DIR", Path(tempfile.gettempdir()) / "placement-lint-bench"))

LAUNCH = "#!/bin/bash\ndeepspeed --num_gpus 8 train.py --deepspeed ds_z3.json\n"
ZERO3 = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'

_IMPORTS = """import argparse
import os

import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, Trainer, TrainingArguments
"""
_PARSE_ARGS = """

def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name_or_path", default="org/model")
    parser.add_argument("--model_type", default="type_0")
    parser.add_argument("--deepspeed", default=None)
    for flag in ("--bf16", "--use_flash_attention", "--load_in_4bit", "--load_in_8bit", "--quantize", "--lora"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--retries", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--output_dir", default="out")
    return parser.parse_args()
"""
_MAIN_HEADER = '''

def main():
    """One long function: {shape} blocks, {blocks} of them."""
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank)
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    models = []
    model = None
'''
_MAIN_FOOTER = """    model = models[-1] if models else model
    training_args = TrainingArguments(output_dir=args.output_dir, deepspeed=args.deepspeed, bf16=args.bf16)
    Trainer(model=model, args=training_args, processing_class=tokenizer).train()


if __name__ == "__main__":
    main()
"""


class Shape:
    """A header, `blocks` copies of a block (formatted with its number i), and a footer."""

    def __init__(self, block: str, per_scale: int, header: str = "", footer: str = "", doc: str = "") -> None:
        # The header's {shape} and {blocks} are filled in; its other braces are code.
        self.block, self.per_scale, self.doc = block, per_scale, doc
        self.header = header or _IMPORTS + _PARSE_ARGS + _MAIN_HEADER
        self.footer = footer or _MAIN_FOOTER

    def script(self, name: str, scale: int) -> str:
        blocks = self.per_scale * scale
        body = "".join(self.block.format(i=i) for i in range(blocks))
        return self.head(name, blocks) + body + self.footer

    def head(self, name: str, blocks: int) -> str:
        return self.header.replace("{shape}", name).replace("{blocks}", str(blocks))


# A long if/elif chain on the model type: one `if` nested `blocks` deep in its `orelse`.
_ELIF_BLOCK = """    {keyword} args.model_type == "type_{i}":
        kwargs = {{"torch_dtype": torch.bfloat16, "revision": "v{i}"}}
        if args.load_in_4bit:
            kwargs["device_map"] = "auto"
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs)
        model = model.to(device)
"""


class ElifShape(Shape):
    """One chain: the block's first `if` is an `elif` after the first block, and a final `else` ends it
    (`ending`: raises, by default)."""

    ending = '    else:\n        raise ValueError(f"unknown model type {args.model_type}")\n'

    def script(self, name: str, scale: int) -> str:
        blocks = self.per_scale * scale
        body = "".join(self.block.format(i=i, keyword="if" if i == 0 else "elif") for i in range(blocks))
        return self.head(name, blocks) + body + self.ending + self.footer


# The same chain with fresh names in every branch: each join down it looks at every key bound below.
_ELIF_FRESH_BLOCK = """    {keyword} args.model_type == "type_{i}":
        kwargs_{i} = {{"torch_dtype": torch.bfloat16, "revision": "v{i}"}}
        if args.load_in_4bit:
            kwargs_{i}["device_map"] = "auto"
        model_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs_{i})
        model_{i} = model_{i}.to(device)
"""

# Deeply nested ifs: each block nests seven levels, its loads at the innermost.
_NESTED_IF_BLOCK = """    if args.bf16:
        dtype_{i} = torch.bfloat16
        if args.use_flash_attention:
            attention_{i} = "flash_attention_2"
            if args.load_in_4bit:
                kwargs_{i} = {{"torch_dtype": dtype_{i}, "attn_implementation": attention_{i}}}
                if args.quantize:
                    kwargs_{i}["device_map"] = "auto"
                    if args.lora:
                        kwargs_{i}["revision"] = "lora"
                        if local_rank == 0:
                            model_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs_{i})
                            if args.retries > {i}:
                                model_{i} = model_{i}.to(device)
                                models.append(model_{i})
"""

# One training loop whose body is long: many statements, `continue` and `break` all along it.
_LOOP_HEADER = (
    _IMPORTS
    + _PARSE_ARGS
    + _MAIN_HEADER
    + """    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
    loader = iter([])
    for step in range(args.steps):
        batch = next(loader)
"""
)
_LOOP_BLOCK = """        if step % {i} == 1:
            continue
        loss_{i} = model(**batch).loss
        loss_{i}.backward()
        if args.quantize and step > {i}:
            model = model.to(device)
            break
        kwargs_{i} = {{"torch_dtype": torch.bfloat16}}
        if args.load_in_4bit:
            kwargs_{i}["device_map"] = "auto"
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs_{i})
        batch = {{key: value.to(device) for key, value in batch.items()}}
"""
_LOOP_FOOTER = "        models.append(model)\n" + _MAIN_FOOTER

# The same, in a `while` loop, with the names shared by every block.
_WHILE_HEADER = (
    _IMPORTS
    + _PARSE_ARGS
    + _MAIN_HEADER
    + """    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
    step = 0
    while step < args.steps:
        step += 1
"""
)
_WHILE_BLOCK = """        if args.lora and step == {i}:
            continue
        kwargs = {{"torch_dtype": torch.bfloat16}}
        if args.load_in_4bit:
            kwargs["device_map"] = "auto"
        elif args.quantize:
            break
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs)
        if args.load_in_8bit:
            model = model.to(device)
            continue
"""

# Many try/except/else/finally statements, one after another.
_TRY_BLOCK = """    try:
        kwargs_{i} = {{"torch_dtype": torch.bfloat16, "device_map": "auto"}}
        model_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs_{i})
    except OSError:
        kwargs_{i} = {{"torch_dtype": torch.float32}}
        model_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs_{i})
    except (ValueError, RuntimeError) as error:
        raise SystemExit(str(error)) from error
    else:
        model_{i} = model_{i}.to(device)
    finally:
        models.append(model_{i})
"""

# Many `with` blocks, some binding with `as`, some nested.
_WITH_BLOCK = """    with torch.device("meta"):
        kwargs_{i} = dict(torch_dtype=torch.bfloat16, device_map="auto")
        model_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs_{i})
    with open(args.output_dir) as handle_{i}, torch.no_grad():
        text_{i} = handle_{i}.read()
        with torch.autocast("cuda"):
            model_{i} = model_{i}.to(device)
    with torch.cuda.device(local_rank) as current_{i}:
        models.append(model_{i})
"""

# kwargs dicts built in steps, with the names shared by every block: update(), ** merges, dict(...).
_KWARGS_BLOCK = """    model_kwargs = dict(torch_dtype=torch.bfloat16)
    model_kwargs.update(attn_implementation="sdpa")
    model_kwargs = {{**model_kwargs, "revision": args.model_type}}
    if args.load_in_4bit:
        model_kwargs.update({{"device_map": {{"": local_rank}}}})
    elif args.load_in_8bit:
        model_kwargs.update(device_map="auto")
    quant_kwargs = dict(model_kwargs, low_cpu_mem_usage=True)
    all_kwargs = {{**quant_kwargs, **dict(trust_remote_code=True)}}
    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **all_kwargs)
    models.append(model)
"""

# The same steps, each merge reading the dict the one before built: one chain through every block.
_MERGED_BLOCK = """    model_kwargs.update(revision="v{i}")
    model_kwargs = {{**model_kwargs, "trust_remote_code": True}}
    if args.load_in_4bit:
        model_kwargs.update({{"device_map": {{"": local_rank}}}})
    model_kwargs = dict(model_kwargs, low_cpu_mem_usage=True)
    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **model_kwargs)
"""
_MERGED_HEADER = _IMPORTS + _PARSE_ARGS + _MAIN_HEADER + '    model_kwargs = {"torch_dtype": torch.bfloat16}\n'

# Hundreds of small nested scopes: closures, lambdas and comprehensions, some reading the outer names.
_CLOSURES_BLOCK = """    def load_{i}(name=args.model_name_or_path):
        kwargs = {{"torch_dtype": torch.bfloat16, "device_map": "auto" if args.quantize else None}}
        return AutoModelForCausalLM.from_pretrained(name, **kwargs)

    def move_{i}(model):
        return model.to(device)

    to_device_{i} = lambda batch: {{key: value.to(device) for key, value in batch.items()}}
    names_{i} = [name for name, _ in load_{i}().named_parameters() if "lora" in name]
    model_{i} = move_{i}(load_{i}())
    models.append(model_{i})
"""

# One model re-wrapped again and again: peft, quantization, .to(), compile.
_REWRAPPED_BLOCK = """    model = prepare_model_for_kbit_training(model)
    model = get_peft_model(model, LoraConfig(r={i}))
    if args.load_in_4bit:
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, device_map="auto")
    model = model.to(device)
    model = torch.compile(model)
    model.config.use_cache = False
    model = model.to(torch.bfloat16)
"""
_REWRAPPED_HEADER = (
    _IMPORTS
    + _PARSE_ARGS
    + _MAIN_HEADER.replace("    model = None\n", "    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)\n")
)

# A script without main(): every statement at the module's top level.
_TOPLEVEL_HEADER = (
    '''"""A launched training script without main(): {blocks} blocks at the top level."""
'''
    + _IMPORTS
    + """
parser = argparse.ArgumentParser()
parser.add_argument("--model_name_or_path", default="org/model")
parser.add_argument("--deepspeed", default=None)
parser.add_argument("--load_in_4bit", action="store_true")
parser.add_argument("--output_dir", default="out")
args = parser.parse_args()
local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank)
models = []
"""
)
_TOPLEVEL_BLOCK = """if args.load_in_4bit:
    kwargs = {{"torch_dtype": torch.bfloat16, "device_map": "auto"}}
else:
    kwargs = {{"torch_dtype": torch.float16}}
kwargs["revision"] = "v{i}"
model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs)
model = model.to(device)
for name, param in model.named_parameters():
    param.requires_grad = "lora" in name
models.append(model)
"""
_TOPLEVEL_FOOTER = """training_args = TrainingArguments(output_dir=args.output_dir, deepspeed=args.deepspeed)
Trainer(model=models[-1], args=training_args).train()
"""

# Long `match` statements on the model type.
_MATCH_BLOCK = """    match args.model_type:
        case "type_{i}":
            kwargs = {{"torch_dtype": torch.bfloat16, "device_map": "auto"}}
        case "plain_{i}" | "other_{i}":
            kwargs = {{"torch_dtype": torch.float16}}
        case {{"name": name_{i}}}:
            kwargs = {{"revision": name_{i}}}
        case _:
            kwargs = {{}}
    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs)
    model = model.to(device)
    models.append(model)
"""

# A long method of a Trainer subclass that assigns attributes of self, and module globals.
_METHOD_HEADER = (
    '''"""A Trainer subclass with one long method: {blocks} blocks of attribute assignments."""
'''
    + _IMPORTS
    + _PARSE_ARGS
    + """
MODEL = None
DEVICE = None


class LongTrainer(Trainer):
    def setup_models(self, args):
        global MODEL, DEVICE
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        DEVICE = torch.device("cuda", local_rank)
"""
)
_METHOD_BLOCK = """        self.kwargs = {{"torch_dtype": torch.bfloat16, "revision": "v{i}"}}
        if args.load_in_4bit:
            self.kwargs["device_map"] = "auto"
        self.model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **self.kwargs)
        self.model = self.model.to(DEVICE)
        MODEL = self.model
        self.ref_model_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, device_map="auto")
        self.config.block_{i} = self.model.config
"""
_METHOD_FOOTER = """        return self.model


def main():
    args = parse_args()
    training_args = TrainingArguments(output_dir=args.output_dir, deepspeed=args.deepspeed)
    trainer = LongTrainer(model=None, args=training_args)
    trainer.setup_models(args)
    trainer.train()


if __name__ == "__main__":
    main()
"""

# One kwargs dict built key by key, each key under its own `if` on the arguments.
_KWARGS_KEYS_HEADER = _IMPORTS + _PARSE_ARGS + _MAIN_HEADER + '    model_kwargs = {"torch_dtype": torch.bfloat16}\n'
_KWARGS_KEYS_BLOCK = """    if args.retries > {i}:
        model_kwargs["option_{i}"] = {i}
    elif args.steps == {i}:
        model_kwargs.pop("option_{i}", None)
    if args.load_in_4bit and args.steps > {i}:
        model_kwargs["device_map"] = {{"": local_rank}}
    model_kwargs.setdefault("revision_{i}", "main")
"""
# The device map of one kwargs dict set under an if, block after block, with a load after each: every
# load can get the map of any block before it, so the answers themselves grow with the square.
_ENTRY_UNDER_IFS_HEADER = _IMPORTS + _PARSE_ARGS + _MAIN_HEADER + "    model_kwargs = {}\n"
_ENTRY_UNDER_IFS_BLOCK = """    if args.option_{i}:
        model_kwargs["device_map"] = {{"": local_rank}} if args.ddp else "auto"
        model_kwargs["revision"] = "v{i}"
    if args.other_{i} and model_kwargs.get("device_map"):
        model_kwargs.pop("device_map")
    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **model_kwargs)
"""
_KWARGS_KEYS_FOOTER = (
    "    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **model_kwargs)\n"
    "    models.append(model)\n" + _MAIN_FOOTER
)

# An elif chain inside the training loop: the loop's passes walk it as well as the recording.
_ELIF_LOOP_HEADER = (
    _IMPORTS
    + _PARSE_ARGS
    + _MAIN_HEADER
    + """    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
    for step in range(args.steps):
"""
)
_ELIF_LOOP_BLOCK = textwrap.indent(_ELIF_BLOCK, "    ")  # the same chain, one level deeper


class ElifLoopShape(ElifShape):
    """One chain in a loop's body, its last branch a `continue`."""

    ending = "        else:\n            continue\n"


# Hundreds of models side by side (model_0 .. model_N): loaded, moved, wrapped, kept, no branches.
_MODELS_BLOCK = """    model_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
    model_{i}.config.use_cache = False
    model_{i} = model_{i}.to(device)
    ref_{i} = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, device_map="auto")
    models.append(model_{i})
"""

# A training loop of retries: try/except/finally in a for loop, ifs, continue and break, names shared.
_RETRY_HEADER = (
    _IMPORTS
    + _PARSE_ARGS
    + _MAIN_HEADER
    + """    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
    for attempt in range(args.retries):
"""
)
_RETRY_BLOCK = """        try:
            kwargs = {{"torch_dtype": torch.bfloat16}}
            if attempt == {i}:
                kwargs["device_map"] = "auto"
            model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **kwargs)
        except OSError:
            if args.lora:
                continue
            break
        finally:
            models.append(model)
        with torch.no_grad():
            model = model.to(device)
"""

SHAPES: dict[str, Shape] = {
    "elif": ElifShape(_ELIF_BLOCK, 42, doc="a long if/elif chain on args.model_type"),
    "elif-fresh": ElifShape(_ELIF_FRESH_BLOCK, 42, doc="the if/elif chain, fresh names in every branch"),
    "nested-if": Shape(_NESTED_IF_BLOCK, 16, doc="ifs nested seven deep, block after block"),
    "nested-if-shared": Shape(
        _NESTED_IF_BLOCK.replace("_{i}", ""), 16, doc="the same, every block re-binding the same names under its ifs"
    ),
    "loop": Shape(_LOOP_BLOCK, 20, header=_LOOP_HEADER, footer=_LOOP_FOOTER, doc="one for loop's long body, continue and break"),
    "while": Shape(_WHILE_BLOCK, 21, header=_WHILE_HEADER, footer=_LOOP_FOOTER, doc="one while loop's long body, shared names"),
    "try": Shape(_TRY_BLOCK, 20, doc="try/except/else/finally after one another"),
    "with": Shape(_WITH_BLOCK, 28, doc="with blocks, with `as`, nested"),
    "kwargs": Shape(_KWARGS_BLOCK, 22, doc="kwargs dicts by update(), ** merges and dict(...), names shared"),
    "merged": Shape(_MERGED_BLOCK, 42, header=_MERGED_HEADER, doc="one kwargs dict merged into itself all along"),
    "closures": Shape(_CLOSURES_BLOCK, 22, doc="nested functions, lambdas and comprehensions"),
    "rewrapped": Shape(_REWRAPPED_BLOCK, 30, header=_REWRAPPED_HEADER, doc="model = wrapper(model), again and again"),
    "toplevel": Shape(_TOPLEVEL_BLOCK, 26, header=_TOPLEVEL_HEADER, footer=_TOPLEVEL_FOOTER, doc="a script without main()"),
    "match": Shape(_MATCH_BLOCK, 20, doc="match statements on args.model_type"),
    "method": Shape(_METHOD_BLOCK, 30, header=_METHOD_HEADER, footer=_METHOD_FOOTER, doc="self.x = ... in a Trainer subclass"),
    "kwargs-keys": Shape(
        _KWARGS_KEYS_BLOCK, 40, header=_KWARGS_KEYS_HEADER, footer=_KWARGS_KEYS_FOOTER, doc="one kwargs dict, a key under each if"
    ),
    "elif-loop": ElifLoopShape(
        _ELIF_LOOP_BLOCK, 42, header=_ELIF_LOOP_HEADER, footer=_LOOP_FOOTER, doc="an elif chain in a loop"
    ),
    "models": Shape(_MODELS_BLOCK, 56, doc="model_0 .. model_N side by side, no branches"),
    "retry": Shape(
        _RETRY_BLOCK, 20, header=_RETRY_HEADER, footer=_LOOP_FOOTER, doc="try/except/finally, ifs, continue in a loop"
    ),
    "entry-under-ifs": Shape(
        _ENTRY_UNDER_IFS_BLOCK, 42, header=_ENTRY_UNDER_IFS_HEADER, doc="a kwargs entry set under each if, a load after each"
    ),
}


# The forms whose analysis grew faster than the code: bench/run.py's scaling section times them beside
# its own. t(8x)/t(2x) in CPU time before their mending, and after: elif 41, 7.4; rewrapped 12, 3.9;
# elif-fresh 38, 11; nested-if-shared 8.9, 7.6. Then (elif chains joined link by link, one walk for a
# function's splatted dicts), 8x CPU and growth before -> after, 3 runs on a shared machine: elif 2.47 s
# 5.0 -> 2.03 s 6.0; elif-fresh 7.98 s 10.1 -> 1.48 s 5.3; nested-if-shared 3.12 s 5.9 -> 3.15 s 7.9;
# elif-loop 3.62 s 5.4 -> 3.23 s 6.9 (the 2x times fell more than the 8x ones). What is still quadratic
# is the representation: a name bound in every branch of a chain (or re-bound under an `if` block after
# block) holds a binding per branch, a list every join rebuilds, and a path down a chain holds a
# condition per branch passed, which every question there compares. 0.10.0 marks a key's bindings with
# a branch's condition as a whole (flowstate.Carried), and each read tries only the conditions its path
# lacks: 8x/2x in CPU time on a shared machine, before -> after: nested-if-shared 7.2 -> 2.2, elif 5.3
# -> 4.3, elif-loop 6.6 -> 4.6. entry-under-ifs, found after, is quadratic in its answers: each of n
# loads can get the map of any block before it (8x/2x 7.9, 6.5 once each value is classified once).
SCALING_SHAPES = ("elif", "rewrapped", "elif-fresh", "nested-if-shared", "elif-loop", "entry-under-ifs")


def training_script(shape: str, scale: int) -> str:
    return SHAPES[shape].script(shape, scale)


def write_project(target: Path, shape: str, scale: int) -> Path:
    """train.py, the launch script that runs it on 8 GPUs under ZeRO-3, and that DeepSpeed config."""
    (target / ".git").mkdir(parents=True, exist_ok=True)
    (target / "train.py").write_text(training_script(shape, scale))
    (target / "launch.sh").write_text(LAUNCH)
    (target / "ds_z3.json").write_text(ZERO3)
    return target


def cpu_seconds(command: list[str], cwd: Path, timeout: float) -> float | None:
    """The CPU time of the command and its workers, or None past `timeout` seconds of wall time."""
    before = os.times()
    try:
        subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, of: " + ", ".join(SHAPES))
    parser.add_argument("--scales", default="1,2,4,8")
    parser.add_argument("--runs", type=int, default=1, help="median of this many runs per size")
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--write-only", type=Path, metavar="DIR", help="write the projects into DIR and exit")
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    scales = [int(scale) for scale in args.scales.split(",")]
    if args.write_only:
        for shape in shapes:
            for scale in scales:
                write_project(args.write_only / f"{shape}-{scale}x", shape, scale)
        return
    # As bench/run.py: an editable install under PYTHONDONTWRITEBYTECODE would compile every module on
    # every run, a constant that flattens the growth.
    located = subprocess.run(
        [sys.executable, "-c", "import placement_lint, os; print(os.path.dirname(placement_lint.__file__))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    compileall.compile_dir(located.stdout.strip(), quiet=1)
    command = [str(BIN / "placement-lint"), "check", "--no-cache", "--quiet", "--exit-zero", "."]
    print("| shape | " + " | ".join(f"{s}x lines | {s}x CPU" for s in scales) + " | t(8x)/t(2x) |")
    print("|---|" + "--:|--:|" * len(scales) + "--:|")
    for shape in shapes:
        times: dict[int, float | None] = {}
        cells = []
        for scale in scales:
            project = write_project(WORK / f"shape-{shape}-{scale}x", shape, scale)
            lines = (project / "train.py").read_text().count("\n")
            samples = [cpu_seconds(command, project, args.max_seconds) for _ in range(args.runs)]
            times[scale] = None if None in samples else statistics.median(samples)  # type: ignore[type-var]
            cells.append(f"{lines} | {'> cap' if times[scale] is None else f'{times[scale]:.2f} s'}")
            if times[scale] is None:
                break
        growth = f"{times[8] / times[2]:.1f}" if times.get(8) and times.get(2) else "n/a"
        print(f"| {shape} | " + " | ".join(cells) + f" | {growth} |", flush=True)


if __name__ == "__main__":
    main()
