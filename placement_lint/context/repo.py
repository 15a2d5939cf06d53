"""Repo-wide context: how each Python file is launched, from the launch scripts and configs around it.

Built once per repository, before any Python file is parsed: find the files that can hold launch
commands, parse each command, read the configs it names (accelerate YAML, DeepSpeed JSON, recipe
YAML), resolve its target to a file of the repository, and give that file (and the repository
modules it imports) the evidence, with the chain that led to it; and tell each imported module what
its importers do with the values its functions return (a model a helper loads goes to their trainer).
"""

from __future__ import annotations

import ast
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.flow import ModelFlow, returned_item, unpacked_positions
from placement_lint.analysis.index import index_of
from placement_lint.analysis.names import ImportTable
from placement_lint.context.commands import Launch, parse_command
from placement_lint.context.configs import ConfigReader, zero_stage_of
from placement_lint.context.evidence import EFFICIENT_LOADING, ZERO3_INIT_OFF, Evidence, Kind
from placement_lint.context.launch_files import (
    DOC_CODE_MARKERS,
    DOC_KINDS,
    LAUNCH_TOKENS,
    MAX_LAUNCHER_BYTES,
    CommandLine,
    commands_in,
    launcher_kind,
)
from placement_lint.context.launcher_names import launcher_candidates, python_launch_files, tracked_launchers
from placement_lint.context.launches import RepoContext
from placement_lint.context.module_graph import ModuleGraph, ModuleSummary
from placement_lint.context.projects import ConsoleScript, Projects, ScriptNames
from placement_lint.context.script_defaults import default_deepspeed_config
from placement_lint.context.shipped_configs import ShippedAccelerateConfigs
from placement_lint.discover import real_path
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple
from placement_lint.settings import Settings
from placement_lint.source import MAX_NOTEBOOK_BYTES, is_notebook

if TYPE_CHECKING:
    from placement_lint.analysis.consumers import Consumer
    from placement_lint.context.classes import ImportedClasses

_NAMED_ACCELERATE_CONFIGS = {  # `trl ... --accelerate_config NAME` (trl/accelerate_configs/NAME.yaml)
    "single_gpu": (Kind.SINGLE, None),
    "multi_gpu": (Kind.DDP, None),
    "zero1": (Kind.DEEPSPEED, 1),
    "zero2": (Kind.DEEPSPEED, 2),
    "zero3": (Kind.ZERO3, 3),
    "fsdp1": (Kind.FSDP, None),
    "fsdp2": (Kind.FSDP, None),
}
_MULTI = LazyPattern(r"^MULTI_")


class Resolved(NamedTuple):  # a named tuple: a frozen dataclass's class costs every run 0.7 ms
    kind: Kind
    stage: int | None
    details: str  # "distributed_type DEEPSPEED, zero_stage 3"


def build_repo_context(
    root: Path,
    settings: Settings,
    display: Callable[[Path], str],
    also: tuple[Path, ...] = (),
    launchers: list[Path] | None = None,
    anchors: tuple[bytes, ...] | None = None,
    tracked: list[Path] | None = None,
    python_sources: list[Path] | None = None,
) -> RepoContext:
    """`also`: folders named on the command line; their launchers count even if the config excludes
    them. `launchers`: the candidate files, when the caller's walk already covered the root.
    `anchors`: the tokens without which no rule can fire in a file (see ModuleGraph); None: follow
    every import. `tracked`: the launch files git tracks that no walk meets (tracked_launchers), when
    the caller has read them already. `python_sources`: the Python files that may start a launcher
    (python_launch_files), when the caller has looked for them already."""
    root = root.resolve()
    context = RepoContext(root)
    walked = launcher_candidates(root, settings, also, launchers)
    context.tracked = tracked if tracked is not None else tracked_launchers(root, settings, walked)
    context.candidates = [*walked, *context.tracked]
    if python_sources is None:
        python_sources = python_launch_files(root, settings)
    projects = Projects(root, context.candidates)
    configs = ConfigReader(root, projects.root_of)
    graph = ModuleGraph(root, anchors=anchors, project_of=projects.root_of)
    launched: dict[Path, list[Evidence]] = {}
    uses: dict[Path, set[str]] = {}  # what of each launched file runs: "__main__", or a console script's function
    shipped = ShippedAccelerateConfigs(root, context.candidates, configs)
    for path in [*context.candidates, *python_sources]:
        for command in _commands(path, context):
            launch = parse_command(command.text, ScriptNames(projects, command.cwd, command.source.parent))
            if launch is None:
                continue
            script = _console_script(launch, command, projects, graph, context, display) if launch.program else None
            found = (
                (projects.module_of(script, graph), "") if script else _target(launch, command, root, projects, display, graph)
            )
            target, found_from = found if found is not None else (None, "")
            if target is None:
                continue
            above = _folder_above_holding(launch, command, target, _folders_above(command, root, projects, launch.target or ""))
            if above is not None:
                # `bash scripts/run.sh` runs from the folder whose paths it names: its configs are there too.
                command = command._replace(cwd=above)
            asked = len(configs.loaded)
            resolved = _resolve(launch, command, configs, target, shipped)
            read = tuple(dict.fromkeys(display(path) for path in configs.loaded[asked:]))
            where = f"{display(command.source)}:{command.where}"
            # A folder the script computed (`$SCRIPT_DIR/train.py`) is absolute: shown from the root.
            text = f"{where} ({_short(launch.text.replace(f'{root}{os.sep}', ''))})"
            for said in (found_from, script.describe(display(script.declared_in)) if script else "", resolved.details):
                text += f", {said}" if said else ""
            env = {**dict(command.env), **launch.env}
            evidence = Evidence(
                resolved.kind,
                display(command.source),
                command.line,
                text,
                resolved.stage,
                "launch",
                (display(target),),
                _arguments(launch, command.cwd, configs, target),
                single_process=_one_process(launch),
                one_gpu=_one_gpu(launch, env),
                bypass=env.get("ACCELERATE_BYPASS_DEVICE_MAP", "").lower() in ("true", "1"),
                entry=script.function if script else "",
                cell=command.cell,  # a notebook's shell escape: `line` is in that cell
                configs=read,
            )
            launched.setdefault(target, []).append(evidence)
            # A one-process launch of a console script lends its function to no other launch of the module.
            if not (script and resolved.kind is Kind.SINGLE):
                uses.setdefault(target, set()).add(script.function if script else "__main__")
    context.warnings += configs.warnings
    pins_read = _attach_pins(root, launched, context) if launched else ()
    for target, items in launched.items():
        context.by_file[target] = tuple(items)
        context.used[target] = frozenset(uses.get(target, ()))
    edges = _propagate_to_imports(context, launched, graph, display)
    parsers_read = _attach_parsers(context, launched, graph, display)
    classes_read = _follow_returns(context, graph, edges, display)
    called_read = _record_importer_calls(context, graph, edges)
    modules_read = graph.read()
    context.inputs = [
        *context.candidates,
        *python_sources,
        *configs.read,
        *pins_read,
        *modules_read,
        *graph.layout.read,
        *parsers_read,
        *dict.fromkeys(projects.read),
    ]
    already = set(context.inputs)
    context.inputs += [path for path in called_read if path not in already]
    # A module read for its class bases (a trainer subclass), its parser or its functions' defaults
    # counts whole, not by its import lines.
    context.import_only = graph.import_only(launched) - set(classes_read) - set(parsers_read) - set(called_read)
    graph.release()
    context.graph = graph
    return context


def _attach_pins(root: Path, launched: dict[Path, list[Evidence]], context: RepoContext) -> tuple[Path, ...]:
    """Give each launch what the repository pins of the libraries whose behaviour rules depend on
    (read only when something is launched); specifiers that do not parse are named in a warning."""
    from placement_lint.context.pins import read_pins

    found = read_pins(root)
    context.warnings += list(found.notes)
    if found.pins:
        pins = tuple(tuple(pin) for pin in found.pins)
        for items in launched.values():
            items[:] = [item._replace(pins=pins) for item in items]  # type: ignore[misc]
    return found.read


def _commands(path: Path, context: RepoContext) -> list[CommandLine]:
    try:
        if path.stat().st_size > (MAX_NOTEBOOK_BYTES if is_notebook(path) else MAX_LAUNCHER_BYTES):
            if launcher_kind(path, b"") in ("shell", "make", "docker", "procfile", *DOC_KINDS):  # a big YAML is just data
                context.warnings.append(f"{_shown(path, context)}: skipped, larger than {MAX_LAUNCHER_BYTES} bytes")
            return []
        raw = path.read_bytes()
    except OSError:
        return []
    kind = launcher_kind(path, raw[:512])
    if kind is None or not any(token in raw for token in LAUNCH_TOKENS):
        return []
    if kind in DOC_KINDS and not any(marker in raw for marker in DOC_CODE_MARKERS):
        return []  # prose only: no code block to hold a command
    if kind != "notebook" and b"\0" in raw:
        context.warnings.append(f"{_shown(path, context)}: skipped, binary (NUL bytes), no launch commands read")
        return []
    problems: list[str] = []
    try:
        commands = commands_in(path, raw.decode("utf-8", errors="replace"), kind, problems)
    except (RecursionError, ValueError) as exc:
        problems.append(f"cannot read launch commands: {exc}")
        commands = []
    context.warnings += [f"{_shown(path, context)}: {problem}" for problem in problems]
    return commands


def _shown(path: Path, context: RepoContext) -> str:
    return str(path.relative_to(context.root)) if path.is_relative_to(context.root) else str(path)


def _target(
    launch: Launch,
    command: CommandLine,
    root: Path,
    projects: Projects,
    display: Callable[[Path], str],
    graph: ModuleGraph,
) -> tuple[Path, str] | None:
    """The repository file a launch runs (a script path, or a `-m package.module`), and, in a monorepo,
    where its path was found: from the folder the command runs in or the launch script's, else from the
    nearest project root above the launch script, else from the top of the repository."""
    name = launch.target or launch.module
    project = projects.root_of(command.source.parent)
    outer: list[tuple[Path, str]] = [(root, "")]
    if project is not None and project != root:  # a project nested in the repository: say which one matched
        outer = [
            (project, f"{name} found from the project root {display(project)}"),
            (root, f"{name} found from the repository top"),
        ]
    moved = [(base, "") for base in _moved_from_the_top(command, root)]
    candidates: list[tuple[Path, str]] = []
    if launch.target and launch.target.endswith(".py"):
        above = [
            (folder, f"{name} found from {display(folder)}, a folder above the launch script")
            for folder in _folders_above(command, root, projects, launch.target)
        ]
        bases = [(command.cwd, ""), (command.source.parent, ""), *outer, *moved, *above]
        candidates = [(base / launch.target, said) for base, said in bases]
    elif launch.module:
        packages = [(folder, said) for top, said in outer for folder in (top, top / "src")]
        for base, said in [(command.cwd, ""), *packages, *moved]:
            found = graph.launched_module(launch.module, base)
            if found is not None:
                return found, said
        return None
    for candidate, said in candidates:
        if not os.path.isfile(candidate):  # one stat; most bases do not hold the script
            continue
        try:
            real = real_path(candidate)
        except (OSError, RuntimeError):
            continue
        if real.is_relative_to(root):
            return real, said
    return None


def _folders_above(command: CommandLine, root: Path, projects: Projects, target: str) -> list[Path]:
    """The folders between a launch script and the top of the repository (or of its project), nearest
    first. `train/scripts/run_sft.sh` is written to be run as `bash scripts/run_sft.sh` from `train/`,
    and names `src/sft.py` from there; a script that `cd`s somewhere says where it runs itself. A
    `target` climbing out with `..` was written for one folder: from a folder above it would name a
    file by accident (Qwen's notebooks name `../../finetune.py`)."""
    if command.cwd != command.source.parent or ".." in Path(target).parts:
        return []
    top = projects.root_of(command.source.parent) or root
    folders: list[Path] = []
    for folder in command.source.parent.parents:
        if folder == top or not folder.is_relative_to(top):
            break
        folders.append(folder)
    return folders


def _folder_above_holding(launch: Launch, command: CommandLine, target: Path, above: list[Path]) -> Path | None:
    """Of the folders `above` the launch script, the one its target was found from, if it was found
    there: not beside the script, nor from a project root or the top."""
    if not launch.target or not above or os.path.isfile(command.cwd / launch.target):
        return None
    for folder in above:
        if os.path.isfile(folder / launch.target):
            try:
                return folder if (folder / launch.target).resolve() == target else None
            except (OSError, RuntimeError):
                return None
    return None


def _moved_from_the_top(command: CommandLine, root: Path) -> list[Path]:
    """Docs (and many scripts) are run from the top of the repository: a `cd examples` in
    docs/guide.md or scripts/run.sh moves to root/examples too."""
    if command.cwd == command.source.parent or not command.cwd.is_relative_to(command.source.parent):
        return []
    return [root / command.cwd.relative_to(command.source.parent)]


def _console_script(
    launch: Launch,
    command: CommandLine,
    projects: Projects,
    graph: ModuleGraph,
    context: RepoContext,
    display: Callable[[Path], str],
) -> ConsoleScript | None:
    """The console script a launch runs by name, when the repository declares it and has its module."""
    assert launch.program is not None
    folders = (command.cwd, command.source.parent)
    script = projects.find(launch.program, *folders)
    problems: list[str] = []
    if script is None:  # a packaging file that could not be read may declare it: say so, guess nothing
        for project in projects.projects_of(*folders):
            problems += [f"{display(project / name)}: {reason}" for name, reason in projects.packaging(project).problems]
    elif projects.module_of(script, graph) is None:
        where = f"{display(command.source)}:{command.where}"
        problems.append(f"{where}: {script.describe(display(script.declared_in))}: no module {script.module} in the repository")
        script = None
    context.warnings += [problem for problem in problems if problem not in context.warnings]
    return script


def _resolve(
    launch: Launch,
    command: CommandLine,
    configs: ConfigReader,
    target: Path | None = None,
    shipped: ShippedAccelerateConfigs | None = None,
) -> Resolved:
    """What setup a launch runs its target under (domain.md §5.3)."""
    near = command.cwd
    script = _script_settings(launch, near, configs, target)
    if launch.launcher == "accelerate":
        beside = (command.source.parent, target.parent) if target else (command.source.parent,)
        base = _accelerate(launch, near, configs, beside, shipped)
    elif launch.launcher == "torchrun":
        base = Resolved(Kind.DDP, None, _torchrun_details(launch))
    elif launch.launcher == "deepspeed":
        base = Resolved(Kind.DEEPSPEED, None, _deepspeed_launcher_details(launch))
    elif launch.launcher == "trl":
        base = _trl(launch, near, configs)
    elif launch.wrapped_by:
        base = Resolved(Kind.DDP, None, f"{launch.wrapped_by} starts several processes")
    else:
        base = Resolved(Kind.SINGLE, None, "")
    if launch.wrapped_by and base.kind is Kind.SINGLE:
        base = Resolved(Kind.DDP, None, f"{launch.wrapped_by} starts several processes")
    if script is None:
        return base
    if base.kind in (Kind.ZERO3, Kind.DEEPSPEED) and script.kind not in (Kind.ZERO3, Kind.DEEPSPEED):
        return base
    details = ", ".join(d for d in (base.details, script.details) if d)
    return Resolved(script.kind, script.stage, details)


def _script_settings(launch: Launch, near: Path, configs: ConfigReader, target: Path | None = None) -> Resolved | None:
    """`--deepspeed ds.json`, `--fsdp ...`, `--fsdp_config ...`, or a recipe YAML (or arguments JSON), given to the script."""
    deepspeed = launch.script_arg("--deepspeed", "--deepspeed_config")
    if deepspeed:
        stage = _json_stage(deepspeed, near, configs)
        return _deepspeed(stage, f"--deepspeed {deepspeed}{configs.note(deepspeed)}")
    default = default_deepspeed_config(launch, target)
    if default:
        stage = _json_stage(default, near, configs)
        return _deepspeed(stage, f"the script's default --deepspeed {default}{configs.note(default)}")
    fsdp = launch.script_arg("--fsdp")
    if fsdp and fsdp.lower() not in ("false", "none", "''", '""'):
        return Resolved(Kind.FSDP, None, f"--fsdp {fsdp}")
    if launch.script_arg("--fsdp_config"):
        return Resolved(Kind.FSDP, None, f"--fsdp_config {launch.script_arg('--fsdp_config')}")
    recipe = launch.script_arg("--config", "--config_file", "") or _arguments_file(launch, target)
    if recipe and recipe.endswith((".yaml", ".yml", ".json")):  # a recipe, or the arguments as one file
        return _recipe(recipe, near, configs)
    return None


_ARGUMENTS_FILE_OPTION = LazyPattern(r"^--?\w*(args|arguments|config)\w*$")
_SETUP_OPTIONS = frozenset({"--deepspeed", "--deepspeed_config", "--fsdp_config", "--accelerate_config"})


def _arguments_file(launch: Launch, target: Path | None) -> str | None:
    """The file of arguments a script hands to `parse_json_file` / `parse_yaml_file` through an option of
    its own (Firefly's `--train_args_file train_args/sft/qwen-7b.json`): named like one, and the
    script reads such a file."""
    named = [
        value
        for option, value in launch.script_args.items()
        if option not in _SETUP_OPTIONS and _ARGUMENTS_FILE_OPTION.match(option) and value.endswith((".json", ".yaml", ".yml"))
    ]
    if len(named) != 1 or "$" in named[0] or target is None:
        return None
    try:
        if target.stat().st_size > MAX_LAUNCHER_BYTES:
            return None
        text = target.read_bytes()
    except OSError:
        return None
    return named[0] if b"parse_json_file" in text or b"parse_yaml_file" in text else None


def _recipe(name: str, near: Path, configs: ConfigReader) -> Resolved | None:
    path = configs.find(name, near)
    data = configs.load(path) if path else None
    if not isinstance(data, dict):
        return None
    if data.get("deepspeed"):
        value = data["deepspeed"]
        stage = zero_stage_of(value) if isinstance(value, dict) else _json_stage(str(value), path.parent, configs)  # type: ignore[union-attr]
        return _deepspeed(stage, f"{name} sets deepspeed: {value if isinstance(value, str) else '{...}'}")
    fsdp = data.get("fsdp")
    if fsdp and str(fsdp).lower() not in ("false", "none", ""):
        return Resolved(Kind.FSDP, None, f"{name} sets fsdp: {fsdp}")
    return None


def _torchrun_details(launch: Launch) -> str:
    count = launch.option("--nproc_per_node")
    if count in ("gpu", "auto"):  # torch/distributed/run.py determine_local_world_size
        return f"torchrun --nproc_per_node {count}: one process per GPU"
    return f"torchrun --nproc_per_node {count}" if count else "torchrun"


def _deepspeed_launcher_details(launch: Launch) -> str:
    if launch.option("--num_gpus", "--num_nodes", "--include", "--hostfile", "-H") is None:
        # deepspeed/launcher/runner.py: with no hostfile, --num_gpus or --include, every local GPU is used.
        return "the deepspeed launcher, one process per GPU (no --num_gpus)"
    return "the deepspeed launcher"


def _accelerate(
    launch: Launch,
    near: Path,
    configs: ConfigReader,
    beside: tuple[Path, ...] = (),
    shipped: ShippedAccelerateConfigs | None = None,
) -> Resolved:
    config_name = launch.option("--config_file")
    config: dict[str, object] = {}
    if config_name:
        path = configs.find(config_name, near)
        loaded = configs.load(path) if path else None
        if isinstance(loaded, dict):
            config = loaded
    kind, stage, details = _accelerate_config(config, near, configs) if config else (None, None, "")
    if launch.option("--use_deepspeed") is not None:
        zero = launch.option("--zero_stage")
        stage = int(zero) if zero and zero.isdigit() else stage
        file = launch.option("--deepspeed_config_file")
        if stage is None and file:
            stage = _json_stage(file, near, configs)
        kind = Kind.ZERO3 if stage == 3 else Kind.DEEPSPEED
        details = "--use_deepspeed" + (f", zero_stage {stage}" if stage is not None else "")
        if stage == 3 and (launch.option("--zero3_init_flag") or "").lower() == "false":
            details += f", {ZERO3_INIT_OFF}"
    elif launch.option("--use_fsdp") is not None:
        kind, details = Kind.FSDP, "--use_fsdp"
    elif launch.option("--multi_gpu") is not None:
        kind, details = Kind.DDP, "--multi_gpu"
    processes = launch.option("--num_processes")
    machines = launch.option("--num_machines")
    if kind is None or kind is Kind.SINGLE:
        if machines and machines.isdigit() and int(machines) > 1:
            return Resolved(Kind.DDP, None, f"--num_machines {machines}")
        if kind is None and processes and processes.isdigit():
            return Resolved(Kind.DDP if int(processes) > 1 else Kind.SINGLE, None, f"--num_processes {processes}")
        if kind is None and config_name:
            why = f"config {config_name} not found in the repository"
            return Resolved(Kind.POSSIBLE, None, f"{why}: one process per GPU on a multi-GPU host")
        if kind is None and launch.option("--cpu", "--use_cpu") is not None:
            return Resolved(Kind.POSSIBLE, None, "--cpu: processes on the CPU")
        unknown = next((name for name, value in launch.options.items() if "$" in name or "$" in value), None)
        if kind is None and unknown is not None:  # `$ACCELERATE_ARGS`, `--num_processes $GPUS`: maybe one process
            return Resolved(Kind.POSSIBLE, None, f"{unknown} is only known when the script runs")
        if kind is None:
            return _accelerate_default(beside, configs, shipped)
    return Resolved(kind, stage, details)


# What `accelerate launch` does with no config file, no `--multi_gpu` and no `--num_processes`
# (accelerate >= 0.17.0, commands/launch.py `_validate_launch_command`, PR #1134): it reads
# ~/.cache/huggingface/accelerate/default_config.yaml when there is one, else sets num_processes to
# the GPU count and, with more than one GPU, turns multi-GPU on, warning "More than one GPU was
# found, enabling multi-GPU training. If this was unintended please pass in `--num_processes=1`."
_ACCELERATE_DEFAULT = (
    "no config file: accelerate starts one process per GPU on a multi-GPU machine "
    '(it warns "More than one GPU was found, enabling multi-GPU training")'
)


def _accelerate_default(beside: tuple[Path, ...], configs: ConfigReader, shipped: ShippedAccelerateConfigs | None) -> Resolved:
    """A bare `accelerate launch script.py`: multi-GPU DDP, unless the repository ships the accelerate
    config to install as the default (`accelerate config`, or copy it): then that config's setup."""
    mark = len(configs.loaded)
    found = shipped.nearest(beside, lambda config, near: _accelerate_config(config, near, configs)[:2]) if shipped else None
    # The configs looked at to find the one the repository ships are not the launch's: only the one taken is.
    del configs.loaded[mark:]
    if found is None:
        return Resolved(Kind.DDP, None, _ACCELERATE_DEFAULT)
    path, config = found
    configs.loaded.append(path)
    kind, stage, details = _accelerate_config(config, path.parent, configs)
    shown = path.relative_to(configs.root).as_posix()
    return Resolved(
        kind, stage, f"no config file: accelerate reads its default config, and the repository ships {shown} ({details})"
    )


def _accelerate_config(config: dict[str, object], near: Path, configs: ConfigReader) -> tuple[Kind, int | None, str]:
    kind_name = str(config.get("distributed_type", "NO"))
    if kind_name in ("NO", "False", "None"):
        return Kind.SINGLE, None, "distributed_type NO"
    if kind_name == "DEEPSPEED":
        section = config.get("deepspeed_config")
        stage = None
        if isinstance(section, dict):
            value = section.get("zero_stage")
            stage = value if isinstance(value, int) else None
            if stage is None and isinstance(section.get("deepspeed_config_file"), str):
                stage = _json_stage(str(section["deepspeed_config_file"]), near, configs)
        details = "distributed_type DEEPSPEED" + (f", zero_stage {stage}" if stage is not None else "")
        if stage == 3 and isinstance(section, dict) and str(section.get("zero3_init_flag")).lower() == "false":
            details += f", {ZERO3_INIT_OFF}"
        return (Kind.ZERO3 if stage == 3 else Kind.DEEPSPEED), stage, details
    if kind_name == "FSDP":
        section = config.get("fsdp_config")
        efficient = isinstance(section, dict) and str(section.get("fsdp_cpu_ram_efficient_loading")).lower() == "true"
        return Kind.FSDP, None, "distributed_type FSDP" + (f", {EFFICIENT_LOADING}" if efficient else "")
    if kind_name == "MULTI_CPU":
        # Processes on the CPU (as `--cpu`): no GPU for a device_map to spread over or pile onto.
        return Kind.POSSIBLE, None, "distributed_type MULTI_CPU: processes on the CPU"
    if _MULTI.match(kind_name) or kind_name == "MEGATRON_LM":
        return Kind.DDP, None, f"distributed_type {kind_name}"
    return Kind.POSSIBLE, None, f"distributed_type {kind_name}"


def _trl(launch: Launch, near: Path, configs: ConfigReader) -> Resolved:
    name = launch.options.get("--accelerate_config")
    if name in _NAMED_ACCELERATE_CONFIGS:
        kind, stage = _NAMED_ACCELERATE_CONFIGS[name]
        # TRL's bundled fsdp1.yaml and fsdp2.yaml both turn efficient loading on.
        return Resolved(kind, stage, f"--accelerate_config {name}" + (f", {EFFICIENT_LOADING}" if kind is Kind.FSDP else ""))
    if name:
        path = configs.find(name, near)
        loaded = configs.load(path) if path else None
        if isinstance(loaded, dict):
            kind, stage, details = _accelerate_config(loaded, near, configs)
            return Resolved(kind, stage, details)
    return Resolved(Kind.POSSIBLE, None, "trl launches through accelerate")


def _json_stage(name: str, near: Path, configs: ConfigReader) -> int | None:
    path = configs.find(name, near)
    return zero_stage_of(configs.load(path)) if path else None


def _deepspeed(stage: int | None, details: str) -> Resolved:
    if stage is not None:
        details += f", zero_stage {stage}"
    return Resolved(Kind.ZERO3 if stage == 3 else Kind.DEEPSPEED, stage, details)


def _one_process(launch: Launch) -> bool:
    """The launch starts a single process (distributed machinery may still be on: DeepSpeed, MULTI_GPU)."""
    if launch.wrapped_by:
        return False
    if launch.launcher == "python":
        return True
    if launch.launcher == "torchrun":
        nodes = launch.option("--nnodes")
        return launch.option("--nproc_per_node") == "1" and (nodes in (None, "1", "1:1"))
    if launch.launcher == "deepspeed":
        return launch.option("--num_gpus") == "1" or _single_device(launch.option("--include"))
    if launch.launcher == "accelerate":
        return launch.option("--num_processes") == "1" and launch.option("--num_machines") in (None, "1")
    return False


def _one_gpu(launch: Launch, env: dict[str, str]) -> bool:
    """Each process sees exactly one GPU, so a spreading map resolves to that one device (domain.md §2.2)."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() and "," not in visible and "$" not in visible:
        return True
    if launch.wrapped_by == "srun" and launch.wrapper_options.get("--gpus-per-task") == "1":
        return True
    if launch.launcher == "deepspeed":
        return launch.option("--num_gpus") == "1" or _single_device(launch.option("--include"))
    return False


def _single_device(include: str | None) -> bool:
    """`--include localhost:0` (one host, one GPU)."""
    if not include or "@" in include:
        return False
    hosts = include.split("@")
    return len(hosts) == 1 and ":" in hosts[0] and "," not in hosts[0].split(":", 1)[1]


def _arguments(launch: Launch, near: Path, configs: ConfigReader, target: Path | None = None) -> tuple[tuple[str, str], ...]:
    """Script arguments an HfArgumentParser/TrlParser/argparse parser would turn into fields
    (`--q_lora True`), after the values of a config file the script reads them from (TRL's `--config
    recipe.yaml`, a single `args.yaml` or `args.json` for `parse_yaml_file` / `parse_json_file`),
    which the command line overrides."""
    given = tuple(
        (name.lstrip("-").replace("-", "_"), value)
        for name, value in launch.script_args.items()
        if name.startswith("--") and "$" not in value and "`" not in value
    )
    from_file = _config_file_arguments(launch, near, configs, target)
    names = {name for name, _ in given}
    return (*(item for item in from_file if item[0] not in names), *given)


def _config_file_arguments(
    launch: Launch, near: Path, configs: ConfigReader, target: Path | None = None
) -> tuple[tuple[str, str], ...]:
    name = launch.script_arg("--config") or launch.script_args.get("") or _arguments_file(launch, target)
    if not name or "$" in name or not name.endswith((".yaml", ".yml", ".json")):
        return ()
    path = configs.find(name, near)
    data = configs.load(path) if path else None
    if not isinstance(data, dict):
        return ()
    return tuple(
        (key.replace("-", "_"), _config_text(value))
        for key, value in data.items()
        if isinstance(key, str) and (value is None or isinstance(value, (bool, int, float, str)))
    )


def _config_text(value: object) -> str:
    """A YAML/JSON scalar as the command line would write it (`true` -> "True")."""
    return str(value)


def _short(text: str) -> str:
    return text if len(text) <= 90 else text[:87] + "..."


# -- modules imported by launched scripts -------------------------------------------------------


def _propagate_to_imports(
    context: RepoContext, launched: dict[Path, list[Evidence]], graph: ModuleGraph, display: Callable[[Path], str]
) -> dict[Path, set[Path]]:
    """Give the modules a launched script imports the script's launch evidence, for what it uses of
    them, and the modules those import, to any depth (a console script's module, for what its
    function reaches). Returns which modules each importer passed evidence to."""
    edges: dict[Path, set[Path]] = {}
    scripts = {
        script: carried for script, items in launched.items() if (carried := tuple(e for e in items if e.kind is not Kind.SINGLE))
    }
    # Modules whose imports cannot lead to a file a rule can fire in are not parsed to follow them.
    # Every launched script is read: the context depends on its import lines, whatever it launches under.
    worth_following = graph.leading_to_anchors(launched)
    stopped: list[Path] = []
    for script, carried in scripts.items():
        _propagate_launch(context, script, carried, graph, display, edges, worth_following, stopped)
    if stopped:
        more = f" and {len(stopped) - 1} more" if len(stopped) > 1 else ""
        context.warnings.append(
            f"{display(stopped[0])}{more}: a launch reaches more than {MAX_MODULES_PER_LAUNCH} modules of the "
            "repository (a library's own package): the nearest ones carry it, the rest are not followed"
        )
    return edges


# Breadth first, a launch reaches the modules its script imports, then theirs. A training script's
# loader is a few imports away; past this many modules, the launch is walking a library's own package
# (diffusers' examples import all of src/diffusers), whose loads are the library's, and whose parse
# would cost seconds per run.
MAX_MODULES_PER_LAUNCH = 64


def _propagate_launch(
    context: RepoContext,
    script: Path,
    items: tuple[Evidence, ...],
    graph: ModuleGraph,
    display: Callable[[Path], str],
    edges: dict[Path, set[Path]],
    worth_following: set[Path] | None,
    stopped: list[Path],
) -> None:
    """Breadth first from one launched script (`stopped` gets it when it reaches too many modules). Each module gets the script's evidence once, with the
    shortest chain of importers; reached again, it is followed only for the names not yet followed
    (what a module imports for a set of names is what it imports for each), so every module is
    followed at most once per name and cycles end."""
    given: dict[Path, tuple[Evidence, ...]] = {script: items}
    # A launched script runs all of itself; a console script's module, what its function reaches.
    used = context.used.get(script, frozenset({"__main__"}))
    followed: dict[Path, frozenset[str]] = {script: frozenset({"*"}) if "__main__" in used else used}
    queue = deque([(script, followed[script])])
    while queue:
        path, wanted = queue.popleft()
        if worth_following is not None and path not in worth_following:
            continue
        if len(given) > MAX_MODULES_PER_LAUNCH:
            stopped.append(script)
            return
        summary = graph.summary(path)
        if summary is None:
            continue
        for module, names in summary.imports(wanted):
            if module == script:
                continue  # the launched script itself: launched, not imported
            if module not in given:
                shown = display(module)
                given[module] = tuple(e._replace(origin="import", chain=(shown, *e.chain), entry="") for e in given[path])
                existing = context.by_file.get(module, ())
                context.by_file[module] = existing + tuple(e for e in given[module] if e not in existing)
            context.used[module] = context.used.get(module, frozenset()) | names
            edges.setdefault(path, set()).add(module)
            done = followed.get(module, frozenset())
            new = frozenset() if "*" in done else names - done
            if new:
                # Go on through every module: helpers.py may import loader.py. A module that imports
                # nothing of the repository costs a read and a regex, not a parse.
                followed[module] = followed.get(module, frozenset()) | new
                queue.append((module, new))


def _attach_parsers(
    context: RepoContext,
    launched: dict[Path, list[Evidence]],
    graph: ModuleGraph,
    display: Callable[[Path], str],
) -> list[Path]:
    """Give each launch's evidence, and what the modules its script imports inherit of it, the
    script's parser fields: `utils.py` reads `args.use_4bit_quantization`, which `train.py`'s
    dataclass defines. Only a script that imports the repository's modules needs this (its summary
    is parsed already); a script on its own reads its parser when it is checked. Returns the modules
    read for their parsers."""
    from placement_lint.analysis.arguments import parser_fields

    read: list[Path] = []
    attributes: dict[Path, frozenset[str]] = {}
    reached: dict[str, list[Path]] | None = None
    # Shared by the scripts that import the same module; a module the graph parsed is not parsed again.
    parsed: dict[Path, ast.Module | None] = {}
    for target in launched:
        summary = graph.summary(target)
        if summary is None:
            continue
        imported = [module for path in _local_imports(summary) if (module := _parser_module(path, graph, parsed, read))]
        fields = parser_fields(summary.module, imported)
        if not fields:
            continue
        table = tuple((key, *field) for key, field in fields.items())
        script = display(target)
        if reached is None:  # which files each launched script's evidence reached, once
            reached = {}
            for path, items in context.by_file.items():
                for name in {e.chain[-1] for e in items if e.chain}:
                    reached.setdefault(name, []).append(path)
        for path in reached.get(script, ()):
            items = context.by_file[path]
            # Each file carries only the fields it reads (`args.use_4bit`): a parser has hundreds.
            if path not in attributes:
                attributes[path] = _attribute_names(path, graph.bytes_of(path))
                read.append(path)  # what it reads decides what it carries: a change must rebuild the context
            own = tuple(row for row in table if row[1] in attributes[path])
            context.by_file[path] = tuple(e._replace(parser=own) if e.chain and e.chain[-1] == script else e for e in items)
    return read


_ATTRIBUTE = LazyPattern(rb"\.([A-Za-z_][A-Za-z0-9_]*)")


def _attribute_names(path: Path, raw: bytes | None = None) -> frozenset[str]:
    """The attribute names a Python file's text reads (`raw`: its bytes, when the graph read them),
    from a cheap scan (no parse)."""
    try:
        if raw is None:
            raw = path.read_bytes() if path.stat().st_size <= MAX_LAUNCHER_BYTES else b""
    except OSError:
        return frozenset()
    if len(raw) > MAX_LAUNCHER_BYTES:
        return frozenset()
    return frozenset(name.decode("ascii") for name in set(_ATTRIBUTE.findall(raw)))


def _local_imports(summary: ModuleSummary) -> list[Path]:
    return sorted({path for path, _ in summary.imports(frozenset({"*"}))})


def _parser_module(path: Path, graph: ModuleGraph, parsed: dict[Path, ast.Module | None], read: list[Path]) -> ast.Module | None:
    """A module of the repository that may define the script's parser (dataclasses, add_argument),
    parsed (never run); the graph's tree when it parsed the module already."""
    if path not in parsed:
        parsed[path] = None
        try:
            raw = graph.bytes_of(path)
            if raw is None and path.stat().st_size <= MAX_LAUNCHER_BYTES:
                raw = path.read_bytes()
            if raw is not None and len(raw) <= MAX_LAUNCHER_BYTES:
                if b"dataclass" in raw or b"add_argument" in raw:
                    read.append(path)
                    summary = graph.summary(path)
                    parsed[path] = summary.module if summary is not None else ast.parse(raw)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    return parsed[path]


def _follow_returns(
    context: RepoContext, graph: ModuleGraph, edges: dict[Path, set[Path]], display: Callable[[Path], str]
) -> list[Path]:
    """Fill `context.consumers`: for each module an importer gave evidence to, where the importer sends
    what its calls of the module's functions return. Through a chain too (train.py trains what
    helpers.build returns, which is what loader.load returns): an importer's own remote consumers
    take part, so the passes repeat until nothing new is found (each pass must add a consumer, and
    there are finitely many). Returns the modules read to tell trainer subclasses (inputs of the
    context, like the configs)."""
    calls: dict[Path, dict[Path, dict[str, list[ast.Call]]]] = {}
    parsed: dict[Path, tuple[Resolver, ImportTable, ImportedClasses]] = {}
    pending = set(edges)
    for _ in range(len(edges) + 1):  # a consumer travels one importer per pass, and a chain has at most this many
        if not pending:
            break
        changed: set[Path] = set()
        for importer in sorted(pending):
            summary = graph.summary(importer)
            if summary is None:
                continue
            if importer not in calls:
                calls[importer] = summary.calls_into()
            wanted = {target: calls[importer][target] for target in sorted(edges[importer]) if target in calls[importer]}
            if not wanted:
                continue
            if importer not in parsed:
                parsed[importer] = _flow_inputs(summary, graph)
            resolver, imports, classes = parsed[importer]
            # A fresh flow each pass: what it finds depends on the importer's own remote consumers.
            flow = ModelFlow(summary.module, imports, resolver, context.consumers.get(importer), classes)
            where = display(importer)
            for target, by_name in wanted.items():
                for name, nodes in by_name.items():
                    for position, found in _returned_uses(flow, nodes, where):
                        # `from alignment import get_model` reaches alignment/__init__.py, which re-exports
                        # model_utils.get_model: the loader is there.
                        for module, function in graph.definitions(target, name):
                            key = function if position is None else returned_item(function, position)
                            known = context.consumers.setdefault(module, {})
                            new = tuple(c for c in found if c not in known.get(key, ()))
                            if new:
                                known[key] = known.get(key, ()) + new
                                changed.add(module)
        pending = {path for path in changed if path in edges}
    context.consumers = {path: uses for path, uses in context.consumers.items() if uses}
    return sorted({path for _, _, classes in parsed.values() for path in classes.read})


def _record_importer_calls(context: RepoContext, graph: ModuleGraph, edges: dict[Path, set[Path]]) -> list[Path]:
    """Fill `context.calls`: for each module a launch reaches through imports, per top-level function,
    the literal arguments (and the defaults they leave) of every call its launched importers make of
    it; None when an importer also uses the function otherwise (a callback: its calls are unknown).
    Returns the modules read for their functions' defaults (inputs of the context, whole)."""
    from placement_lint.analysis.dataflow import call_literals, rebound_names

    trees: dict[Path, ast.Module | None] = {}
    rebound: dict[int, set[str]] = {}  # by function (its node's id: the trees live as long as this)
    for importer in sorted(edges):
        summary = graph.summary(importer)
        if summary is None:
            continue
        by_target = summary.calls_into()
        named_otherwise: set[str] | None = None  # worked out once an importer, at its first call
        for target in sorted(edges[importer]):
            for name, nodes in by_target.get(target, {}).items():
                if named_otherwise is None:
                    named_otherwise = _named_otherwise(summary.module)
                passed_around = name in named_otherwise
                for module, function_name in graph.definitions(target, name):
                    if not graph.holds_anchor(module):
                        continue  # no rule fires there: what its functions are called with decides nothing
                    function = _top_level_function(_tree(graph, module, trees), function_name)
                    known = context.calls.setdefault(module, {})
                    if function is None or passed_around or (function_name in known and known[function_name] is None):
                        known[function_name] = None
                        continue
                    bindings = known.setdefault(function_name, [])
                    if id(function) not in rebound:
                        rebound[id(function)] = rebound_names(function)
                    for call in nodes:
                        literals = call_literals(call, function, rebound[id(function)])
                        literal = {k: v.value for k, v in literals.items() if _plain(v)}
                        if literal not in bindings:
                            bindings.append(literal)  # type: ignore[union-attr]
    return [path for path, tree in trees.items() if tree is not None]


def _plain(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, (str, int, float, bool)))


def _named_otherwise(module: ast.Module) -> set[str]:
    """The names the importer uses other than as the function of a call (`model_init=load_model`)."""
    index = index_of(module)  # built already for the importer's parser fields
    called = {id(call.func) for call in index.calls}
    named: set[str] = set()
    for node in index.nodes:
        if id(node) in called:
            continue
        if isinstance(node, ast.Name):
            named.add(node.id)
        elif isinstance(node, ast.Attribute):
            named.add(node.attr)
    return named


def _tree(graph: ModuleGraph, module: Path, trees: dict[Path, ast.Module | None]) -> ast.Module | None:
    if module not in trees:
        trees[module] = graph.tree(module)
    return trees[module]


def _top_level_function(tree: ast.Module | None, name: str) -> ast.FunctionDef | None:
    if tree is None:
        return None
    found = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name]
    return found[0] if len(found) == 1 and isinstance(found[0], ast.FunctionDef) else None


def _returned_uses(flow: ModelFlow, calls: list[ast.Call], where: str) -> list[tuple[int | None, tuple[Consumer, ...]]]:
    """Where an importer sends what its `calls` of one function return: the whole value, and each item
    of a tuple it unpacks (`model, tokenizer = utils.load_model(args)`), located in the importer."""
    whole = tuple(dict.fromkeys(c.elsewhere(where) for call in calls for c in flow.consumers(call)))
    found: list[tuple[int | None, tuple[Consumer, ...]]] = [(None, whole)]
    positions = sorted({i for call in calls for i in unpacked_positions(call, flow.resolver)})
    for position in positions:
        items = tuple(dict.fromkeys(c.elsewhere(where) for call in calls for c in flow.consumers(call, 0, position)))
        found.append((position, items))
    return found


def _flow_inputs(summary: ModuleSummary, graph: ModuleGraph) -> tuple[Resolver, ImportTable, ImportedClasses]:
    from placement_lint.context.classes import ImportedClasses  # it imports this module
    from placement_lint.distributed import SINGLE

    resolver = Resolver(summary.module, SINGLE)
    classes = ImportedClasses(summary.module, summary.path, graph)
    return resolver, ImportTable.of(summary.module, resolver.index.nodes), classes
