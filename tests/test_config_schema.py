"""placement-lint.schema.json and the configuration reference: generated from the settings' own
table, so they say what the settings accept. The schema and the settings reader must agree on
every example here, good and bad."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from placement_lint.config_schema import SCHEMA_FILE, default, json_schema, reference_markdown, schema_text
from placement_lint.rules import rule_codes
from placement_lint.settings import _KEYS, OPTIONS, ConfigError, Settings, load_settings

ROOT = Path(__file__).parent.parent
CODES = rule_codes()

GOOD = [
    {},
    {"select": ["DPL0"], "ignore": ["DPL010"], "extend-select": ["DPL100"]},
    {"select": ["ALL"]},
    {"exclude": [".venv", "build/"], "extend-exclude": ["legacy/**", "*_old.py"]},
    {"per-file-ignores": {"scripts/infer_*.py": ["DPL001", "DPL007"]}},
    {"context": "zero3", "per-file-context": {"train_ddp.py": "ddp", "fsdp/*.py": "fsdp"}},
    {"respect-gitignore": False},
    {"rule-url-base": "https://docs.example.org/rules/{code}.html"},
]
BAD = [
    {"unknown-key": 1},
    {"select": "DPL001"},  # a string, not a list
    {"select": ["DPL999"]},
    {"ignore": [1]},
    {"exclude": "build"},
    {"per-file-ignores": ["scripts/*.py"]},
    {"per-file-ignores": {"scripts/*.py": ["XYZ1"]}},
    {"context": "zero4"},
    {"per-file-context": {"train.py": "tensor-parallel"}},
    {"respect-gitignore": "yes"},
    {"rule-url-base": "docs/rules"},
]


def settings_from(table: dict[str, object], tmp_path: Path) -> Settings:
    """The table read as placement-lint reads a pyproject.toml (JSON's spelling is TOML's for these)."""
    lines = ["[tool.placement-lint]"]
    for key, value in table.items():
        if isinstance(value, dict):
            value_text = "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items()) + " }"
        else:
            value_text = json.dumps(value)
        lines.append(f"{json.dumps(key)} = {value_text}")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_settings(pyproject, tmp_path, CODES)


def test_the_shipped_schema_is_the_generated_one() -> None:
    shipped = (ROOT / SCHEMA_FILE).read_text(encoding="utf-8")
    assert shipped == schema_text(CODES), f"regenerate it: python -m placement_lint.config_schema > {SCHEMA_FILE}"


def test_the_schema_is_a_valid_draft_7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(json_schema(CODES))


@pytest.mark.parametrize("table", GOOD, ids=lambda table: ",".join(table) or "empty")
def test_good_configs_pass_the_schema_and_the_settings(table: dict[str, object], tmp_path: Path) -> None:
    jsonschema.validate(table, json_schema(CODES))
    settings_from(table, tmp_path)


@pytest.mark.parametrize("table", BAD, ids=lambda table: f"{next(iter(table))}={next(iter(table.values()))!r}")
def test_bad_configs_fail_the_schema_and_the_settings(table: dict[str, object], tmp_path: Path) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(table, json_schema(CODES))
    with pytest.raises(ConfigError):
        settings_from(table, tmp_path)


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.key)
def test_each_option_is_a_setting_with_an_example_both_accept(option, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    field = option.key.replace("-", "_")
    assert field in Settings._fields and option.help
    table = {option.key: option.example}
    jsonschema.validate(table, json_schema(CODES))
    assert getattr(settings_from(table, tmp_path), field) != Settings._field_defaults[field], "the example changes the setting"
    # The default the schema states is the one a table without the key gets.
    schema_default = json_schema(CODES)["properties"][option.key].get("default")
    assert schema_default == default(option)
    assert getattr(settings_from({}, tmp_path), field) == Settings._field_defaults[field]


def test_the_settings_accept_exactly_the_documented_keys() -> None:
    assert _KEYS == {option.key for option in OPTIONS} == set(json_schema(CODES)["properties"])


def test_the_reference_documents_every_key_and_its_default() -> None:
    text = reference_markdown()
    for option in OPTIONS:
        assert f"### `{option.key}`" in text and option.help in text
    assert '`[".git", ".hg"' in text, "the default exclude list is shown as TOML"
    assert "**Default:** unset" in text, "rule-url-base has no default value"
