"""What setup a launch runs its target under (domain.md §5.3): the launcher's options, the configs
they name (accelerate YAML, DeepSpeed JSON, recipe YAML) and what the script is given, as the
evidence's kind, ZeRO stage and details; and the script arguments a parser would read."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from placement_lint.context.commands import Launch
from placement_lint.context.configs import ConfigReader, zero_stage_of
from placement_lint.context.evidence import EFFICIENT_LOADING, ZERO3_INIT_OFF, Kind
from placement_lint.context.launch_files import MAX_LAUNCHER_BYTES, CommandLine
from placement_lint.context.script_defaults import (
    ConfigSection,
    FlagConfig,
    deepspeed_config_flag,
    default_deepspeed_config,
    handed_sections,
    loaded_files,
)
from placement_lint.context.shipped_configs import ShippedAccelerateConfigs
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple

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
    # The accelerate config the launch runs with asks for one process (`num_processes: 1`), which
    # the launcher's own options do not show.
    one_process: bool = False


def resolve_setup(
    launch: Launch,
    command: CommandLine,
    configs: ConfigReader,
    target: Path | None = None,
    shipped: ShippedAccelerateConfigs | None = None,
    env: Mapping[str, str] | None = None,
) -> Resolved:
    """What setup a launch runs its target under (domain.md §5.3). `env`: the variables the launch runs
    with (exported earlier, or written before the command), which accelerate and transformers read."""
    near = command.cwd
    env = {} if env is None else env
    script = _script_settings(launch, near, configs, target)
    if launch.launcher == "accelerate":
        beside = (command.source.parent, target.parent) if target else (command.source.parent,)
        base = _accelerate(launch, near, configs, beside, shipped)
    elif launch.launcher == "torchrun":
        base = Resolved(Kind.DDP, None, _torchrun_details(launch))
    elif launch.launcher == "deepspeed":
        base = Resolved(Kind.DEEPSPEED, None, _deepspeed_launcher_details(launch, env))
    elif launch.launcher == "trl":
        base = _trl(launch, near, configs)
    elif launch.wrapped_by:
        base = Resolved(Kind.DDP, None, f"{launch.wrapped_by} starts several processes")
    else:
        base = Resolved(Kind.SINGLE, None, "")
    if launch.wrapped_by and base.kind is Kind.SINGLE:
        base = Resolved(Kind.DDP, None, f"{launch.wrapped_by} starts several processes")
    if script is None:
        resolved = _environment_settings(base, env, near, configs)
    elif base.kind in (Kind.ZERO3, Kind.DEEPSPEED) and script.kind not in (Kind.ZERO3, Kind.DEEPSPEED):
        resolved = base
    else:
        resolved = Resolved(script.kind, script.stage, ", ".join(d for d in (base.details, script.details) if d))
    # What the script and the environment turn on changes the setup, not how many processes run it.
    return resolved._replace(one_process=base.one_process)


# The spellings of "true" that Python's strtobool (transformers' `strtobool`, accelerate's `str_to_bool`) accepts.
_STRTOBOOL_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})


def _environment_settings(base: Resolved, env: Mapping[str, str], near: Path, configs: ConfigReader) -> Resolved:
    """The setup the launch's environment turns on, where neither the launcher, its config nor the
    script's arguments chose DeepSpeed or FSDP (they set these variables themselves, over the user's).

    - `ACCELERATE_USE_DEEPSPEED`: transformers' `TrainingArguments.__post_init__` reads it with
      `strtobool` and builds a `DeepSpeedPlugin()` the Trainer hands to accelerate (accelerate's own
      `Accelerator`/`AcceleratorState` ask for "true"). The plugin takes its stage from
      `ACCELERATE_DEEPSPEED_CONFIG_FILE`, else `ACCELERATE_DEEPSPEED_ZERO_STAGE`, else 2
      (accelerate utils/dataclasses.py `DeepSpeedPlugin.__post_init__`). One process or several, as launched.
    - `ACCELERATE_USE_FSDP`: accelerate turns FSDP on only for "true" (`AcceleratorState`: `.lower() ==
      "true"` since 1.10, `== "true"` before; nothing in transformers' Trainer reads it with `strtobool`),
      and only over several processes (a MULTI_GPU state). With it, `FSDP_CPU_RAM_EFFICIENT_LOADING`
      makes transformers load on rank 0 only (integrations/fsdp.py `is_fsdp_enabled`, `strtobool` on both)."""
    if base.kind in (Kind.DEEPSPEED, Kind.ZERO3, Kind.FSDP) or not env:
        return base
    deepspeed = env.get("ACCELERATE_USE_DEEPSPEED")
    if deepspeed is not None and deepspeed.lower() in _STRTOBOOL_TRUE:
        said = f"ACCELERATE_USE_DEEPSPEED={deepspeed}"
        config = env.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "")
        written = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "")
        if config and config != "none" and "$" not in config:
            stage = _json_stage(config, near, configs)
            said += f", ACCELERATE_DEEPSPEED_CONFIG_FILE={config}{configs.note(config)}"
        elif written:
            stage = int(written) if written.isdigit() else None
            said += f", ACCELERATE_DEEPSPEED_ZERO_STAGE={written}"
        else:
            stage = 2  # DeepSpeedPlugin's default
        details = ", ".join(d for d in (base.details, said) if d)
        return _deepspeed(stage, details)
    fsdp = env.get("ACCELERATE_USE_FSDP")
    if fsdp is None or base.kind is not Kind.DDP:
        return base
    if fsdp.lower() != "true":
        if fsdp.lower() in _STRTOBOOL_TRUE:  # said, so the reader sees why the launch is not FSDP
            note = f'ACCELERATE_USE_FSDP={fsdp} (accelerate turns FSDP on only for "true")'
            return Resolved(base.kind, base.stage, ", ".join(d for d in (base.details, note) if d))
        return base
    details = f"{base.details}, ACCELERATE_USE_FSDP={fsdp}" if base.details else f"ACCELERATE_USE_FSDP={fsdp}"
    efficient = env.get("FSDP_CPU_RAM_EFFICIENT_LOADING", "")
    if efficient.lower() in _STRTOBOOL_TRUE:
        details += f", FSDP_CPU_RAM_EFFICIENT_LOADING={efficient}: {EFFICIENT_LOADING}"
    return Resolved(Kind.FSDP, None, details)


def _script_settings(launch: Launch, near: Path, configs: ConfigReader, target: Path | None = None) -> Resolved | None:
    """`--deepspeed ds.json`, `--fsdp ...`, `--fsdp_config ...`, or a recipe YAML (or arguments JSON), given to the script."""
    # `--deepspeed --deepspeed_config ds.json`: deepspeed.add_config_arguments makes `--deepspeed` a
    # switch and `--deepspeed_config` the path, so a bare `--deepspeed` must not hide the path beside it.
    deepspeed = launch.script_arg("--deepspeed") or launch.script_arg("--deepspeed_config")
    if deepspeed:
        stage = _json_stage(deepspeed, near, configs)
        return _deepspeed(stage, f"--deepspeed {deepspeed}{configs.note(deepspeed)}")
    flagged = deepspeed_config_flag(launch, target, configs.scripts, configs.script_tree)
    if flagged is not None and flagged.given and (found := _flagged_config(flagged, near, configs, target)) is not None:
        return found
    default = default_deepspeed_config(launch, target, configs.scripts, configs.script_tree)
    if default:
        stage = _json_stage(default, near, configs)
        return _deepspeed(stage, f"the script's default --deepspeed {_from_root(default, configs)}{configs.note(default)}")
    if flagged is not None and not flagged.given and (found := _flagged_config(flagged, near, configs, target)) is not None:
        return found
    fsdp = launch.script_arg("--fsdp")
    if fsdp and fsdp.lower() not in ("false", "none", "''", '""'):
        return Resolved(Kind.FSDP, None, f"--fsdp {fsdp}")
    if launch.script_arg("--fsdp_config"):
        return Resolved(Kind.FSDP, None, f"--fsdp_config {launch.script_arg('--fsdp_config')}")
    recipe = launch.script_arg("--config", "--config_file", "") or _arguments_file(launch, target, configs.scripts)
    found = _recipe(recipe, near, configs) if recipe and recipe.endswith((".yaml", ".yml", ".json")) else None
    if found is not None and found.stage is not None:  # a recipe, or the arguments as one file
        return found
    # A top-level `deepspeed:` whose stage is not known (a mapping of the script's own, `deepspeed:
    # {config_path: ...}`) gives way to a section the script hands on.
    # After the files the launch names, those the script opens by a path of its own.
    loaded = [_from_root(name, configs) for name in loaded_files(target, configs.scripts, configs.script_tree)]
    handed = _handed_section([*_named_files(launch), *loaded], near, configs, target)
    return handed if handed is not None else found


def _from_root(name: str, configs: ConfigReader) -> str:
    """A config path a script gives: one it joins from its own folder comes absolute, and is said from
    the repository's root; any other as written."""
    path = Path(name)
    return path.relative_to(configs.root).as_posix() if path.is_relative_to(configs.root) else name


def _flagged_config(flagged: FlagConfig, near: Path, configs: ConfigReader, target: Path | None) -> Resolved | None:
    """DeepSpeed with the stage of the config a script option of its own names (`--ds_file
    ds_zero3.json`), when that file is in the repository; None when it is not (a cluster's path, a
    default nobody ships): the option says nothing of the setup then."""
    path = configs.find(flagged.value, near)
    if path is None:
        return None
    script = target.name if target is not None else "the script"
    stage = zero_stage_of(configs.load(path))
    return _deepspeed(stage, f"{flagged.describe(script)}{configs.note(flagged.value)}")


_ARGUMENTS_FILE_OPTION = LazyPattern(r"^--?\w*(args|arguments|config)\w*$")
_SETUP_OPTIONS = frozenset({"--deepspeed", "--deepspeed_config", "--fsdp_config", "--accelerate_config"})


def _arguments_file(launch: Launch, target: Path | None, read: list[Path] | None = None) -> str | None:
    """The file of arguments a script hands to `parse_json_file` / `parse_yaml_file` through an option of
    its own (Firefly's `--train_args_file train_args/sft/qwen-7b.json`): named like one, and the
    script reads such a file. `read`: where to note the script, whose text then decides (ConfigReader.scripts)."""
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
    if read is not None:
        read.append(target)
    return named[0] if b"parse_json_file" in text or b"parse_yaml_file" in text else None


# An option of a script's own that names a file of its settings (`--cfg`, `--train_config`, `--hparams`),
# not its data (`--data_path train.json`).
_SETTINGS_FILE_OPTION = LazyPattern(r"^--?\w*(arg|conf|cfg|recipe|setting|param|option|yaml)\w*$")


def _named_files(launch: Launch) -> list[str]:
    """The YAML and JSON files a launch hands its script as its settings, positional (the first) or
    through an option of the script's own named so, in the order written; not the setup options,
    which are read as such."""
    named = [
        value
        for option, value in launch.script_args.items()
        if option == "" or (option not in _SETUP_OPTIONS and _SETTINGS_FILE_OPTION.match(option))
    ]
    return [name for name in named if name.endswith((".yaml", ".yml", ".json")) and "$" not in name]


def _handed_section(names: list[str], near: Path, configs: ConfigReader, target: Path | None) -> Resolved | None:
    """The setup a section of a file the launch names sets, where the launched script loads a file
    itself and hands that section to its training arguments (script_defaults.handed_sections):
    GLM-4's `Seq2SeqTrainingArguments(**config["training_args"])` of `finetune.py ... configs/sft.yaml`.
    Which of the files the launch names the script loads is not followed: the first that has the
    section, with a `deepspeed:` or `fsdp:` key in it, is taken. A key path read off an attribute
    (`self.config.training`) is tried from each of its tails."""
    sections = handed_sections(target, configs.scripts, configs.script_tree) if names else []
    for name in names if sections else ():
        path = configs.find(name, near)
        data = configs.load(path) if path else None
        if isinstance(data, dict) and (found := _section_of(data, sections, name, path.parent, configs)) is not None:  # type: ignore[union-attr]
            return found
    return None


def _section_of(
    data: dict[object, object], sections: list[ConfigSection], name: str, near: Path, configs: ConfigReader
) -> Resolved | None:
    for section in sections:
        for start in range(len(section.keys)):
            keys = section.keys[start:]
            value = _walk(data, keys)
            if value is None:
                continue
            if not section.whole:
                return _deepspeed_value(value, f"{name} sets {'.'.join(keys)}", near, configs)
            if isinstance(value, dict):
                found = _section_setup(value, f"{name} sets {'.'.join(keys)}.", near, configs)
                if found is not None:
                    return found
    return None


def _walk(data: dict[object, object], keys: tuple[str, ...]) -> object:
    value: object = data
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _section_setup(data: dict[object, object], said: str, near: Path, configs: ConfigReader) -> Resolved | None:
    """`deepspeed:` (a JSON path, or the config inline) or `fsdp:` in arguments read from a file."""
    if data.get("deepspeed"):
        return _deepspeed_value(data["deepspeed"], f"{said}deepspeed", near, configs)
    fsdp = data.get("fsdp")
    if fsdp and str(fsdp).lower() not in ("false", "none", ""):
        return Resolved(Kind.FSDP, None, f"{said}fsdp: {fsdp}")
    return None


def _deepspeed_value(value: object, said: str, near: Path, configs: ConfigReader) -> Resolved | None:
    if isinstance(value, dict):
        return _deepspeed(zero_stage_of(value), f"{said}: {{...}}")
    if isinstance(value, str) and value:
        return _deepspeed(_json_stage(value, near, configs), f"{said}: {value}{configs.note(value)}")
    return None


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


def _deepspeed_launcher_details(launch: Launch, env: Mapping[str, str]) -> str:
    if _deepspeed_filters(launch):
        return "the deepspeed launcher"
    visible = _visible_devices(env)
    if visible is not None:
        # deepspeed/launcher/runner.py `main`: with no hostfile and no --include/--exclude/--num_gpus/
        # --num_nodes, CUDA_VISIBLE_DEVICES becomes `--include localhost:<devices>`.
        return f"the deepspeed launcher, CUDA_VISIBLE_DEVICES={visible}: --include localhost:{visible}"
    # deepspeed/launcher/runner.py: with no hostfile, --num_gpus or --include, every local GPU is used.
    return "the deepspeed launcher, one process per GPU (no --num_gpus)"


_DEEPSPEED_GPUS = ("--num_gpus", "--num_accelerators")
_DEEPSPEED_INCLUDE = ("--include", "-i")
_DEEPSPEED_EXCLUDE = ("--exclude", "-e")
_DEEPSPEED_HOSTFILE = ("--hostfile", "-H")


def _deepspeed_filters(launch: Launch) -> bool:
    """The launch names its resources itself (deepspeed's runner then ignores CUDA_VISIBLE_DEVICES)."""
    return (
        launch.option(*_DEEPSPEED_GPUS, "--num_nodes", *_DEEPSPEED_INCLUDE, *_DEEPSPEED_EXCLUDE, *_DEEPSPEED_HOSTFILE) is not None
    )


def _visible_devices(env: Mapping[str, str]) -> str | None:
    visible = env.get("CUDA_VISIBLE_DEVICES", "").strip().strip("\"'")
    return visible if visible and "$" not in visible else None


def _deepspeed_local_gpus(launch: Launch, env: Mapping[str, str]) -> int | None:
    """How many GPUs the deepspeed launcher uses on each node, the way deepspeed/launcher/runner.py
    `main` works them out: `--num_gpus N`; the slots of `--include` on its one host; else, with no
    hostfile nor filter, the devices of CUDA_VISIBLE_DEVICES (as `--include localhost:...`). None: all
    of them, or unknown. Each process it starts sees all of these (launch.py sets CUDA_VISIBLE_DEVICES
    to the node's list and the process picks its own by LOCAL_RANK)."""
    gpus = launch.option(*_DEEPSPEED_GPUS)
    if gpus is not None:
        return int(gpus) if gpus.isdigit() else None
    include = launch.option(*_DEEPSPEED_INCLUDE)
    if include is None and not _deepspeed_filters(launch):
        visible = _visible_devices(env)
        include = f"localhost:{visible}" if visible is not None else None
    if not include or "@" in include or ":" not in include or "$" in include:
        return None
    return len([slot for slot in include.split(":", 1)[1].split(",") if slot.strip()])


def _deepspeed_one_node(launch: Launch) -> bool:
    """The deepspeed launcher runs on this machine alone: no hostfile (its default, /job/hostfile, is a
    cluster's), or one asked for by `--num_nodes 1` or an `--include` of one host."""
    if launch.option(*_DEEPSPEED_HOSTFILE) is None:
        return True
    include = launch.option(*_DEEPSPEED_INCLUDE)
    return launch.option("--num_nodes") == "1" or (include is not None and "@" not in include and "$" not in include)


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
    kind, stage, details = _accelerate_config(config, near, configs, launch) if config else (None, None, "")
    if config:  # a path written for another machine: which rule found the file here
        details += configs.note(config_name)  # type: ignore[arg-type]
    alone = kind is not None and _config_runs_one_process(kind, config, launch)
    if alone:
        details += _ONE_PROCESS
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
        kind, details = Kind.FSDP, "--use_fsdp" + _efficient_loading(None, launch)
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
            return _accelerate_default(beside, configs, shipped, launch)
    return Resolved(kind, stage, details, alone)


# What the details say of a config that asks for one process.
_ONE_PROCESS = ", num_processes 1: one process"


def _config_runs_one_process(kind: Kind, config: dict[str, object], launch: Launch) -> bool:
    """The accelerate config makes the launch one process: accelerate's `_validate_launch_command`
    copies the config's `num_processes` and `num_machines` over the options the command line left
    unset, and its launchers then start `num_processes // num_machines` processes on each machine
    (`torchrun --nproc_per_node 1` for MULTI_GPU and FSDP, the same for DEEPSPEED on one machine). A
    MULTI_GPU config of one process is still distributed (a process group of one), but no other rank
    shares its GPU."""
    if kind not in (Kind.DDP, Kind.DEEPSPEED, Kind.ZERO3, Kind.FSDP) or launch.option("--num_processes") is not None:
        return False  # one process already, or the command line's count, which `one_process` reads
    machines = launch.option("--num_machines")
    machines = machines if machines is not None else str(config.get("num_machines", 1))
    return str(config.get("num_processes")) == "1" and machines == "1"


# What `accelerate launch` does with no config file, no `--multi_gpu` and no `--num_processes`
# (accelerate >= 0.17.0, commands/launch.py `_validate_launch_command`, PR #1134): it reads
# ~/.cache/huggingface/accelerate/default_config.yaml when there is one, else sets num_processes to
# the GPU count and, with more than one GPU, turns multi-GPU on, warning "More than one GPU was
# found, enabling multi-GPU training. If this was unintended please pass in `--num_processes=1`."
_ACCELERATE_DEFAULT = (
    "no config file: accelerate starts one process per GPU on a multi-GPU machine "
    '(it warns "More than one GPU was found, enabling multi-GPU training")'
)


def _accelerate_default(
    beside: tuple[Path, ...], configs: ConfigReader, shipped: ShippedAccelerateConfigs | None, launch: Launch
) -> Resolved:
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
    alone = _config_runs_one_process(kind, config, launch)
    if alone:
        details += _ONE_PROCESS
    shown = path.relative_to(configs.root).as_posix()
    return Resolved(
        kind,
        stage,
        f"no config file: accelerate reads its default config, and the repository ships {shown} ({details})",
        alone,
    )


def _efficient_loading(section: object, launch: Launch | None) -> str:
    """What an `accelerate launch` under FSDP says of efficient loading, as details: the config's
    `fsdp_cpu_ram_efficient_loading` when it names it (accelerate copies the config's FSDP keys over
    its options), else the launch's `--fsdp_cpu_ram_efficient_loading`, else that option's default,
    "true" (accelerate >= 0.24, commands/launch.py; every TRL that loads a model id with "auto" needs
    a later accelerate): `FSDP_CPU_RAM_EFFICIENT_LOADING` is set from it for the script."""
    written = section.get("fsdp_cpu_ram_efficient_loading") if isinstance(section, dict) else None
    if written is not None:
        return f", {EFFICIENT_LOADING}" if str(written).lower() == "true" else ""
    option = launch.option("--fsdp_cpu_ram_efficient_loading") if launch is not None else None
    if option is not None:
        return f", {EFFICIENT_LOADING}" if option.lower() == "true" else ""
    return f", {EFFICIENT_LOADING} by accelerate launch's default"


def _accelerate_config(
    config: dict[str, object], near: Path, configs: ConfigReader, launch: Launch | None = None
) -> tuple[Kind, int | None, str]:
    kind_name = str(config.get("distributed_type", "NO"))
    if kind_name in ("NO", "False", "None"):
        return Kind.SINGLE, None, "distributed_type NO"
    if kind_name == "DEEPSPEED":
        section = config.get("deepspeed_config")
        if not isinstance(section, dict):
            section = {}
        value = section.get("zero_stage")
        stage = value if isinstance(value, int) else None
        file = section.get("deepspeed_config_file")
        file = file if isinstance(file, str) else None
        if stage is None and file is not None:
            stage = _json_stage(file, near, configs)
        details = "distributed_type DEEPSPEED" + (f", zero_stage {stage}" if stage is not None else "")
        if file is not None:
            details += configs.note(file)
        if stage == 3 and str(section.get("zero3_init_flag")).lower() == "false":
            details += f", {ZERO3_INIT_OFF}"
        return (Kind.ZERO3 if stage == 3 else Kind.DEEPSPEED), stage, details
    if kind_name == "FSDP":
        return Kind.FSDP, None, "distributed_type FSDP" + _efficient_loading(config.get("fsdp_config"), launch)
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
            alone = _config_runs_one_process(kind, loaded, launch)
            return Resolved(kind, stage, details + _ONE_PROCESS if alone else details, alone)
    return Resolved(Kind.POSSIBLE, None, "trl launches through accelerate")


def _json_stage(name: str, near: Path, configs: ConfigReader) -> int | None:
    path = configs.find(name, near)
    return zero_stage_of(configs.load(path)) if path else None


def _deepspeed(stage: int | None, details: str) -> Resolved:
    if stage is not None:
        details += f", zero_stage {stage}"
    return Resolved(Kind.ZERO3 if stage == 3 else Kind.DEEPSPEED, stage, details)


def one_process(launch: Launch, env: Mapping[str, str] | None = None, resolved: Resolved | None = None) -> bool:
    """The launch starts a single process (distributed machinery may still be on: DeepSpeed, MULTI_GPU).
    `resolved`: the setup the launch's configs give it, which may ask for one process themselves."""
    if launch.wrapped_by:
        return False
    if resolved is not None and resolved.one_process:
        return True
    if launch.launcher == "python":
        return True
    if launch.launcher == "torchrun":
        # torch/distributed/run.py get_args_parser: --nproc-per-node and --nnodes default to "1" and
        # "1:1" (or PET_NPROC_PER_NODE / PET_NNODES), so a bare `torchrun train.py` is one process;
        # not when a word the script computes (`torchrun $DISTRIBUTED_ARGS train.py`) may set them.
        env = env or {}  # the caller's, with the launch's own prefix (`PET_NNODES=2 torchrun ...`) over it
        hidden = any(name.startswith(("$", "`")) for name in launch.options)
        count = launch.option("--nproc_per_node") or (None if hidden else env.get("PET_NPROC_PER_NODE", "1"))
        nodes = launch.option("--nnodes") or env.get("PET_NNODES")
        return count == "1" and nodes in (None, "1", "1:1")
    if launch.launcher == "deepspeed":
        return _deepspeed_local_gpus(launch, env or {}) == 1 and _deepspeed_one_node(launch)
    if launch.launcher == "accelerate":
        return launch.option("--num_processes") == "1" and launch.option("--num_machines") in (None, "1")
    return False


def one_gpu(launch: Launch, env: dict[str, str]) -> bool:
    """Each process sees exactly one GPU, so a spreading map resolves to that one device (domain.md §2.2)."""
    if launch.wrapped_by == "srun" and launch.wrapper_options.get("--gpus-per-task") == "1":
        return True
    if launch.launcher == "deepspeed":
        # deepspeed's runner replaces CUDA_VISIBLE_DEVICES with the GPUs it chose on the node (all of
        # them, for each process), taking the variable's devices only when nothing else names any.
        return _deepspeed_local_gpus(launch, env) == 1
    visible = env.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and bool(visible.strip()) and "," not in visible and "$" not in visible


def script_arguments(
    launch: Launch, near: Path, configs: ConfigReader, target: Path | None = None
) -> tuple[tuple[str, str], ...]:
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
    name = launch.script_arg("--config") or launch.script_args.get("") or _arguments_file(launch, target, configs.scripts)
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
