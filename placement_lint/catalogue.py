"""The rule catalogue: one Markdown page per rule, in the project's `rules/` folder.

In a wheel the pages ship inside the package (`placement_lint/catalogue/`); in a checkout or an
editable install they are read from `rules/` beside the package.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def catalogue_dir() -> Path:
    for candidate in (_PACKAGE / "catalogue", _PACKAGE.parent / "rules"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the rule catalogue is missing from this installation")


def page(code: str) -> str | None:
    path = catalogue_dir() / f"{code.upper()}.md"
    return path.read_text(encoding="utf-8") if path.is_file() else None


# The project's home, as pyproject.toml declares it ([project.urls]): the findings link the rule
# pages there, a page a browser or GitHub's code scanning can open on any machine, not a file in
# someone's site-packages.
REPOSITORY_URL = "https://github.com/placement-lint/placement-lint"
DEFAULT_RULE_URL_BASE = f"{REPOSITORY_URL}/blob/main/rules/"


def page_url(code: str, base: str | None = None) -> str:
    """The web page of a rule: `base` (the `rule-url-base` setting; default: the page in the
    repository) followed by `CODE.md`, or `base` with `{code}` replaced when it holds that."""
    base = base or DEFAULT_RULE_URL_BASE
    code = code.upper()
    if "{code}" in base:
        return base.replace("{code}", code)
    return f"{base if base.endswith('/') else base + '/'}{code}.md"
