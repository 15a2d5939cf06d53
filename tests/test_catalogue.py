"""The rule catalogue (`rules/*.md`) and the rules agree: every example on every page lints as the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement_lint.catalogue import page
from placement_lint.rules import all_rules, rule_codes

from helpers import lint_source

ROOT = Path(__file__).parent.parent
SECTIONS = ["What it does", "Why it fails", "Example", "Use instead", "Fix safety", "When it is fine", "References"]
RULES = all_rules()
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
# "Read in transformers 4.51.0 (the released wheel), `transformers/modeling_utils.py` (...):" and then
# the text as the library has it, in a ```text block: where the quote was read, at which version.
_READ_IN = re.compile(
    r"^[^\n]*\b[Rr]ead in (?P<library>transformers|accelerate|trl|peft|DeepSpeed|deepspeed|ruff) "
    r"(?P<version>v?\d+\.\d+\.\d+|commit [0-9a-f]{7,40})(?: \([^)\n]*\))?, `(?P<path>[\w./-]+\.(?:py|rs))`[^\n]*:\n\n"
    r"```text\n(?P<quote>.+?)```",
    re.MULTILINE | re.DOTALL,
)
_REPORT = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull|discussions)/\d+")


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def examples() -> list[tuple[str, str, int, str]]:
    found = []
    for rule in RULES:
        for title, body in sections(page(rule.code) or "").items():
            for number, block in enumerate(_BLOCK.findall(body), start=1):
                found.append((rule.code, title, number, block))
    return found


def test_each_rule_module_is_named_by_its_code() -> None:
    """The CLI reads the codes off the module names, so a run the cache answers imports no rule."""
    assert rule_codes() == tuple(rule.code for rule in RULES)
    assert all(rule.__module__.rsplit(".", 1)[-1].startswith(rule.code.lower() + "_") for rule in RULES)


def test_the_rule_modules_are_found_as_the_import_system_lists_them() -> None:
    """Listed with os.listdir, not pkgutil (whose import cost every run more): the same names."""
    import pkgutil

    from placement_lint import rules

    expected = sorted(info.name for info in pkgutil.iter_modules(rules.__path__) if rules._RULE_MODULE.match(info.name))
    assert list(rules._rule_modules()) == expected and len(expected) > 10


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_page_has_the_standard_sections(rule) -> None:  # type: ignore[no-untyped-def]
    text = page(rule.code)
    assert text is not None, f"rules/{rule.code}.md is missing"
    assert text.startswith(f"# {rule.code}: {rule.name}\n")
    assert list(sections(text)) == SECTIONS
    assert _BLOCK.search(sections(text)["Example"]), "the Example section shows code"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_page_quotes_the_library_at_a_version_and_cites_a_user_report(rule) -> None:  # type: ignore[no-untyped-def]
    """Why it fails quotes the error (or the code) the rule prevents, naming the library, the version
    and the file it was read in; the page links at least one real report (issue, PR or discussion)."""
    text = page(rule.code) or ""
    why = sections(text)["Why it fails"]
    quotes = list(_READ_IN.finditer(why))
    assert quotes, f"{rule.code}: no quote read in a named library file at a version"
    assert all(quote["quote"].strip() for quote in quotes)
    assert _REPORT.search(text), f"{rule.code}: no github.com issue, pull request or discussion link"


def test_every_page_belongs_to_a_rule() -> None:
    codes = {rule.code for rule in RULES}
    assert {p.stem for p in (ROOT / "rules").glob("*.md")} == codes


@pytest.mark.parametrize(
    ("code", "section", "number", "source"),
    examples(),
    ids=lambda v: str(v)[:20] if not isinstance(v, str) or "\n" not in v else "",
)
def test_page_example_lints_as_the_page_says(code: str, section: str, number: int, source: str, tmp_path: Path) -> None:
    result = lint_source(tmp_path, source, extend_select=(code,))  # an opt-in rule's page is checked with it on
    assert result.error is None
    found = [finding.code for finding in result.findings]
    if section == "Example":
        assert code in found, f"{code} {section} #{number} is not flagged"
    elif section in ("Use instead", "When it is fine"):
        assert found == [], f"{code} {section} #{number} is flagged: {found}"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_class_examples(rule, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert rule.invalid and rule.valid, "each rule carries its own valid and invalid examples"
    for source in rule.invalid:
        assert rule.code in [f.code for f in lint_source(tmp_path, source, extend_select=(rule.code,)).findings]
    for source in rule.valid:
        assert rule.code not in [f.code for f in lint_source(tmp_path, source, extend_select=(rule.code,)).findings]


def test_readme_rule_table_lists_every_rule() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for rule in RULES:
        assert f"| [{rule.code}](rules/{rule.code}.md) | {rule.name} |" in readme
