"""The `[tool.placement-lint]` table described for people and for editors, from the settings' own
table (`settings.OPTIONS` and the defaults of `settings.Settings`): the configuration reference of
the documentation site and `placement-lint.schema.json`, the JSON schema editors validate and
complete the table with (as ruff ships `ruff.schema.json`). Neither is written by hand, so neither
can drift from what the settings accept; a test regenerates the schema file and compares.

Regenerate the shipped schema with `python -m placement_lint.config_schema > placement-lint.schema.json`.
"""

from __future__ import annotations

import json
from typing import Any

from placement_lint.distributed import NAMED_SETUPS
from placement_lint.settings import OPTIONS, Option, Settings

SCHEMA_FILE = "placement-lint.schema.json"


def selectors(codes: tuple[str, ...]) -> list[str]:
    """What `select` and friends accept: `ALL`, and every prefix of a rule code from `DPL` on."""
    prefixes = {code[:length] for code in codes for length in range(3, len(code) + 1)}
    return ["ALL", *sorted(prefixes)]


def value_schemas(codes: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The schema of each kind of value an option holds (`Option.kind`)."""
    selector = {"type": "string", "enum": selectors(codes)}
    setup = {"type": "string", "enum": list(NAMED_SETUPS)}
    return {
        "selectors": {"type": "array", "items": selector},
        "patterns": {"type": "array", "items": {"type": "string"}},
        "pattern-selectors": {"type": "object", "additionalProperties": {"type": "array", "items": selector}},
        "setup": setup,
        "pattern-setup": {"type": "object", "additionalProperties": setup},
        "bool": {"type": "boolean"},
        "url": {"type": "string", "pattern": "^(https?|file)://"},
    }


def default(option: Option) -> object:
    """The option's default as the table would spell it: the Settings field's default."""
    value = Settings._field_defaults[option.key.replace("-", "_")]
    if option.kind in ("selectors", "patterns"):
        return list(value)
    if option.kind in ("pattern-selectors", "pattern-setup"):
        return {pattern: list(chosen) if isinstance(chosen, tuple) else chosen for pattern, chosen in value}
    return value


def json_schema(codes: tuple[str, ...]) -> dict[str, Any]:
    kinds = value_schemas(codes)
    properties: dict[str, Any] = {}
    for option in OPTIONS:
        properties[option.key] = {
            "description": option.help,
            **kinds[option.kind],
            **({} if default(option) is None else {"default": default(option)}),
            "examples": [option.example],
        }
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "placement-lint",
        "description": "The [tool.placement-lint] table of a pyproject.toml.",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }


def schema_text(codes: tuple[str, ...]) -> str:
    """The schema file's text, byte for byte as shipped."""
    return json.dumps(json_schema(codes), indent=2, ensure_ascii=False) + "\n"


_KIND_WORDS = {
    "selectors": "list of rule selectors",
    "patterns": "list of patterns",
    "pattern-selectors": "table: pattern → list of rule selectors",
    "setup": "one of " + ", ".join(f"`{name}`" for name in NAMED_SETUPS),
    "pattern-setup": "table: pattern → setup",
    "bool": "`true` or `false`",
    "url": "URL",
}


def _toml(value: object) -> str:
    """A value spelled as TOML: JSON's spelling is TOML's for strings, lists, booleans; tables inline."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(key)} = {_toml(item)}" for key, item in value.items()) + " }"
    return json.dumps(value, ensure_ascii=False)


def reference_markdown() -> str:
    """The configuration reference: one section per key, in the settings' order."""
    lines = []
    for option in OPTIONS:
        value = default(option)
        lines += [
            f"### `{option.key}`",
            "",
            option.help,
            "",
            f"**Type:** {_KIND_WORDS[option.kind]}  ",
            f"**Default:** {'unset' if value is None else f'`{_toml(value)}`'}",
            "",
            "```toml",
            "[tool.placement-lint]",
            f"{option.key} = {_toml(option.example)}",
            "```",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    from placement_lint.rules import rule_codes

    print(schema_text(rule_codes()), end="")


if __name__ == "__main__":
    main()
