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


def page_url(code: str) -> str:
    """A link to the rule's page in this installation (there is no hosted documentation site)."""
    return (catalogue_dir() / f"{code.upper()}.md").as_uri()
