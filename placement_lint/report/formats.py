"""The `--output-format` registry: each format's renderer lives in its own module, imported only
when that format is chosen, so the command line needs no chain of cases and a light run stays light."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.records import NamedTuple

if TYPE_CHECKING:  # the command line reads FORMATS for its choices before any run is imported
    from placement_lint.results import RunOptions, RunResult


# Named tuples, not dataclasses: the command line imports this module on every run, and creating a
# dataclass costs a warm run about 1% of its time.


class Report(NamedTuple):
    """What every renderer gets."""

    result: RunResult
    options: RunOptions
    cwd: Path
    # Human formats only: `style(text, name)` adds colour codes, or nothing (see report/text.py).
    style: Callable[[str, str], str] = lambda text, _: text


class OutputFormat(NamedTuple):
    name: str
    module: str  # under placement_lint.report
    function: str
    # Human formats may be coloured and end with the summary line; machine formats are only data,
    # so a tool reading stdout or the output file never meets markup or prose.
    human: bool = False

    def render(self, report: Report) -> str:
        module = importlib.import_module(f"placement_lint.report.{self.module}")
        return getattr(module, self.function)(report)


FORMATS: dict[str, OutputFormat] = {
    f.name: f
    for f in (
        OutputFormat("full", "text", "render_full", human=True),
        OutputFormat("concise", "text", "render_concise", human=True),
        OutputFormat("grouped", "grouped", "render", human=True),
        OutputFormat("json", "json_format", "render_report"),
        OutputFormat("json-lines", "json_lines", "render"),
        OutputFormat("sarif", "sarif", "render"),
        OutputFormat("github", "github", "render"),
        OutputFormat("gitlab", "gitlab", "render"),
        OutputFormat("junit", "junit", "render"),
    )
}


def is_human(output_format: str) -> bool:
    """Is this format read by people? Every other one is read by a program, and gets neither the
    fix list nor the summary on stdout."""
    chosen = FORMATS.get(output_format)
    return chosen is not None and chosen.human
