"""Human format `grouped`, as ruff prints it: each file's name, then its findings indented under it,
rows right-aligned and columns padded so the codes line up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement_lint.report.text import finding_row, marker, one_line

if TYPE_CHECKING:
    from placement_lint.report.formats import Report


def render(report: Report) -> str:
    style = report.style
    lines: list[str] = []
    for file in report.result.files:
        if not file.findings:
            continue
        row_width = max(len(finding_row(f)) for f in file.findings)
        column_width = max(len(str(f.column)) for f in file.findings)
        lines.append(f"{style(file.display, 'path')}:")
        for finding in file.findings:
            position = f"{finding_row(finding).rjust(row_width)}:{str(finding.column).ljust(column_width)}"
            lines.append(f"  {position} {style(finding.code, 'code')} {marker(finding, report.options)}{one_line(finding)}")
        lines.append("")
    return "\n".join(lines)
