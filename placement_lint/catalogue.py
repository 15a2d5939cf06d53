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


# Where the project's documentation site is published (mkdocs.yml `site_url`; pyproject.toml's
# [project.urls] Documentation): the one place the findings' rule links start from, the JSON `url`,
# SARIF's `helpUri` and the editor's code link, so that moving the site is a change of this line
# (and `rule-url-base` points them elsewhere for one project). They are only written into reports:
# a run never fetches them, and `placement-lint rule CODE` reads the page shipped with the package.
DOCUMENTATION_URL = "https://placement-lint.github.io/placement-lint/"
DEFAULT_RULE_URL_BASE = f"{DOCUMENTATION_URL}rules/{{code}}/"


def page_url(code: str, base: str | None = None) -> str:
    """The web page of a rule: `base` (the `rule-url-base` setting; default: the rule's page on the
    documentation site) with `{code}` replaced when it holds that, else followed by `CODE.md`."""
    base = base or DEFAULT_RULE_URL_BASE
    code = code.upper()
    if "{code}" in base:
        return base.replace("{code}", code)
    return f"{base if base.endswith('/') else base + '/'}{code}.md"
