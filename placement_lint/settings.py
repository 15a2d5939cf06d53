"""Settings: `[tool.placement-lint]` in the nearest pyproject.toml, merged with the command line.

Like ruff: the closest pyproject.toml with a `[tool.placement-lint]` table wins (no merging across
files), paths in it are relative to its folder, and command-line options override it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from placement_lint.distributed import NAMED_SETUPS
from placement_lint.records import NamedTuple


def toml_module() -> ModuleType:
    """The TOML reader, imported when a pyproject.toml is read at all: most runs never do."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    return tomllib


@functools.lru_cache(maxsize=32)
def parsed_toml(text: str) -> dict[str, Any]:
    """A TOML document, parsed once per run however many readers ask for it: the settings, the module
    graph's package layout, the console scripts and the pinned versions all read pyproject.toml.
    Read-only for the callers; a document that does not parse raises each time (`TOMLDecodeError`)."""
    return toml_module().loads(text)


DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "build",
    "dist",
    "node_modules",
    "__pycache__",
    "site-packages",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".placement_lint_cache",
    ".ipynb_checkpoints",
)


class Option(NamedTuple):
    """One key of `[tool.placement-lint]`, as the documentation and the JSON schema show it: both are
    generated from this table (placement_lint/config_schema.py), so a key added here is documented,
    and a key not here is refused as the settings are read."""

    key: str
    kind: str  # what the value is: a key of config_schema.VALUE_SCHEMAS
    help: str  # Markdown, for the configuration reference and the schema's description
    example: object  # a value a user might write


OPTIONS = (
    Option(
        "select",
        "selectors",
        "The rules to run: codes or code prefixes (`DPL`, `DPL00`, `DPL001`), or `ALL`. The default, "
        "`DPL0`, is every placement rule; `DPL` or `ALL` also turns on the opt-in `DPL100` (unused noqa). "
        "`--select` on the command line replaces it.",
        ["DPL001", "DPL002"],
    ),
    Option(
        "ignore",
        "selectors",
        "Rules not to run, as codes or prefixes; wins over `select` and `extend-select`. `--ignore` adds to it.",
        ["DPL010"],
    ),
    Option(
        "extend-select",
        "selectors",
        'Rules to run on top of `select`, for the opt-in ones: `["DPL100"]`. `--extend-select` adds to it.',
        ["DPL100"],
    ),
    Option(
        "exclude",
        "patterns",
        "Files and folders whose Python files are not checked, as `.gitignore` patterns relative to the "
        "configuration's folder (a plain name such as `build` matches at any depth). Replaces the default "
        "list; `extend-exclude` adds to it instead. A file named on the command line is still checked, "
        "unless `--force-exclude` is given. Excluding decides what is reported, not what launches: launch "
        "scripts, configs and docs in excluded folders still count (`launch-exclude` leaves them out).",
        ["legacy/", "*_old.py"],
    ),
    Option(
        "extend-exclude",
        "patterns",
        "More patterns to exclude, on top of `exclude`.",
        ["tests/fixtures", "notebooks/scratch/"],
    ),
    Option(
        "launch-exclude",
        "patterns",
        "Files and folders whose launch scripts, configs and docs are not read as launch evidence, as "
        "`.gitignore` patterns; on top of the built-in list (`.git`, `.venv`, `build`, `node_modules`, ...), "
        "which never counts. Their Python files are still checked unless `exclude` says otherwise.",
        ["experiments/old_launchers/"],
    ),
    Option(
        "per-file-ignores",
        "pattern-selectors",
        "Rules not to run in the files a pattern matches: a table from pattern to a list of codes or prefixes.",
        {"scripts/infer_*.py": ["DPL001"]},
    ),
    Option(
        "context",
        "setup",
        "The distributed setup to assume for every file without stronger evidence (a launch, the file's "
        "own setup code, a `# placement-lint: context=...` comment, `per-file-context`); `--context` wins over it.",
        "ddp",
    ),
    Option(
        "per-file-context",
        "pattern-setup",
        "The setup to assume for the files a pattern matches, as `context` does for every file.",
        {"train_z3.py": "zero3"},
    ),
    Option(
        "respect-gitignore",
        "bool",
        "Leave out what `.gitignore` files leave out, in the walk for Python files and for launch files.",
        False,
    ),
    Option(
        "rule-url-base",
        "url",
        "Where a finding's rule link points (the JSON `url`, SARIF's `helpUri`, the editor's code link): "
        "`{code}` in it is replaced by the rule's code (`https://docs.example.org/rules/{code}.html`), "
        "otherwise the code and `.md` are appended. Unset: the rule's page on the documentation site. "
        "Nothing is fetched from it: the links are only written into the reports.",
        "https://docs.example.org/placement-lint/rules/{code}/",
    ),
)
_KEYS = frozenset(option.key for option in OPTIONS)


class ConfigError(Exception):
    """An invalid setting: shown as one line, exit code 2."""


# Like ruff, which leaves RUF100 out of its defaults: the DPL0xx rules find placement bugs and are
# on by default; DPL1xx judge the noqa comments themselves and are opt-in (`extend-select`).
DEFAULT_SELECT = ("DPL0",)


class Settings(NamedTuple):
    root: Path
    config_file: Path | None = None
    select: tuple[str, ...] = DEFAULT_SELECT
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    # Folders and files whose launch commands do not count, on top of DEFAULT_EXCLUDE's (`exclude` and
    # `extend-exclude` decide what is reported, not what launches).
    launch_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    context: str | None = None
    per_file_context: tuple[tuple[str, str], ...] = ()
    respect_gitignore: bool = True
    rule_url_base: str | None = None  # where the findings' `url` points: a base URL, or a template with {code}
    codes: tuple[str, ...] = ()  # every rule code, for validation

    def enabled_codes(self) -> tuple[str, ...]:
        chosen = {code for code in self.codes if _selected(code, self.select + self.extend_select)}
        return tuple(sorted(code for code in chosen if not _selected(code, self.ignore)))


def _selected(code: str, selectors: tuple[str, ...]) -> bool:
    return any(selector == "ALL" or code.startswith(selector) for selector in selectors)


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.placement-lint] table, from `start` upwards."""
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            try:
                text = pyproject.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "placement-lint" not in text and "\\u" not in text and "\\U" not in text:
                continue  # no table of ours can be there (unless its name is spelled with escapes)
            tomllib = toml_module()
            try:
                data = parsed_toml(text)
            except tomllib.TOMLDecodeError as exc:
                # Like ruff: a pyproject.toml that may hold our settings but does not parse is an error,
                # not a reason to fall back to another configuration.
                if "placement-lint" in text:
                    raise ConfigError(f"{pyproject}: invalid TOML: {exc}") from None
                continue
            if "placement-lint" in data.get("tool", {}):
                return pyproject
    return None


def load_settings(config_file: Path | None, cwd: Path, codes: tuple[str, ...]) -> Settings:
    if config_file is None:
        return Settings(root=cwd, codes=codes)
    tomllib = toml_module()
    try:
        data = parsed_toml(config_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {config_file}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{config_file}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("placement-lint", {}) if config_file.name == "pyproject.toml" else data
    if not isinstance(table, dict):
        raise ConfigError(f"{config_file}: [tool.placement-lint] must be a table")
    return _from_table(table, config_file, codes)


def _from_table(table: dict[str, object], config_file: Path, codes: tuple[str, ...]) -> Settings:
    where = f"{config_file}: [tool.placement-lint]"
    for key in table:
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(_KEYS))})")
    settings = Settings(root=config_file.parent, config_file=config_file, codes=codes)
    values: dict[str, object] = {}
    for key in ("select", "ignore", "extend-select"):
        if key in table:
            values[key.replace("-", "_")] = tuple(
                check_selectors(_strings(table[key], f"{where} {key}"), codes, f"{where} {key}")
            )
    for key in ("exclude", "extend-exclude", "launch-exclude"):
        if key in table:
            values[key.replace("-", "_")] = tuple(_patterns(_strings(table[key], f"{where} {key}"), f"{where} {key}"))
    if "per-file-ignores" in table:
        mapping = _mapping(table["per-file-ignores"], f"{where} per-file-ignores")
        _patterns(list(mapping), f"{where} per-file-ignores")
        values["per_file_ignores"] = tuple(
            (pattern, tuple(check_selectors(_strings(selectors, f"{where} per-file-ignores.{pattern}"), codes, where)))
            for pattern, selectors in mapping.items()
        )
    if "context" in table:
        values["context"] = check_context(table["context"], f"{where} context")
    if "per-file-context" in table:
        mapping = _mapping(table["per-file-context"], f"{where} per-file-context")
        _patterns(list(mapping), f"{where} per-file-context")
        values["per_file_context"] = tuple(
            (pattern, check_context(name, f"{where} per-file-context.{pattern}"))
            for pattern, name in mapping.items()  # type: ignore[misc]
        )
    if "respect-gitignore" in table:
        if not isinstance(table["respect-gitignore"], bool):
            raise ConfigError(f"{where} respect-gitignore: expected true or false")
        values["respect_gitignore"] = table["respect-gitignore"]
    if "rule-url-base" in table:
        values["rule_url_base"] = _url(table["rule-url-base"], f"{where} rule-url-base")
    return settings._replace(**values)  # type: ignore[arg-type]


def settings_for(
    start: Path,
    config: Path | None,
    cwd: Path,
    codes: tuple[str, ...],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    extend_select: Iterable[str] = (),
    prefix: str = "--",
) -> Settings:
    """The settings for a run over `start`: the given `pyproject.toml` or the one found above the
    resolved path, then the selections given on the command line (or to the API)."""
    settings = load_settings(config or find_config(start.resolve()), cwd, codes)
    return with_selection(settings, split_selectors(select), split_selectors(ignore), split_selectors(extend_select), prefix)


def split_selectors(values: Iterable[str]) -> list[str]:
    """`--select DPL001,DPL002 --select DPL3` -> ["DPL001", "DPL002", "DPL3"]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def with_selection(
    settings: Settings, select: list[str], ignore: list[str], extend_select: list[str], prefix: str = "--"
) -> Settings:
    """Selections given on the command line (or to the API) over the configured ones: `select`
    replaces the configured set, `ignore` and `extend_select` add to theirs."""
    codes = settings.codes
    if select:
        settings = settings._replace(select=tuple(check_selectors(select, codes, f"{prefix}select")))
    if ignore:
        settings = settings._replace(ignore=settings.ignore + tuple(check_selectors(ignore, codes, f"{prefix}ignore")))
    if extend_select:
        added = tuple(check_selectors(extend_select, codes, f"{prefix}extend-select"))
        settings = settings._replace(extend_select=settings.extend_select + added)
    return settings


def check_selectors(selectors: list[str], codes: tuple[str, ...], where: str) -> list[str]:
    normalised = []
    for selector in selectors:
        upper = selector.strip().upper()
        if upper != "ALL" and not any(code.startswith(upper) for code in codes):
            raise ConfigError(f"{where}: unknown rule selector {selector!r} (rules are {', '.join(codes)})")
        normalised.append(upper)
    return normalised


def check_context(value: object, where: str) -> str:
    if not isinstance(value, str) or value.lower() not in NAMED_SETUPS:
        raise ConfigError(f"{where}: expected one of {', '.join(NAMED_SETUPS)}, got {value!r}")
    return value.lower()


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: expected a list of strings")
    return value


_GLOB_CHARACTERS = frozenset("*?[]/!\\")


def is_glob(pattern: str) -> bool:
    """A pattern pathspec must read; any other (".venv", "build/") is a plain name, matched as one."""
    return not _GLOB_CHARACTERS.isdisjoint(pattern.rstrip("/"))


def _patterns(patterns: list[str], where: str) -> list[str]:
    """Patterns with .gitignore's rules, each checked as the settings are read: one pathspec cannot
    read (`!`, a lone backslash) is a configuration error here, not a crash of whichever process
    first needs it, which a run whose files hold nothing to check never was."""
    globs = [pattern for pattern in patterns if is_glob(pattern)]
    if globs:
        import pathspec  # only for a configuration with glob patterns

        for pattern in globs:
            try:
                pathspec.GitIgnoreSpec.from_lines([pattern])
            except ValueError as exc:
                raise ConfigError(f"{where}: invalid pattern {pattern!r} ({exc})") from None
    return patterns


def _url(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://", "file://")):
        raise ConfigError(f"{where}: expected a URL (https://...), got {value!r}")
    return value


def _mapping(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table")
    return value
