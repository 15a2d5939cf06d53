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
        region = finding.annotated_region
        lines.append(
            command(
                "error",
                f"{finding.display}:{finding_position(finding)}: {finding.code} {one_line(finding)}",
                file=item.path,
                line=region.row,
                col=region.column,
                endLine=region.end_row,
                endColumn=region.end_column,
                title=f"{finding.code} {rule.name}" if rule else finding.code,
            )
        )
    for problem in problems(report.result):
        where: dict[str, object] = {"file": root.path(problem.display)} if problem.display else {}
        place = problem.place
        if place is not None and place.cell is None:  # a mistaken noqa: annotated on its line, as a finding is
            where.update(line=place.row, col=place.column, endLine=place.end_row, endColumn=place.end_column)
        lines.append(command(problem.level, problem.message, **where, title="placement-lint"))
    return "\n".join(lines)
