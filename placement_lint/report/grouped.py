"""Human format `grouped`, as ruff prints it: each file's name, then its findings indented under it,
rows right-aligned and columns padded so the codes line up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement_lint.report.text import marker, one_line

if TYPE_CHECKING:
    from placement_lint.report.formats import Report


def render(report: Report) -> str:
    style = report.style
    lines: list[str] = []
    for file in report.result.files:
        if not file.findings:
            continue
        # In a notebook the row is in a cell: `cell 3:2:15`, as ruff groups them.
        row_width = max(len(str(f.row) if f.cell is None else f"cell {f.cell}:{f.row}") for f in file.findings)
        column_width = max(len(str(f.column)) for f in file.findings)
        lines.append(f"{style(file.display, 'path')}:")
        for finding in file.findings:
            row = str(finding.row) if finding.cell is None else f"cell {finding.cell}:{finding.row}"
            position = f"{row.rjust(row_width)}:{str(finding.column).ljust(column_width)}"
            lines.append(f"  {position} {style(finding.code, 'code')} {marker(finding, report.options)}{one_line(finding)}")
        lines.append("")
    return "\n".join(lines)
