"""Repo-wide context: how each Python file is launched, from the launch scripts and configs around it.

Built once per repository, before any Python file is parsed: find the files that can hold launch
commands, parse each command, read the configs it names (accelerate YAML, DeepSpeed JSON, recipe
YAML), resolve its target to a file of the repository, and give that file (and the repository
modules it imports) the evidence, with the chain that led to it; and tell each imported module what
its importers do with the values its functions return (a model a helper loads goes to their trainer).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.flow import ModelFlow
from placement_lint.analysis.index import index_of
from placement_lint.analysis.names import ImportTable, dotted
from placement_lint.context.commands import Launch, parse_command
from placement_lint.context.configs import ConfigReader, zero_stage_of
from placement_lint.context.evidence import EFFICIENT_LOADING, Evidence, Kind
from placement_lint.context.launch_files import (
    LAUNCH_TOKENS,
    MAX_LAUNCHER_BYTES,
    CommandLine,
    commands_in,
    launcher_kind,
)
from placement_lint.context.launcher_names import launcher_candidates
from placement_lint.context.launches import IMPORT_LINE, RepoContext
from placement_lint.context.modules import IMPORT_DEPTH, module_file
from placement_lint.notebook import MAX_NOTEBOOK_BYTES
from placement_lint.settings import Settings
from placement_lint.source import is_notebook

_NAMED_ACCELERATE_CONFIGS = {  # `trl ... --accelerate_config NAME` (trl/accelerate_configs/NAME.yaml)
    "single_gpu": (Kind.SINGLE, None),
    "multi_gpu": (Kind.DDP, None),
    "zero1": (Kind.DEEPSPEED, 1),
    "zero2": (Kind.DEEPSPEED, 2),
    "zero3": (Kind.ZERO3, 3),
    "fsdp1": (Kind.FSDP, None),
    "fsdp2": (Kind.FSDP, None),
}
_MULTI = re.compile(r"^MULTI_")


@dataclass(frozen=True)
class Resolved:
    kind: Kind
    stage: int | None
    details: str  # "distributed_type DEEPSPEED, zero_stage 3"


def build_repo_context(
    root: Path,
    settings: Settings,
    display: Callable[[Path], str],
    also: tuple[Path, ...] = (),
    launchers: list[Path] | None = None,
) -> RepoContext:
    """`also`: folders named on the command line; their launchers count even if the config excludes
    them. `launchers`: the candidate files, when the caller's walk already covered the root."""
    root = root.resolve()
    context = RepoContext(root)
    configs = ConfigReader(root)
    launched: dict[Path, list[Evidence]] = {}
    context.candidates = launcher_candidates(root, settings, also, launchers)
    for path in context.candidates:
        for command in _commands(path, context):
            launch = parse_command(command.text)
            if launch is None:
                continue
            target = _target(launch, command, root)
            if target is None:
                continue
            asked = len(configs.loaded)
            resolved = _resolve(launch, command, configs)
            read = tuple(dict.fromkeys(display(path) for path in configs.loaded[asked:]))
            where = f"{display(command.source)}:{command.where}"
            text = f"{where} ({_short(launch.text)})"
            if resolved.details:
                text += f", {resolved.details}"
            env = {**dict(command.env), **launch.env}
            evidence = Evidence(
                resolved.kind,
                display(command.source),
                command.line,
                text,
                resolved.stage,
                "launch",
                (display(target),),
                _arguments(launch),
                single_process=_one_process(launch),
                one_gpu=_one_gpu(launch, env),
                bypass=env.get("ACCELERATE_BYPASS_DEVICE_MAP", "").lower() in ("true", "1"),
                cell=command.cell,  # a notebook's shell escape: `line` is in that cell
                configs=read,
            )
            launched.setdefault(target, []).append(evidence)
    context.warnings += configs.warnings
    for target, items in launched.items():
        context.by_file[target] = tuple(items)
        context.used[target] = frozenset({"__main__"})
    summaries, edges = _propagate_to_imports(context, launched, display)
    classes_read = _follow_returns(context, summaries, edges, display)
    context.inputs = [*context.candidates, *configs.read, *summaries, *classes_read]
    # A module read for its class bases (a trainer subclass) counts whole, not by its import lines.
    context.import_only = {path for path, summary in summaries.items() if summary is None} - set(classes_read)
    return context


def _commands(path: Path, context: RepoContext) -> list[CommandLine]:
    try:
        if path.stat().st_size > (MAX_NOTEBOOK_BYTES if is_notebook(path) else MAX_LAUNCHER_BYTES):
            if launcher_kind(path, b"") in ("shell", "make", "docker", "procfile"):  # a big README or YAML is just data
                context.warnings.append(f"{path.relative_to(context.root)}: skipped, larger than {MAX_LAUNCHER_BYTES} bytes")
            return []
        raw = path.read_bytes()
    except OSError:
        return []
    kind = launcher_kind(path, raw[:512])
    if kind is None or not any(token in raw for token in LAUNCH_TOKENS):
        return []
    try:
        return commands_in(path, raw.decode("utf-8", errors="replace"), kind)
    except (RecursionError, ValueError) as exc:
        context.warnings.append(f"{path}: cannot read launch commands: {exc}")
        return []


def _target(launch: Launch, command: CommandLine, root: Path) -> Path | None:
    """The repository file a launch runs: a script path, or a `-m package.module`."""
    bases = [command.cwd, command.source.parent, root]
    candidates: list[Path] = []
    if launch.target and launch.target.endswith(".py"):
        candidates = [base / launch.target for base in bases]
    elif launch.module:
        relative = Path(*launch.module.split("."))
        for base in (command.cwd, root, root / "src"):
            candidates += [base / relative.with_suffix(".py"), base / relative / "__main__.py"]
    for candidate in candidates:
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError):
            continue
        if resolved.is_relative_to(root) and resolved.is_file():
            return resolved
    return None


def _resolve(launch: Launch, command: CommandLine, configs: ConfigReader) -> Resolved:
    """What setup a launch runs its target under (domain.md §5.3)."""
    near = command.cwd
    script = _script_settings(launch, near, configs)
    if launch.launcher == "accelerate":
        base = _accelerate(launch, near, configs)
    elif launch.launcher == "torchrun":
        count = launch.option("--nproc_per_node")
        base = Resolved(Kind.DDP, None, f"torchrun --nproc_per_node {count}" if count else "torchrun")
    elif launch.launcher == "deepspeed":
        base = Resolved(Kind.DEEPSPEED, None, "the deepspeed launcher")
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


def _script_settings(launch: Launch, near: Path, configs: ConfigReader) -> Resolved | None:
    """`--deepspeed ds.json`, `--fsdp ...`, `--fsdp_config ...`, or a recipe YAML, given to the script."""
    deepspeed = launch.script_arg("--deepspeed", "--deepspeed_config")
    if deepspeed:
        stage = _json_stage(deepspeed, near, configs)
        return _deepspeed(stage, f"--deepspeed {deepspeed}")
    fsdp = launch.script_arg("--fsdp")
    if fsdp and fsdp.lower() not in ("false", "none", "''", '""'):
        return Resolved(Kind.FSDP, None, f"--fsdp {fsdp}")
    if launch.script_arg("--fsdp_config"):
        return Resolved(Kind.FSDP, None, f"--fsdp_config {launch.script_arg('--fsdp_config')}")
    recipe = launch.script_arg("--config", "--config_file", "")
    if recipe and recipe.endswith((".yaml", ".yml")):
        return _recipe(recipe, near, configs)
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


def _accelerate(launch: Launch, near: Path, configs: ConfigReader) -> Resolved:
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
        if kind is None:
            why = f"config {config_name} not found in the repository" if config_name else "no config file"
            return Resolved(Kind.POSSIBLE, None, f"{why}: one process per GPU on a multi-GPU host")
    return Resolved(kind, stage, details)


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
        return (Kind.ZERO3 if stage == 3 else Kind.DEEPSPEED), stage, details
    if kind_name == "FSDP":
        section = config.get("fsdp_config")
        efficient = isinstance(section, dict) and str(section.get("fsdp_cpu_ram_efficient_loading")).lower() == "true"
        return Kind.FSDP, None, "distributed_type FSDP" + (f", {EFFICIENT_LOADING}" if efficient else "")
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


def _arguments(launch: Launch) -> tuple[tuple[str, str], ...]:
    """Script arguments an HfArgumentParser/TrlParser would turn into dataclass fields (`--q_lora True`)."""
    return tuple(
        (name.lstrip("-").replace("-", "_"), value)
        for name, value in launch.script_args.items()
        if name.startswith("--") and "$" not in value and "`" not in value
    )


def _short(text: str) -> str:
    return text if len(text) <= 90 else text[:87] + "..."


# -- modules imported by launched scripts -------------------------------------------------------


def _propagate_to_imports(
    context: RepoContext, launched: dict[Path, list[Evidence]], display: Callable[[Path], str]
) -> tuple[dict[Path, _ModuleSummary | None], dict[Path, set[Path]]]:
    """Give the modules a launched script imports the script's launch evidence, for what it uses of
    them. Returns what it read of each Python file (None: only its import lines, nothing local), and
    which modules each importer passed evidence to."""
    frontier = [(path, tuple(items), frozenset({"*"}), 0) for path, items in launched.items()]
    visited: set[tuple[Path, frozenset[str]]] = set()
    summaries: dict[Path, _ModuleSummary | None] = {}
    edges: dict[Path, set[Path]] = {}
    while frontier:
        path, items, wanted, depth = frontier.pop()
        if depth >= IMPORT_DEPTH or (path, wanted) in visited:
            continue
        visited.add((path, wanted))
        if path not in summaries:
            summaries[path] = _ModuleSummary.of(path, context.root)
        summary = summaries[path]
        if summary is None:
            continue
        for module, names in summary.imports(wanted, context.root):
            inherited = tuple(
                e._replace(origin="import", chain=(display(module), *e.chain)) for e in items if e.kind is not Kind.SINGLE
            )
            if not inherited:
                continue
            existing = context.by_file.get(module, ())
            context.by_file[module] = existing + tuple(e for e in inherited if e not in existing)
            context.used[module] = context.used.get(module, frozenset()) | names
            edges.setdefault(path, set()).add(module)
            # Go on through every module: helpers.py may import loader.py. A module that imports
            # nothing of the repository costs a read and a regex, not a parse.
            frontier.append((module, inherited, names, depth + 1))
    return summaries, edges


def _follow_returns(
    context: RepoContext,
    summaries: dict[Path, _ModuleSummary | None],
    edges: dict[Path, set[Path]],
    display: Callable[[Path], str],
) -> list[Path]:
    """Fill `context.consumers`: for each module an importer gave evidence to, where the importer sends
    what its calls of the module's functions return. Through a chain too (train.py trains what
    helpers.build returns, which is what loader.load returns): an importer's own remote consumers
    take part, so the passes repeat, at most once per import level. Returns the modules read to tell
    trainer subclasses (inputs of the context, like the configs)."""
    from placement_lint.context.classes import ImportedClasses  # it imports this module
    from placement_lint.distributed import SINGLE

    calls: dict[Path, dict[Path, dict[str, list[ast.Call]]]] = {}
    modules_parsed: dict[Path, object] = {}  # shared by the importers' class lookups
    parsed: dict[Path, tuple[Resolver, ImportTable, ImportedClasses]] = {}
    pending = set(edges)
    for _ in range(IMPORT_DEPTH):
        changed: set[Path] = set()
        for importer in sorted(pending):
            summary = summaries.get(importer)
            if summary is None:
                continue
            if importer not in calls:
                calls[importer] = summary.calls_into(context.root)
            wanted = {target: calls[importer][target] for target in sorted(edges[importer]) if target in calls[importer]}
            if not wanted:
                continue
            if importer not in parsed:
                resolver = Resolver(summary.module, SINGLE)
                classes = ImportedClasses(summary.module, importer, context.root, modules_parsed)  # type: ignore[arg-type]
                parsed[importer] = (resolver, ImportTable.of(summary.module, resolver.index.nodes), classes)
            resolver, imports, classes = parsed[importer]
            # A fresh flow each pass: what it finds depends on the importer's own remote consumers.
            flow = ModelFlow(summary.module, imports, resolver, context.consumers.get(importer), classes)
            where = display(importer)
            for target, by_name in wanted.items():
                for name, nodes in by_name.items():
                    found = tuple(dict.fromkeys(c.elsewhere(where) for call in nodes for c in flow.consumers(call)))
                    # `from alignment import get_model` reaches alignment/__init__.py, which re-exports
                    # model_utils.get_model: the loader is there.
                    for module, function in _definitions(summaries, target, name, context.root):
                        known = context.consumers.setdefault(module, {})
                        new = tuple(c for c in found if c not in known.get(function, ()))
                        if new:
                            known[function] = known.get(function, ()) + new
                            changed.add(module)
        pending = {path for path in changed if path in edges}
        if not pending:
            break
    context.consumers = {path: uses for path, uses in context.consumers.items() if uses}
    return sorted({path for _, _, classes in parsed.values() for path in classes.read})


def _definitions(summaries: dict[Path, _ModuleSummary | None], module: Path, name: str, root: Path) -> list[tuple[Path, str]]:
    """`module.name`, and where it is defined when `module` only re-exports it (a package's __init__.py)."""
    found = [(module, name)]
    for _ in range(IMPORT_DEPTH):
        summary = summaries.get(found[-1][0])
        origin = summary.reexport(found[-1][1], root) if summary is not None else None
        if origin is None or origin in found:
            break
        found.append(origin)
    return found


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _imports_something_local(raw: bytes, folder: Path, root: Path) -> bool:
    """A cheap look at the import lines: does any name a module of the repository?"""
    for match in IMPORT_LINE.finditer(raw):
        if match.group(1):
            return True  # a relative import
        name = (match.group(2) or match.group(3) or b"").decode("ascii", "replace").split(".")[0]
        if name and _local_top_level(name, str(folder), str(root)):
            return True
    return False


@functools.lru_cache(maxsize=8192)
def _local_top_level(name: str, folder: str, root: str) -> bool:
    for base in (folder, root, os.path.join(root, "src")):
        candidate = os.path.join(base, name)
        if os.path.isfile(candidate + ".py") or os.path.isdir(candidate):
            return True
    return False


@dataclass
class _ModuleSummary:
    """What import propagation needs of one module, from one parse and one walk."""

    path: Path
    module: ast.Module
    imports_: list[ast.Import | ast.ImportFrom]
    attributes: dict[str, set[str]]  # alias head -> attribute chains read off it ("utils.model" -> {"load"})
    names_by_definition: dict[str, set[str]]  # top-level def/class -> names it reads
    all_names: set[str]

    @classmethod
    def of(cls, path: Path, root: Path) -> _ModuleSummary | None:
        try:
            raw = path.read_bytes()
            if not _imports_something_local(raw, path.parent, root):
                return None  # most launched scripts import only installed packages: no parse needed
            module = ast.parse(raw)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        imports_: list[ast.Import | ast.ImportFrom] = []
        attributes: dict[str, set[str]] = {}
        all_names: set[str] = set()
        names_by_definition: dict[str, set[str]] = {}
        for top in module.body:  # one walk, each name filed under the top-level definition it is in
            names = names_by_definition.setdefault(top.name, set()) if isinstance(top, _DEFINITIONS) else all_names
            for node in ast.walk(top):
                if isinstance(node, ast.Name):
                    names.add(node.id)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    imports_.append(node)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    chain: list[str] = []
                    current: ast.AST = node
                    while isinstance(current, ast.Attribute):
                        chain.append(current.attr)
                        current = current.value
                    if isinstance(current, ast.Name):
                        chain.append(current.id)
                        chain.reverse()
                        attributes.setdefault(".".join(chain[:-1]), set()).add(chain[-1])
        for names in names_by_definition.values():
            all_names |= names
        return cls(path, module, imports_, attributes, names_by_definition, all_names)

    def referenced(self, wanted: frozenset[str]) -> set[str]:
        if "*" in wanted:
            return self.all_names
        names = set(wanted)
        for name in wanted:
            names |= self.names_by_definition.get(name, set())
        return names

    def imports(self, wanted: frozenset[str], root: Path) -> list[tuple[Path, frozenset[str]]]:
        """The repository modules this one imports, with the names it uses of each (only from the
        definitions `wanted` names, when it is itself an imported module)."""
        referenced = self.referenced(wanted)
        found: dict[Path, set[str]] = {}
        for node in self.imports_:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = module_file(alias.name, 0, self.path, root)
                    if target is not None:
                        found.setdefault(target, set()).update(self.attributes.get(alias.asname or alias.name, set()))
                continue
            base = node.module or ""
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name == "*":
                    target = module_file(base, node.level, self.path, root)
                    if target is not None:
                        found.setdefault(target, set()).add("*")
                    continue
                if "*" not in wanted and local not in referenced:
                    continue
                submodule = module_file(f"{base}.{alias.name}" if base else alias.name, node.level, self.path, root)
                if submodule is not None:
                    found.setdefault(submodule, set()).update(self.attributes.get(local, set()))
                    continue
                target = module_file(base, node.level, self.path, root)
                if target is not None:
                    found.setdefault(target, set()).add(alias.name)
        return [(target, frozenset(names)) for target, names in found.items() if names and target != self.path]

    def reexport(self, name: str, root: Path) -> tuple[Path, str] | None:
        """The repository module and name `name` is imported from here (`from .model_utils import get_model`)."""
        for node in self.imports_:
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if (alias.asname or alias.name) != name or alias.name == "*":
                    continue
                base = node.module or ""
                if module_file(f"{base}.{alias.name}" if base else alias.name, node.level, self.path, root) is not None:
                    return None  # a submodule, not a function
                target = module_file(base, node.level, self.path, root)
                return (target, alias.name) if target is not None else None
        return None

    def calls_into(self, root: Path) -> dict[Path, dict[str, list[ast.Call]]]:
        """This module's calls of functions of the repository's modules, by module and function name:
        `load_model(...)` after `from model_utils import load_model`, `utils.load_model(...)` after
        `import utils`."""
        functions: dict[str, tuple[Path, str]] = {}  # local name -> (module, its function)
        modules: dict[str, Path] = {}  # local dotted name -> module
        for node in self.imports_:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = module_file(alias.name, 0, self.path, root)
                    if target is not None:
                        modules[alias.asname or alias.name] = target
                continue
            base = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    continue
                local = alias.asname or alias.name
                submodule = module_file(f"{base}.{alias.name}" if base else alias.name, node.level, self.path, root)
                if submodule is not None:
                    modules[local] = submodule
                    continue
                target = module_file(base, node.level, self.path, root)
                if target is not None:
                    functions[local] = (target, alias.name)
        found: dict[Path, dict[str, list[ast.Call]]] = {}
        if not functions and not modules:
            return found
        for node in index_of(self.module).calls:  # the index the flow over this module uses too
            func = node.func
            if isinstance(func, ast.Name) and func.id in functions:
                target, name = functions[func.id]
            elif isinstance(func, ast.Attribute) and dotted(func.value) in modules:
                target, name = modules[dotted(func.value)], func.attr  # type: ignore[index]
            else:
                continue
            found.setdefault(target, {}).setdefault(name, []).append(node)
        return found
