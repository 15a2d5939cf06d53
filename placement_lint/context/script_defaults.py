"""The DeepSpeed config a launched script reads that its launch does not name as `--deepspeed`:

- the default of its own `--deepspeed` / `--deepspeed_config` option (`parser.add_argument("--deepspeed",
  default="configs/ds_zero3.json")`, or a dataclass field `deepspeed: str = "configs/ds_zero3.json"`);
- an option of its own whose value the script hands to DeepSpeed as its config (`--ds_file ds_zero3.json`,
  read by `json.load(open(args.ds_file))` and passed to `deepspeed.initialize(config=...)`): the
  launch's value, else the option's default;
- a section of a YAML or JSON file the launch names that the script loads itself and hands to its
  training arguments (`TrainingArguments(**config["training_args"])`): that section's `deepspeed:` key.

Parsed, never run."""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.context.commands import Launch
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple

if TYPE_CHECKING:  # the value flow is imported only for a script that may hand DeepSpeed a config
    from placement_lint.analysis.arguments import Fields
    from placement_lint.analysis.dataflow import Resolver
    from placement_lint.analysis.names import ImportTable

# The tree the run keeps of a launched script, if it keeps one (ConfigReader.script_tree).
Parse = Callable[[Path], "ast.Module | None"]

_MAX_SCRIPT_BYTES = 1024 * 1024
# A script whose text names no such option (with a default) and no JSON file is not parsed.
_MAY_DEFAULT = LazyPattern(rb"""["']--deepspeed(?:[_-]config)?["']|\bdeepspeed\s*:""")
# Where a script hands DeepSpeed its config (_handed_configs): a script without one of these is not parsed for it.
_MAY_HAND_A_CONFIG = LazyPattern(rb"\binitialize\s*\(|HfDeepSpeedConfig|\bdeepspeed\s*=|\bhf_ds_config\b")
# Where a script hands its training arguments a section of a loaded file, or DeepSpeed one of its keys
# (_find_sections): the classes (TrainingArguments, TRL's `*Config`, HfDeepSpeedConfig), HfArgumentParser.parse_dict,
# deepspeed.initialize and DeepSpeedPlugin.
_MAY_HAND_A_SECTION = LazyPattern(rb"Arguments\s*\(|Config\s*\(|\bparse_dict\s*\(|\binitialize\s*\(|\bhf_ds_config\b")


def default_deepspeed_config(
    launch: Launch, target: Path | None, read: list[Path] | None = None, parse: Parse | None = None
) -> str | None:
    """The JSON config the launched script's `--deepspeed` (or `--deepspeed_config`) option defaults
    to, when the launch gives neither; None when it gives one, or the script has no such default. A
    `--deepspeed_config` default beside a `--deepspeed` switch that is off by default (DeepSpeed's
    `add_config_arguments`) is used only when the launch turns the switch on. `read`: where to note
    the script when its text was looked into (see ConfigReader.scripts)."""
    if target is None or launch.script_arg("--deepspeed_config") is not None or launch.script_arg("--deepspeed"):
        return None
    module = _looked_into(target, "may_default", read, parse)
    if module is None:
        return None
    from placement_lint.analysis.arguments import parser_fields, value_of

    fields = parser_fields(module)
    constants = _module_constants(module)
    for name in ("deepspeed", "deepspeed_config"):
        field = fields.get(name)
        if field is None or field.origin == "library":
            continue
        try:
            default = value_of(field.default)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            default = _named_default(module, name, constants, launch.env, str(target.parent))
        if not (isinstance(default, str) and default.endswith(".json")):
            continue
        switch = fields.get("deepspeed") if name == "deepspeed_config" else None
        if switch is not None and switch.default in ("False", "None") and launch.script_arg("--deepspeed") is None:
            return None
        return default
    return None


def _module_constants(module: ast.Module) -> dict[str, str]:
    """`DS_CONFIG = "configs/ds_zero3.json"` at the top of the module, bound once."""
    bound: dict[str, str | None] = {}
    for statement in module.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            value = statement.value
            text = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
            bound[name] = None if name in bound else text
    return {name: text for name, text in bound.items() if text is not None}


def _named_default(module: ast.Module, dest: str, constants: dict[str, str], env: dict[str, str], folder: str) -> str | None:
    """The module constant an `add_argument("--deepspeed", default=DS_CONFIG)` names, the value of
    `default=os.environ.get("DS_CONFIG", "configs/ds_zero3.json")` (the launch's, else the fallback), or
    a path joined from literals (`os.path.join("configs", "ds_zero3.json")`) or from the script's
    `folder` (`os.path.join(ROOT, "configs", "ds_zero3.json")`, also through a module constant: absolute
    then, and only when that file exists)."""
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if f"--{dest}" not in options and f"--{dest.replace('_', '-')}" not in options:
            continue
        default = next((kw.value for kw in node.keywords if kw.arg == "default"), None)
        if default is None:
            return None
        text = _default_text(default, constants, env)
        return text if text is not None else _joined_default(module, default, folder)
    return None


def _joined_default(module: ast.Module, default: ast.expr, folder: str) -> str | None:
    from placement_lint.analysis.written_paths import written_path

    path = written_path(default, _top_level_bindings(module), folder)
    if path is None or not path.endswith(".json"):
        return None
    return path if not os.path.isabs(path) or os.path.isfile(path) else None


def _top_level_bindings(module: ast.Module) -> Callable[[ast.Name], list[ast.expr | None]]:
    """The values each name is bound to at the module's top (`ROOT = os.path.dirname(__file__)`), as
    written_path asks for them: [None] for a name bound nowhere there."""
    bound: dict[str, list[ast.expr | None]] = {}
    for statement in module.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            bound.setdefault(statement.targets[0].id, []).append(statement.value)
    return lambda name: bound.get(name.id, [None])


_ENVIRONMENT_READS = frozenset({"os.environ.get", "os.getenv", "environ.get", "getenv"})


def _default_text(default: ast.expr, constants: dict[str, str], env: dict[str, str], depth: int = 0) -> str | None:
    if isinstance(default, ast.Constant):
        return default.value if isinstance(default.value, str) else None
    if isinstance(default, ast.Name):
        return constants.get(default.id)
    if isinstance(default, ast.Call) and len(default.args) == 2 and not default.keywords and depth < 4:
        from placement_lint.analysis.names import dotted

        variable = default.args[0]
        if dotted(default.func) in _ENVIRONMENT_READS and isinstance(variable, ast.Constant) and isinstance(variable.value, str):
            if variable.value in env:
                given = env[variable.value]
                return given if "$" not in given and "`" not in given else None
            return _default_text(default.args[1], constants, env, depth + 1)
    return None


class _Script(NamedTuple):
    raw: bytes
    may_default: bool  # it may default its --deepspeed option to a JSON file
    may_hand_a_config: bool  # it may hand DeepSpeed a config
    may_hand_a_section: bool  # it may hand its training arguments a section of a file it loads


def _looked_into(target: Path, may: str, read: list[Path] | None, parse: Parse | None = None) -> ast.Module | None:
    """The launched script's tree, when a look at its bytes (`may`: a field of _Script) leaves the
    question open; the script is noted in `read` once its text decided something. `parse`: the tree
    the run keeps of the script (its module graph's, for the propagation and the checker: the script
    is parsed once a run), None when it keeps none; then it is parsed here."""
    script = _script(target)
    if script is None or not getattr(script, may):
        return None
    if read is not None:
        read.append(target)
    kept = parse(target) if parse is not None else None
    return kept if kept is not None else _parsed(script.raw)


def _script(target: Path) -> _Script | None:
    """The launched script's bytes and what a look at them rules out, once per script and content: a
    README or a folder of launch scripts runs one script hundreds of times (open-instruct: 477 launches
    looked into the same few scripts, 0.3 s of searches)."""
    try:
        status = target.stat()
    except OSError:
        return None
    if status.st_size > _MAX_SCRIPT_BYTES:
        return None
    return _scanned(target, status.st_mtime_ns, status.st_size)


@functools.lru_cache(maxsize=64)
def _scanned(target: Path, mtime: int, size: int) -> _Script | None:
    try:
        raw = target.read_bytes()
    except OSError:
        return None
    return _Script(
        raw,
        b".json" in raw and _MAY_DEFAULT.search(raw) is not None,
        _MAY_HAND_A_CONFIG.search(raw) is not None,
        _MAY_HAND_A_SECTION.search(raw) is not None,
    )


@functools.lru_cache(maxsize=8)
def _parsed(raw: bytes) -> ast.Module | None:
    """The script's tree, parsed once for all the launches of one script (a README runs it twenty
    times); by its bytes, so an edited script is parsed again."""
    try:
        return ast.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


# -- an option of the script's own that names its DeepSpeed config -------------------------------


class FlagConfig(NamedTuple):
    """The DeepSpeed config a launch names through an option of the script's own."""

    option: str  # as the launch spells it (else the script), without dashes: "ds_file"
    value: str  # the config's path as written: "ds_zero3_offload.json"
    given: bool  # the launch passes it (else: the option's default)
    sink: str  # where the script hands it to DeepSpeed: "deepspeed.initialize as config="

    def describe(self, script: str) -> str:
        """For the launch's details, which are split at commas and at the last `), ` (rules/chain.py): no
        parentheses. No line either: the evidence is cached, and an edit above the call must not make it stale."""
        said = f"--{self.option} {self.value}" if self.given else f"the script's default --{self.option} {self.value}"
        return f"{said}, which {script} passes to {self.sink}"


def deepspeed_config_flag(
    launch: Launch, target: Path | None, read: list[Path] | None = None, parse: Parse | None = None
) -> FlagConfig | None:
    """The config a launch names through an option of the launched script's own whose value the script
    hands to DeepSpeed as its config (config_sinks), where the launch's arguments do not rule out the
    branch that hands it (`if args.use_deepspeed:` under a launch that leaves the switch off): the first
    such option the launch passes, else the first whose default names a JSON file. None when there is
    no such option, or its value is only known when the launch runs (`$DS_CONFIG`). `read`: as for
    default_deepspeed_config."""
    module = _looked_into(target, "may_hand_a_config", read, parse) if target is not None else None
    if module is None:
        return None
    sinks = _sinks(module)
    if not sinks:
        return None
    from placement_lint.analysis.arguments import parser_fields, value_of

    fields = parser_fields(module)
    live = _live(module, sinks, fields, launch)
    defaults: list[FlagConfig] = []
    for sink in live:
        field = fields.get(sink.field)
        if field is None or sink.field in _DEEPSPEED_OPTIONS:
            continue  # `--deepspeed` and `--deepspeed_config` are read as such (launch_setup, default_deepspeed_config)
        spellings = field.spellings.split() or [sink.field]
        written = next((option for option in launch.script_args if option.lstrip("-").replace("-", "_") in spellings), None)
        if written is not None:
            given = launch.script_args[written]
            if not given or "$" in given or "`" in given:
                return None  # named at run time: which config, nobody here can tell
            return FlagConfig(written.lstrip("-"), given, True, sink.call)
        try:
            default = value_of(field.default)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(default, str) and default.endswith(".json"):
            defaults.append(FlagConfig(spellings[0], default, False, sink.call))
    return defaults[0] if defaults else None


def _live(module: ast.Module, sinks: list[_Sink], fields: Fields, launch: Launch) -> list[_Sink]:
    """The sinks the launch's arguments (and the defaults of those it leaves alone) do not rule out."""
    if not any(sink.guards for sink in sinks):
        return sinks
    from placement_lint.analysis.arguments import UNDECIDED, bind
    from placement_lint.analysis.dataflow import Resolver
    from placement_lint.distributed import SINGLE

    given = [
        (option.lstrip("-").replace("-", "_"), value)
        for option, value in launch.script_args.items()
        if option.startswith("--") and "$" not in value and "`" not in value
    ]
    bound = bind(fields, given)
    arguments = [(name, value, "the launch") for name, value in bound.items()]
    arguments += [
        (name, field.default, "")
        for name, field in fields.items()
        if name == field.name and name not in bound and field.default != UNDECIDED and field.origin != "dataclass"
    ]
    resolver = Resolver(module, SINGLE, tuple(sorted(arguments)))
    return [s for s in sinks if not any(resolver.truth(test) is (not outcome) for test, outcome in s.guards)]


class _Sink(NamedTuple):
    field: str  # the parser field whose value names the config
    call: str  # how the call it reaches is named: "deepspeed.initialize as config="
    guards: tuple[tuple[ast.expr, bool], ...]  # the conditions the call runs under, in its function

    def shown(self) -> tuple[str, str, tuple[tuple[str, bool], ...]]:
        """As a cache's facet keeps it: an edit of the call or of its conditions changes it."""
        return self.field, self.call, tuple((ast.unparse(test), outcome) for test, outcome in self.guards)


_DEEPSPEED_OPTIONS = frozenset({"deepspeed", "deepspeed_config"})
_SINK_CACHE = "_placement_lint_config_sinks"


def handed_configs(raw: bytes, module: ast.Module) -> list[tuple[str, str, tuple[tuple[str, bool], ...]]]:
    """What a cache's facet keeps of the options a script hands DeepSpeed as the config (_sinks); []
    for a script whose text cannot hand it one."""
    return [sink.shown() for sink in _sinks(module)] if _MAY_HAND_A_CONFIG.search(raw) else []


def config_sinks(module: ast.Module) -> dict[str, str]:
    """The parser fields of a script whose value it hands to DeepSpeed as the config, each with the
    first call it reaches (see _sinks)."""
    found: dict[str, str] = {}
    for sink in _sinks(module):
        found.setdefault(sink.field, sink.call)
    return found


def _sinks(module: ast.Module) -> list[_Sink]:
    """Each parser field of a script whose value it hands to DeepSpeed as the config, directly as a
    path (`HfDeepSpeedConfig(args.ds_config)`, `TrainingArguments(deepspeed=args.ds_file)`) or read
    from that path (`json.load(open(args.ds_file))`, `with open(args.ds_file) as f: json.load(f)`),
    with the call it reaches and that call's conditions; in source order. A config whose stage the
    script sets itself (`ds_config["zero_optimization"]["stage"] = args.zero_stage`) is not the file's:
    left out. Worked out once per tree (each launch of the script, and the cache's facet, ask)."""
    cached: list[_Sink] | None = getattr(module, _SINK_CACHE, None)
    if cached is None:
        cached = _find_sinks(module)
        setattr(module, _SINK_CACHE, cached)
    return cached


def _find_sinks(module: ast.Module) -> list[_Sink]:
    from placement_lint.analysis.arguments import UNDECIDED, parser_fields
    from placement_lint.analysis.dataflow import Resolver
    from placement_lint.analysis.index import index_of
    from placement_lint.analysis.names import ImportTable
    from placement_lint.distributed import SINGLE

    index = index_of(module)
    imports = ImportTable.of(module, index.imports)
    # In source order (the index's calls are not): the first call an option reaches names it.
    handed = sorted(
        ((call, text, value) for call in index.calls for text, value in _handed_configs(call, imports)),
        key=lambda item: (item[0].lineno, item[0].col_offset),
    )
    if not handed:
        return []
    # Every text field marked as given by a launch: the value flow then says, for each config handed
    # to DeepSpeed, which field's value it came from (Candidate.from_launch), through any assignments.
    fields = [f.name for f in parser_fields(module).values() if f.origin != "library" and f.convert in ("str", "?")]
    if not fields:
        return []
    resolver = Resolver(module, SINGLE, tuple((name, UNDECIDED, "a launch") for name in dict.fromkeys(fields)))
    found: list[_Sink] = []
    for call, text, value in handed:
        readers: list[ast.AST] = [call]
        names = _fields_naming(resolver, imports, value, 0, readers)
        if names and not any(_sets_the_stage(resolver.scope_of(node)) for node in readers):
            guards = tuple(resolver.enclosing_guards(call))
            found += [_Sink(name, text, guards) for name in dict.fromkeys(names)]
    return found


def _sets_the_stage(scope: ast.AST) -> bool:
    """`cfg["zero_optimization"]["stage"] = ...` or `cfg["zero_optimization"] = ...` in the scope."""
    for node in ast.walk(scope):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        for target in targets:
            key = target.slice if isinstance(target, ast.Subscript) else None
            if isinstance(key, ast.Constant) and key.value in ("stage", "zero_optimization"):
                return True
    return False


def _handed_configs(call: ast.Call, imports: ImportTable) -> list[tuple[str, ast.expr]]:
    """What `call` hands DeepSpeed as its config (a dict, or a JSON path), with how to name the call."""
    from placement_lint.analysis.names import dotted, keyword, last_segment
    from placement_lint.context.in_file import is_training_arguments

    written = dotted(call.func)
    if written is None:
        return []
    qualified = imports.qualify_dotted(written)
    name = last_segment(qualified)
    found: list[tuple[str, ast.expr]] = []
    if name == "initialize" and qualified.startswith("deepspeed."):
        for option in ("config", "config_params"):
            given = keyword(call, option)
            if given is not None:
                found.append((f"deepspeed.initialize as {option}=", given.value))
    elif name == "HfDeepSpeedConfig":
        given = keyword(call, "config_file_or_dict")
        value = given.value if given is not None else call.args[0] if call.args else None
        if value is not None and not isinstance(value, ast.Starred):
            found.append(("HfDeepSpeedConfig", value))
    elif name == "DeepSpeedPlugin":
        given = keyword(call, "hf_ds_config")
        if given is not None:
            found.append(("DeepSpeedPlugin as hf_ds_config=", given.value))
    elif is_training_arguments(qualified):
        given = keyword(call, "deepspeed")
        if given is not None:
            found.append((f"{name} as deepspeed=", given.value))
    return found


# Calls whose first argument carries the path on (`open(path)`, `json.load(file)`), by qualified name.
_CARRIERS = frozenset(
    {
        "open", "io.open", "builtins.open", "codecs.open", "json.load", "json.loads", "yaml.safe_load", "yaml.load",
        "yaml.full_load", "pathlib.Path", "str", "os.path.abspath", "os.path.expanduser", "os.path.realpath",
        "os.path.normpath",
    }
)  # fmt: skip
_READS = frozenset({"read", "read_text", "read_bytes"})  # `open(path).read()`, `Path(path).read_text()`
_MAX_STEPS = 6


def _fields_naming(resolver: Resolver, imports: ImportTable, expr: ast.expr, steps: int, readers: list[ast.AST]) -> list[str]:
    """The fields whose value reaches `expr` as the config's path or its contents; the calls that read
    the file on the way are added to `readers`."""
    from placement_lint.analysis.names import dotted
    from placement_lint.analysis.written_paths import opened_by_with

    if steps > _MAX_STEPS:
        return []
    found: list[str] = []
    for candidate in resolver.candidates(expr):
        given = candidate.from_launch
        if given is not None:
            found.append(given.name)
            continue
        value = candidate.value
        carried: ast.expr | None = None
        helper = candidate.helper  # the value flow followed a helper of the script into its return
        if helper is not None and helper.call.args and _reads_its_file(resolver.module, imports, helper.name):
            if not isinstance(helper.call.args[0], ast.Starred):
                readers.append(helper.call)
                found += _fields_naming(resolver, imports, helper.call.args[0], steps + 1, readers)
            continue
        if isinstance(value, ast.Call):
            if isinstance(value.func, ast.Attribute) and value.func.attr in _READS:
                carried = value.func.value
            elif value.args and not isinstance(value.args[0], ast.Starred):
                written = dotted(value.func)
                qualified = imports.qualify_dotted(written) if written is not None else None
                if qualified in _CARRIERS or (qualified is not None and _reads_its_file(resolver.module, imports, qualified)):
                    carried = value.args[0]
        elif value is None and not candidate.via and isinstance(expr, ast.Name):
            carried = opened_by_with(resolver, expr)
        if carried is not None:
            if isinstance(value, ast.Call):
                readers.append(value)
            found += _fields_naming(resolver, imports, carried, steps + 1, readers)
    return found


# What a helper of the script calls on its parameter to read the file it names (not `str(path)`).
_FILE_READERS = frozenset(
    {
        "open",
        "io.open",
        "builtins.open",
        "codecs.open",
        "json.load",
        "yaml.safe_load",
        "yaml.load",
        "yaml.full_load",
        "pathlib.Path",
    }
)
# A helper of another module named as a reader of JSON or YAML (`read_json`, `load_config`, alpaca's `jload`).
_READER_NAME = LazyPattern(
    r"^(?:(?:read|load)_?(?:json|yaml|yml|config|cfg|ds_config|deepspeed_config)|(?:json|yaml|j)_?(?:read|load))$"
)


def _reads_its_file(module: ast.Module, imports: ImportTable, qualified: str) -> bool:
    """A helper that reads the file its first argument names and returns what it read (`ds_config =
    read_json(args.ds_file)`): a function of the script that opens its first parameter (`open`,
    `json.load`, `Path`: _FILE_READERS) and sets no ZeRO stage itself; a function of another
    module, by its name alone (_READER_NAME)."""
    from placement_lint.analysis.names import dotted, last_segment

    name = last_segment(qualified)
    if "." in qualified:
        return _READER_NAME.match(name.lower()) is not None
    for definition in module.body:
        if not (isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)) and definition.name == name):
            continue
        parameters = definition.args.posonlyargs + definition.args.args
        if not parameters or _sets_the_stage(definition):
            return False
        path = parameters[0].arg
        for node in ast.walk(definition):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == path:
                written = dotted(node.func)
                if written is not None and imports.qualify_dotted(written) in _FILE_READERS:
                    return True
        return False
    return _READER_NAME.match(name.lower()) is not None


# -- a section of a file the script loads, handed to its training arguments ------------------------


class ConfigSection(NamedTuple):
    """Where in a YAML/JSON file it loads a script finds its training arguments, or its DeepSpeed config."""

    keys: tuple[str, ...]  # the keys read on the way, outermost first: ("training_args",)
    whole: bool  # the section's keys are the arguments (`**config["training_args"]`); else it is the DeepSpeed config


def handed_sections(target: Path | None, read: list[Path] | None = None, parse: Parse | None = None) -> list[ConfigSection]:
    """The sections of a loaded file the launched script hands its training arguments (_find_sections);
    [] for a script that hands none. `read`: as for default_deepspeed_config."""
    module = _looked_into(target, "may_hand_a_section", read, parse) if target is not None else None
    return _sections(module) if module is not None else []


# Calls that open or load a settings file by its path (`yaml.safe_load(open("configs/train.yaml"))`).
_FILE_OPENERS = frozenset({"open", "io.open", "Path", "pathlib.Path", "OmegaConf.load", "omegaconf.OmegaConf.load"})
_MAX_LOADED_FILES = 8


def loaded_files(target: Path | None, read: list[Path] | None = None, parse: Parse | None = None) -> list[str]:
    """The YAML and JSON files the launched script opens by a path written in it (a literal, or joined
    from its own folder: absolute then), in the order written, when it hands a section of a loaded
    file to its training arguments (handed_sections): `with open("configs/train.yaml") as f: cfg =
    yaml.safe_load(f)` ... `TrainingArguments(**cfg["training"])`. `read`: as for default_deepspeed_config."""
    module = _looked_into(target, "may_hand_a_section", read, parse) if target is not None else None
    if module is None or target is None or not _sections(module):
        return []
    from placement_lint.analysis.names import dotted
    from placement_lint.analysis.written_paths import written_path

    bound = _top_level_bindings(module)
    found: list[str] = []
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and node.args and dotted(node.func) in _FILE_OPENERS):
            continue
        path = written_path(node.args[0], bound, str(target.parent))
        if path is not None and path.endswith((".yaml", ".yml", ".json")) and "$" not in path and path not in found:
            found.append(path)
            if len(found) >= _MAX_LOADED_FILES:
                break
    return found


def sections_for_facet(raw: bytes, module: ast.Module) -> list[tuple[tuple[str, ...], bool]]:
    """What a cache's facet keeps of the sections a script hands its training arguments."""
    return [(section.keys, section.whole) for section in _sections(module)] if _MAY_HAND_A_SECTION.search(raw) else []


_SECTION_CACHE = "_placement_lint_config_sections"


def _sections(module: ast.Module) -> list[ConfigSection]:
    cached: list[ConfigSection] | None = getattr(module, _SECTION_CACHE, None)
    if cached is None:
        cached = _find_sections(module)
        setattr(module, _SECTION_CACHE, cached)
    return cached


# Calls that hand on the mapping they are given (`TrainingArguments(**OmegaConf.to_container(cfg.train))`).
_PASS_THROUGH = frozenset({"dict", "vars", "to_container", "to_object", "asdict", "copy", "deepcopy", "OrderedDict"})
# Calls that read the file a key names (`json.load(open(config["ds_config"]))`), as written.
_OPENERS = frozenset({"open", "json.load", "yaml.safe_load", "yaml.load", "yaml.full_load", "Path", "pathlib.Path", "str"})
_MAX_HOPS = 3
_MAX_PATHS = 16  # of one expression: a name bound again and again (`cfg = cfg[...]`) must not multiply them
_MAX_BINDINGS = 8  # of one name followed: the first ones in the module
_MAX_SECTIONS = 64  # of one script: each is looked for in every settings file its launches name


def _find_sections(module: ast.Module) -> list[ConfigSection]:
    """The key paths a script reads out of a mapping and hands its training arguments, spread
    (`Seq2SeqTrainingArguments(**config["training_args"])`, `**cfg.training`, `**kwargs.get("training_args")`,
    through a name bound to one of these: GLM-4's `training_args = kwargs.get("training_args")`), or to
    HfArgumentParser's `parse_dict`; and those it hands DeepSpeed as the config (`deepspeed=config["train"]["deepspeed"]`,
    `HfDeepSpeedConfig(cfg.ds_config)`, `deepspeed.initialize(config=json.load(open(cfg["ds_config"])))`).
    Which file the mapping came from is the launch's to say (launch_setup): the path is only tried
    against the file it names, whose keys then confirm it."""
    from placement_lint.analysis.index import index_of
    from placement_lint.analysis.names import ImportTable, dotted, last_segment
    from placement_lint.context.in_file import is_training_arguments

    index = index_of(module)
    imports = ImportTable.of(module, index.imports)
    bound: dict[str, list[ast.expr]] = {}
    for node in index.calls_and_assigns:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and len(bound.setdefault(target.id, [])) < _MAX_BINDINGS:
                    bound[target.id].append(node.value)
    found: dict[ConfigSection, None] = {}
    names: dict[tuple[str, int], list[tuple[str, ...]]] = {}
    for call in sorted(index.calls, key=lambda c: (c.lineno, c.col_offset)):
        written = dotted(call.func)
        if written is None:
            continue
        qualified = imports.qualify_dotted(written)
        handed = [(value, False) for _, value in _handed_configs(call, imports)]
        if is_training_arguments(qualified):
            handed += [(kw.value, True) for kw in call.keywords if kw.arg is None]
        elif last_segment(qualified) == "parse_dict" and call.args and not isinstance(call.args[0], ast.Starred):
            handed.append((call.args[0], True))
        for value, whole in handed:
            found.update((ConfigSection(keys, whole), None) for keys in _key_paths(value, bound, names, 0) if keys)
        if len(found) >= _MAX_SECTIONS:
            break
    return list(found)


def _key_paths(
    expr: ast.expr, bound: dict[str, list[ast.expr]], names: dict[tuple[str, int], list[tuple[str, ...]]], hops: int
) -> list[tuple[str, ...]]:
    """The key paths `expr` reads out of some mapping: `config["a"].b.get("c")` -> [("a", "b", "c")], and
    () for the mapping itself. An attribute may be a section or hold the file (`self.config["a"]`):
    launch_setup tries each tail. A name bound in the module to such a read stands for it too (`names`:
    what each name at each depth was found to stand for, worked out once)."""
    from placement_lint.analysis.names import dotted, last_segment

    if isinstance(expr, ast.Subscript):
        key = expr.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return [(*head, key.value) for head in _key_paths(expr.value, bound, names, hops)]
        return []
    if isinstance(expr, ast.Attribute):
        return [(*head, expr.attr) for head in _key_paths(expr.value, bound, names, hops)]
    if isinstance(expr, ast.Call) and expr.args and not isinstance(expr.args[0], ast.Starred):
        first = expr.args[0]
        if isinstance(expr.func, ast.Attribute) and expr.func.attr == "get":
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return [(*head, first.value) for head in _key_paths(expr.func.value, bound, names, hops)]
            return []
        written = dotted(expr.func)
        if last_segment(written) in _PASS_THROUGH or written in _OPENERS:
            return _key_paths(first, bound, names, hops)
        return []
    if isinstance(expr, ast.Name):  # the mapping itself (the loaded file, as far as this call tells), or a read bound to it
        known = names.get((expr.id, hops))
        if known is None:
            reads: list[tuple[str, ...]] = []
            names[(expr.id, hops)] = []  # a name bound to a read of itself (`cfg = cfg["train"]`) stops here
            for value in bound.get(expr.id, ()) if hops < _MAX_HOPS else ():
                reads += _key_paths(value, bound, names, hops + 1)
                if len(reads) >= _MAX_PATHS:
                    break
            known = names[(expr.id, hops)] = [*dict.fromkeys(reads[: _MAX_PATHS - 1]), ()]
        return known
    return []
