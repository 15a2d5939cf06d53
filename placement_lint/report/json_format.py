"""Machine format: a JSON list shaped like ruff's `--output-format json`, plus the context evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.catalogue import page_url
from placement_lint.report.text import statistic_counts
from placement_lint.results import FileResult, Finding, RunResult
from placement_lint.rules import rule_by_code
from placement_lint.rules.spans import Related

if TYPE_CHECKING:
    from placement_lint.report.formats import Report


def _location(source, offset: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    _, row, column = source.location(offset)  # in a notebook, the row in its cell (as ruff)
    return {"row": row, "column": column}


def finding_json(file: FileResult, finding: Finding, cwd: Path, rule_url_base: str | None = None) -> dict[str, object]:
    violation = finding.violation
    fix = None
    if violation.fix is not None and file.source is not None:
        fix = {
            "applicability": violation.fix.applicability.value,
            "message": violation.fix.message,
            "edits": [
                {
                    "content": edit.content,
                    "location": _location(file.source, edit.start),
                    "end_location": _location(file.source, edit.end),
                }
                for edit in violation.fix.edits
            ],
        }
    rule = rule_by_code(finding.code)
    return {
        "cell": finding.cell,
        "code": finding.code,
        "message": violation.message,
        "filename": _absolute(finding.display, cwd),
        "location": {"row": finding.row, "column": finding.column},
        "end_location": {"row": finding.end_row, "column": finding.end_column},
        "fix": fix,
        "url": page_url(finding.code, rule_url_base) if rule else None,
        "noqa_row": finding.noqa_row or finding.row,
        "context": finding.context.to_json(),
        "notes": [{"label": note.label, "text": note.text} for note in violation.notes],
        "related": [related_json(span, cwd) for span in violation.related],
    }


def related_json(span: Related, cwd: Path) -> dict[str, object]:
    """One span of the finding's path, shaped like a finding's own location; a span whose line is not
    known (the file, not the line) has null locations."""
    known = span.row > 0
    return {
        "role": span.role,
        "message": span.message,
        "filename": _absolute(span.path, cwd),
        "cell": span.cell,
        "location": {"row": span.row, "column": span.column} if known else None,
        "end_location": {"row": span.end_row, "column": span.end_column} if known else None,
    }


def _absolute(display: str, cwd: Path) -> str:
    return str((cwd / display).resolve()) if not Path(display).is_absolute() else display


def render_report(report: Report) -> str:
    return render(report.result, report.cwd)


def render(result: RunResult, cwd: Path) -> str:
    items = [finding_json(file, finding, cwd, result.rule_url_base) for file in result.files for finding in file.findings]
    return json.dumps(items, indent=2, ensure_ascii=False)


def render_statistics(result: RunResult, unsafe_fixes: bool = False) -> str:
    """`--statistics --output-format json`: a count per rule, as ruff prints it: `fixable` when every
    finding of the rule has a fix this run would apply, and how many have one."""
    counts, fixable = statistic_counts(result, unsafe_fixes)
    entries = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        rule = rule_by_code(code)
        entries.append(
            {
                "code": code,
                "name": rule.name if rule else "",
                "count": count,
                "fixable": fixable[code] == count,
                "fixable_count": fixable[code],
            }
        )
    return json.dumps(entries, indent=2)
