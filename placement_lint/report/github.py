"""Machine format `github`: GitHub Actions workflow commands, one `::error` annotation per finding
(shown on the pull request's diff), and `::error` / `::warning` for files that could not be checked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement_lint.report.common import SourceRoot, located, problems
from placement_lint.report.text import finding_position, one_line
from placement_lint.rules import rule_by_code

if TYPE_CHECKING:
    from placement_lint.report.formats import Report


def escape_data(value: str) -> str:
    """A command's message: GitHub reads `%`, CR and LF percent-encoded."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A property value (`file=`, `title=`): also `:` and `,`, which would end it."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, **properties: object) -> str:
    fields = ",".join(f"{name}={escape_property(str(value))}" for name, value in properties.items())
    return f"::{level} {fields}::{escape_data(message)}" if fields else f"::{level}::{escape_data(message)}"


def render(report: Report) -> str:
    root = SourceRoot(report.cwd)
    lines = []
    for item in located(report.result, root):
        finding = item.finding
        rule = rule_by_code(finding.code)
        # A notebook's rows are in its cells, not in the file GitHub shows: line 1, as ruff does.
        span = (1, 1, 1, 1) if finding.cell is not None else (finding.row, finding.column, finding.end_row, finding.end_column)
        lines.append(
            command(
                "error",
                f"{finding.display}:{finding_position(finding)}: {finding.code} {one_line(finding)}",
                file=item.path,
                line=span[0],
                col=span[1],
                endLine=span[2],
                endColumn=span[3],
                title=f"{finding.code} {rule.name}" if rule else finding.code,
            )
        )
    for problem in problems(report.result):
        where = {"file": root.path(problem.display)} if problem.display else {}
        lines.append(command(problem.level, problem.message, **where, title="placement-lint"))
    return "\n".join(lines)
