"""The DeepSpeed config a script takes when its launch names none: the default of its own
`--deepspeed` / `--deepspeed_config` option (`parser.add_argument("--deepspeed", default="configs/ds_zero3.json")`,
or a dataclass field `deepspeed: str = "configs/ds_zero3.json"`). Parsed, never run."""

from __future__ import annotations

import ast
from pathlib import Path

from placement_lint.context.commands import Launch
from placement_lint.patterns import LazyPattern

_MAX_SCRIPT_BYTES = 1024 * 1024
# A script whose text names no such option (with a default) and no JSON file is not parsed.
_MAY_DEFAULT = LazyPattern(rb"""["']--deepspeed(?:[_-]config)?["']|\bdeepspeed\s*:""")


def default_deepspeed_config(launch: Launch, target: Path | None) -> str | None:
    """The JSON config the launched script's `--deepspeed` (or `--deepspeed_config`) option defaults
    to, when the launch gives neither; None when it gives one, or the script has no such default. A
    `--deepspeed_config` default beside a `--deepspeed` switch that is off by default (DeepSpeed's
    `add_config_arguments`) is used only when the launch turns the switch on."""
    if target is None or launch.script_arg("--deepspeed_config") is not None or launch.script_arg("--deepspeed"):
        return None
    try:
        if target.stat().st_size > _MAX_SCRIPT_BYTES:
            return None
        raw = target.read_bytes()
    except OSError:
        return None
    if b".json" not in raw or not _MAY_DEFAULT.search(raw):
        return None
    try:
        module = ast.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
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
            default = _named_default(module, name, constants)
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


def _named_default(module: ast.Module, dest: str, constants: dict[str, str]) -> str | None:
    """The module constant an `add_argument("--deepspeed", default=DS_CONFIG)` names."""
    if not constants:
        return None
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if f"--{dest}" not in options and f"--{dest.replace('_', '-')}" not in options:
            continue
        default = next((kw.value for kw in node.keywords if kw.arg == "default"), None)
        if isinstance(default, ast.Name):
            return constants.get(default.id)
    return None
