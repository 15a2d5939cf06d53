"""The README, the documentation site and the changelog: every README example is run (or, for a
config, read by the tool it configures), the two commands are the ones CI runs, every relative link
resolves, the site builds with `mkdocs build --strict`, and the rule links the findings print point
at pages the site has."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from markdown_it import MarkdownIt

from placement_lint.catalogue import DOCUMENTATION_URL, page_url
from placement_lint.cli import main
from placement_lint.config_schema import SCHEMA_FILE
from placement_lint.rules import rule_codes
from placement_lint.settings import OPTIONS, load_settings, toml_module

from helpers import run_script

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FIRST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/placement-lint check examples"
SECOND_COMMAND = "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest"
_MARKDOWN = MarkdownIt("commonmark").enable("table")


def site_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("placement_lint_site_hooks", DOCS / "hooks" / "site.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_blocks(path: Path) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown file: (info string, text)."""
    tokens = _MARKDOWN.parse(path.read_text(encoding="utf-8"))
    return [(token.info.strip(), token.content) for token in tokens if token.type == "fence"]


def links(path: Path) -> list[str]:
    """The link and image targets of a Markdown file (not the text of code spans or blocks)."""
    found = []
    for token in _MARKDOWN.parse(path.read_text(encoding="utf-8")):
        for child in token.children or ():
            if child.type == "link_open":
                found.append(str(child.attrs["href"]))
            elif child.type == "image":
                found.append(str(child.attrs["src"]))
    return found


# Every code block of the README, named by what tells it apart; each name is run by a test below.
README_EXAMPLES: dict[str, Callable[[str, str], bool]] = {
    "diff": lambda info, text: info == "diff",
    "first command": lambda info, text: text.strip() == FIRST_COMMAND,
    "second command": lambda info, text: text.strip() == SECOND_COMMAND,
    "full output": lambda info, text: info == "text" and "\n  --> " in text,
    "concise output": lambda info, text: info == "text" and text.startswith("examples/ddp_loop.py:"),
    "action": lambda info, text: info == "yaml" and "placement-lint@" in text,
    "pre-commit": lambda info, text: info == "yaml" and text.startswith("repos:"),
    "vscode": lambda info, text: info == "json" and "glspc.server.command" in text,
    "neovim": lambda info, text: info == "lua",
    "python": lambda info, text: info == "python",
    "configuration": lambda info, text: info == "toml" and text.startswith("[tool.placement-lint]"),
    "ruff external": lambda info, text: info == "toml" and text.startswith("[tool.ruff.lint]"),
}


def readme_example(name: str) -> str:
    [text] = [text for info, text in code_blocks(README) if README_EXAMPLES[name](info, text)]
    return text


def test_every_readme_example_is_run_by_a_test() -> None:
    for info, text in code_blocks(README):
        names = [name for name, matches in README_EXAMPLES.items() if matches(info, text)]
        assert len(names) == 1, f"a README block with no test (or two): {info}\n{text[:200]}"


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_the_two_commands_come_first_and_ci_runs_the_second() -> None:
    blocks = [text.strip() for _, text in code_blocks(README)]
    commands = [text for info, text in code_blocks(README) if info == "bash"]
    assert blocks[1] == FIRST_COMMAND, "the first command is the first thing to run (after the diff that shows the bug)"
    assert [text.strip() for text in commands] == [FIRST_COMMAND, SECOND_COMMAND]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == SECOND_COMMAND, ".ci/run runs exactly the README's second command"
    install = (DOCS / "install.md").read_text(encoding="utf-8")
    assert FIRST_COMMAND in install and SECOND_COMMAND in install


def test_the_first_command_prints_what_the_readme_shows() -> None:
    full = run_script("check", "--no-cache", "examples", cwd=ROOT)
    assert full.returncode == 1
    # Line ends as a Markdown file keeps them: the frame's empty source line ends in a space.
    assert readme_example("full output") in "\n".join(line.rstrip() for line in full.stdout.splitlines())
    concise = run_script("check", "--no-cache", "--output-format", "concise", "examples", cwd=ROOT)
    assert concise.stdout == readme_example("concise output")


def test_the_diff_example_is_the_fix_of_an_example() -> None:
    diff = run_script("check", "--no-cache", "--diff", "examples/sft_zero3.py", cwd=ROOT)
    changed = {line[0] + line[1:].strip() for line in diff.stdout.splitlines() if line[:1] in "+-" and line[1:2] not in "+-"}
    shown = [line[0] + line[1:].strip() for line in readme_example("diff").splitlines() if line[:1] in "+-"]
    assert shown and set(shown) <= changed


def test_the_action_example_uses_the_actions_inputs() -> None:
    inputs = set(yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["inputs"])
    [job] = yaml.safe_load(readme_example("action"))["jobs"].values()
    [ours] = [step for step in job["steps"] if "placement-lint@" in step.get("uses", "")]
    assert set(ours.get("with", {})) <= inputs


def test_the_pre_commit_example_names_the_hooks() -> None:
    hooks = {hook["id"] for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    [repository] = yaml.safe_load(readme_example("pre-commit"))["repos"]
    assert repository["rev"] and {hook["id"] for hook in repository["hooks"]} <= hooks


def test_the_editor_example_starts_the_server_command() -> None:
    settings = json.loads(readme_example("vscode"))
    assert settings["glspc.server.command"] == "placement-lint" and settings["glspc.server.commandArguments"] == ["server"]
    assert CliRunner().invoke(main, ["server", "--help"]).exit_code == 0
    neovim = readme_example("neovim")
    assert re.search(r'cmd = \{ "placement-lint", "server" \}', neovim) and 'vim.lsp.enable("placement_lint")' in neovim


def test_the_python_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {}
    exec(compile(readme_example("python"), "README.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    concise = readme_example("concise output").splitlines()[:-1]  # less the summary line
    assert [line.split(" DPL")[0] for line in printed] == [line.split(" DPL")[0] for line in concise]
    assert "device_map=None,  # fits on one node" in str(namespace["fixed_text"]) and namespace["remaining"] == []


def test_the_configuration_example_is_read_by_the_settings_and_the_schema(tmp_path: Path) -> None:
    text = readme_example("configuration")
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    settings = load_settings(tmp_path / "pyproject.toml", tmp_path, rule_codes())
    assert settings.context == "ddp" and "DPL100" in settings.enabled_codes()
    schema = json.loads((ROOT / SCHEMA_FILE).read_text(encoding="utf-8"))
    jsonschema.validate(toml_module().loads(text)["tool"]["placement-lint"], schema)


def test_the_ruff_example_keeps_ruff_from_deleting_our_noqa(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("x = 1  # noqa: DPL001\n", encoding="utf-8")

    def ruff() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "RUF", "train.py"]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)

    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    without = ruff()
    # RUF100 in older ruff, RUF102 (invalid rule code) since; either one's --fix deletes the comment.
    assert without.returncode == 1 and re.search(r"RUF10[02]", without.stdout), without.stdout + without.stderr
    (tmp_path / "pyproject.toml").write_text(readme_example("ruff external"), encoding="utf-8")
    with_external = ruff()
    assert with_external.returncode == 0, with_external.stdout + with_external.stderr


def test_the_documentation_examples_parse_and_configure_what_exists(tmp_path: Path) -> None:
    """The site's YAML, TOML and JSON blocks parse; its Action steps use the Action's inputs and its
    [tool.placement-lint] tables are valid settings (the README's are run above)."""
    inputs = set(yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["inputs"])
    schema = json.loads((ROOT / SCHEMA_FILE).read_text(encoding="utf-8"))
    seen = 0
    for path in sorted(DOCS.rglob("*.md")):
        for info, text in code_blocks(path):
            if info == "yaml":
                loaded = yaml.safe_load(text)
                jobs = loaded.get("jobs") if isinstance(loaded, dict) else None  # a hook list is a list
                steps = [step for job in (jobs or {}).values() for step in job.get("steps", [])]
                for step in steps:
                    if "placement-lint@" in step.get("uses", ""):
                        assert set(step.get("with", {})) <= inputs, path
            elif info == "toml":
                table = toml_module().loads(text).get("tool", {}).get("placement-lint")
                if table is not None:
                    jsonschema.validate(table, schema)
                    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
                    load_settings(tmp_path / "pyproject.toml", tmp_path, rule_codes())
            elif info == "json":
                json.loads(text)
            else:
                continue
            seen += 1
    assert seen >= 7, "the CI, pre-commit, editor, configuration and suppression pages hold examples"


# `pip install placement-lint` (or `'placement-lint[lsp]'`) asks the package index for a name it
# does not hold yet; a git URL (`placement-lint @ git+https://...`) or a path works.
_INDEX_INSTALL = re.compile(r"""pip install +["']?placement-lint(\[[^\]]*\])?(?![\w\[-]| *@)""")


def test_no_page_installs_from_the_package_index_before_it_is_published() -> None:
    pages = [README, *(path for path in DOCS.rglob("*.md") if "hooks" not in path.parts)]
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in pages
        for match in _INDEX_INSTALL.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []
    assert _INDEX_INSTALL.search("run: pip install placement-lint\n") and _INDEX_INSTALL.search(
        "pip install 'placement-lint[lsp]'"
    )
    assert not _INDEX_INSTALL.search('pip install "placement-lint[lsp] @ git+https://github.com/o/placement-lint"')


def markdown_files() -> list[Path]:
    docs = [path for path in DOCS.rglob("*.md") if "hooks" not in path.relative_to(DOCS).parts]
    return [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "rules").glob("*.md")), *sorted(docs)]


def _relative(target: str) -> str | None:
    """The file part of a link to a file of this repository, or None for a web link or an anchor."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "//")):
        return None
    return target.split("#")[0]


def test_every_relative_link_resolves_to_a_file() -> None:
    hooks = site_hooks()
    broken = []
    for path in markdown_files():
        # A page of the site links among the site's pages: a rule page sits at rules/ there, the
        # changelog at changelog.md; each is made from a file of the repository (hooks.source_of).
        if path.is_relative_to(DOCS):
            where = path.relative_to(DOCS).parent.as_posix()
        elif path.parent.name == "rules":
            where = "rules"
        else:
            where = None
        for target in links(path):
            name = _relative(target)
            if not name:
                continue
            if where is None:
                target_file = path.parent / name
            else:
                target_file = hooks.source_of(DOCS, os.path.normpath(os.path.join(where, name)).replace(os.sep, "/"))
            if not target_file.is_file() and not target_file.is_dir():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("[gone](missing.md) and `[not a link](nowhere.md)`\n\n```\n[nor](this.md)\n```\n", encoding="utf-8")
    assert links(page) == ["missing.md"]


def test_the_navigation_takes_the_pages_docs_holds() -> None:
    """A page another change adds (cache.md, an unplanned one) is in the navigation; a planned page
    docs/ does not hold is left out rather than breaking the build."""
    navigation = site_hooks().navigation({"index.md", "cache.md", "extra.md", "rules.md"})
    flat = json.dumps(navigation)
    assert '"The result cache": "cache.md"' in flat and '"More": ["extra.md"]' in flat
    assert "speed.md" not in flat and '"Home": "index.md"' in flat


def test_one_documentation_url_for_the_site_the_package_and_the_rule_links() -> None:
    site_url = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["site_url"]
    urls = toml_module().loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert site_url == urls["Documentation"] == DOCUMENTATION_URL
    assert page_url("DPL001") == f"{DOCUMENTATION_URL}rules/DPL001/"


def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    for code in rule_codes():
        # The page each finding links (JSON url, SARIF helpUri, the editor) is a page of the site.
        page = site / page_url(code).removeprefix(DOCUMENTATION_URL) / "index.html"
        assert code in page.read_text(encoding="utf-8")
    reference = (site / "configuration" / "index.html").read_text(encoding="utf-8")
    assert all(f"<code>{option.key}</code>" in reference for option in OPTIONS)
    assert 'class="mermaid"' in (site / "launch-context" / "index.html").read_text(encoding="utf-8")
    assert "0.4.1" in (site / "changelog" / "index.html").read_text(encoding="utf-8")
