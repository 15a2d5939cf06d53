"""MkDocs hooks for the documentation site (mkdocs.yml `hooks:`): the pages that have a source of
their own elsewhere are made from it at build time, never copied into docs/.

- `rules/DPLnnn.md`: the rule pages, read from the project's `rules/` folder (the pages
  `placement-lint rule` prints and the package ships).
- `changelog.md`: CHANGELOG.md.
- the table of the rules, from the rules' own code, names and summaries, into the page that holds
  the marker `<!-- rule-index -->` (docs/rules.md).
- the configuration reference, generated from the settings' own table into the page that holds
  the marker `<!-- configuration-reference -->` (docs/configuration.md; placement_lint/config_schema.py).

The navigation is every page docs/ holds, in the order of `NAV` below; a page docs/ holds that
`NAV` does not name is added under "More", so a new page is never left out of the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules"
CONFIGURATION_MARKER = "<!-- configuration-reference -->"
RULE_INDEX_MARKER = "<!-- rule-index -->"

# (title, page) in the order a reader wants them; a page docs/ does not hold is left out.
NAV: list[tuple[str, list[tuple[str, str]]]] = [
    ("Start", [("Home", "index.md"), ("Install", "install.md")]),
    (
        "Use it in",
        [
            ("CI", "ci.md"),
            ("pre-commit", "pre-commit.md"),
            ("Editors", "editor.md"),
            ("Python API", "api.md"),
            ("Command line", "cli.md"),
            ("Migrating a repository", "migrating.md"),
        ],
    ),
    (
        "Reference",
        [
            ("How a launch reaches the load", "launch-context.md"),
            ("Configuration", "configuration.md"),
            ("Suppressing findings", "suppression.md"),
            ("Fixes", "fixes.md"),
            ("Notebooks", "notebooks.md"),
            ("The result cache", "cache.md"),
            ("Security", "security.md"),
        ],
    ),
    ("Project", [("Speed", "speed.md"), ("Design", "design.md"), ("Changelog", "changelog.md")]),
]
# Pages the hooks make (they are not files in docs/).
GENERATED = {"changelog.md": ROOT / "CHANGELOG.md"}


def rule_pages() -> list[Path]:
    return sorted(RULES.glob("DPL*.md"))


def site_pages(docs: Path) -> set[str]:
    """The pages of the site: docs/'s Markdown files (not the hooks') and the ones made from a file elsewhere."""
    found = {path.relative_to(docs).as_posix() for path in docs.rglob("*.md") if "hooks" not in path.relative_to(docs).parts}
    return found | set(GENERATED) | {f"rules/{path.name}" for path in rule_pages()}


def source_of(docs: Path, page: str) -> Path:
    """The file a page of the site (or a file it links, such as an image) is made from."""
    if page in GENERATED:
        return GENERATED[page]
    if page.startswith("rules/"):
        return RULES / page.removeprefix("rules/")
    return docs / page


def navigation(pages: set[str]) -> list[object]:
    named = {page for _, section in NAV for _, page in section} | {"rules.md"}
    nav: list[object] = []
    for title, section in NAV:
        entries = [{name: page} for name, page in section if page in pages]
        if title == "Reference":
            rules = [{"Rules": "rules.md"}] + [{path.stem: f"rules/{path.name}"} for path in rule_pages()]
            entries = [{"Rules": rules}, *entries]
        if entries:
            nav.append({title: entries})
    more = sorted(page for page in pages if page not in named and not page.startswith("rules/"))
    if more:
        nav.append({"More": more})
    return nav


def _rule_index() -> str:
    sys.path.insert(0, str(ROOT))  # the checkout's package, whether or not it is installed
    try:
        from placement_lint.rules import all_rules
    finally:
        sys.path.remove(str(ROOT))
    lines = ["| code | name | what it finds |", "|---|---|---|"]
    for rule in all_rules():
        lines.append(f"| [{rule.code}](rules/{rule.code}.md) | {rule.name} | {rule.summary} |")
    return "\n".join(lines) + "\n"


def _configuration_reference() -> str:
    sys.path.insert(0, str(ROOT))
    try:
        from placement_lint.config_schema import reference_markdown
    finally:
        sys.path.remove(str(ROOT))
    return reference_markdown()


def on_config(config):  # type: ignore[no-untyped-def]
    from pymdownx.superfences import fence_code_format

    fences = config.mdx_configs.setdefault("pymdownx.superfences", {}).setdefault("custom_fences", [])
    fences.append({"name": "mermaid", "class": "mermaid", "format": fence_code_format})
    config.nav = navigation(site_pages(Path(config.docs_dir)))
    return config


def on_files(files, config):  # type: ignore[no-untyped-def]
    from mkdocs.structure.files import File

    for path in rule_pages():
        files.append(File.generated(config, f"rules/{path.name}", abs_src_path=str(path)))
    for name, source in GENERATED.items():
        files.append(File.generated(config, name, abs_src_path=str(source)))
    return files


def on_page_markdown(markdown, page, config, files):  # type: ignore[no-untyped-def]
    if CONFIGURATION_MARKER in markdown:
        markdown = markdown.replace(CONFIGURATION_MARKER, _configuration_reference())
    if RULE_INDEX_MARKER in markdown:
        markdown = markdown.replace(RULE_INDEX_MARKER, _rule_index())
    return markdown
