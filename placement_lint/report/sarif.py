"""Machine format `sarif`: a SARIF 2.1.0 log for code scanning (GitHub's upload-sarif and others).

Paths are relative to the repository (`%SRCROOT%`), so an alert keeps its identity across
checkouts; each result carries a fingerprint that survives edits elsewhere in the file, its fix as
replacements, and the launch script, config or in-file lines that made the file distributed as
related locations. Errors and warnings about the run are tool execution notifications.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from placement_lint.catalogue import DOCUMENTATION_URL, page, page_url
from placement_lint.report.common import Located, Problem, SourceRoot, located, problems, relative_uri
from placement_lint.rules import all_rules
from placement_lint.rules.base import Rule
from placement_lint.rules.spans import Related
from placement_lint.rules.violation import Violation
from placement_lint.version import __version__

if TYPE_CHECKING:
    from placement_lint.report.formats import Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
ROOT_ID = "%SRCROOT%"
# A key of our own: GitHub computes `primaryLocationLineHash` itself and warns when a tool's differs.
FINGERPRINT_KEY = "placementLint/v1"
_SECTION = re.compile(r"^## What it does\s*\n+(?P<body>.+?)(?:\n\s*\n|\Z)", re.MULTILINE | re.DOTALL)


def render(report: Report) -> str:
    root = SourceRoot(report.cwd)
    rules = all_rules()
    index = {rule.code: number for number, rule in enumerate(rules)}
    run_problems = problems(report.result)
    run: dict[str, object] = {
        "tool": {
            "driver": {
                "name": "placement-lint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": DOCUMENTATION_URL,
                "rules": [_rule(rule, report.result.rule_url_base) for rule in rules],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not any(p.level == "error" for p in run_problems),
                "workingDirectory": {"uri": report.cwd.resolve().as_uri().rstrip("/") + "/"},
                "toolExecutionNotifications": [
                    {
                        "level": problem.level,
                        "message": {"text": problem.message},
                        **({"locations": [{"physicalLocation": _problem_location(root, problem)}]} if problem.display else {}),
                    }
                    for problem in run_problems
                ],
            }
        ],
        "originalUriBaseIds": {ROOT_ID: {"uri": root.root_uri()}},
        # Our columns count characters, not SARIF's default UTF-16 code units.
        "columnKind": "unicodeCodePoints",
        "results": [_result(item, root, index) for item in located(report.result, root)],
    }
    return json.dumps({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, indent=2, ensure_ascii=False)


def _rule(rule: type[Rule], rule_url_base: str | None) -> dict[str, object]:
    text = page(rule.code)
    what = _SECTION.search(text) if text else None
    entry: dict[str, object] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": " ".join(what.group("body").split()) if what else rule.summary},
        "helpUri": page_url(rule.code, rule_url_base),
        "defaultConfiguration": {"level": "error"},
        "properties": {"fix": rule.fix_availability.value},
    }
    if text:
        entry["help"] = {"text": text, "markdown": text}
    return entry


def _artifact(root: SourceRoot, display: str, relative: str | None = None) -> dict[str, object]:
    """`relative`: the path under the root when the caller has it already (`Located.relative`)."""
    relative = relative or root.relative(display)
    if relative is None:
        return {"artifactLocation": {"uri": root.absolute(display).as_uri()}}
    return {"artifactLocation": {"uri": relative_uri(relative), "uriBaseId": ROOT_ID}}


def _problem_location(root: SourceRoot, problem: Problem) -> dict[str, object]:
    """The file a notification is about, and the place in it when it has one (a mistaken noqa)."""
    location = _artifact(root, problem.display or "")
    place = problem.place
    if place is not None and place.cell is None:
        location["region"] = _region(place.row, place.column, place.end_row, place.end_column)
    return location


def _region(row: int, column: int, end_row: int, end_column: int, snippet: str | None = None) -> dict[str, object]:
    region: dict[str, object] = {"startLine": row, "startColumn": column, "endLine": end_row, "endColumn": end_column}
    if snippet is not None:
        region["snippet"] = {"text": snippet}
    return region


def _result(item: Located, root: SourceRoot, index: dict[str, int]) -> dict[str, object]:
    finding, file = item.finding, item.file
    violation = finding.violation
    # In a notebook the flagged text is in a cell, not at the file's first line where the region points.
    in_file = file.source is not None and finding.file_region is not None
    snippet = file.source.text[violation.start : violation.end] if in_file else None  # type: ignore[union-attr]
    location = _artifact(root, file.display, item.relative)
    result: dict[str, object] = {
        "ruleId": finding.code,
        **({"ruleIndex": index[finding.code]} if finding.code in index else {}),
        "level": "error",
        "message": {"text": message_text(violation)},
        "locations": [
            {
                "physicalLocation": {
                    **location,
                    "region": _region(*finding.annotated_region, snippet),
                }
            }
        ],
        "partialFingerprints": {FINGERPRINT_KEY: item.fingerprint},
        "properties": {"setup": finding.context.setup.describe()},
    }
    if finding.cell is not None:
        # A notebook's rows are in its cells, not in the JSON file a viewer shows: the region is
        # line 1 (as ruff's other formats fall back), the cell and row are properties.
        result["properties"] = {**result["properties"], "cell": finding.cell, "cellLine": finding.row}  # type: ignore[dict-item]
    if violation.related:
        spans = [_located(span, root) for span in violation.related]
        result["relatedLocations"] = [{"id": number, **span} for number, span in enumerate(spans, 1)]
        # The path as code scanning draws it: from the launch, through the config and the imports, to the
        # load and what trains the model.
        result["codeFlows"] = [
            {
                "message": {"text": f"How {finding.display} runs {finding.context.setup.describe()}"},
                "threadFlows": [
                    {
                        "locations": [
                            {"location": span, "kinds": [related.role], "nestingLevel": 0, "executionOrder": order}
                            for order, (span, related) in enumerate(zip(spans, violation.related, strict=True), 1)
                        ]
                    }
                ],
            }
        ]
    if finding.context.override is not None:
        result["properties"] = {**result["properties"], "setBy": finding.context.override.source}  # type: ignore[dict-item]
    fix = violation.fix
    if fix is not None and in_file:  # a notebook's edits are in its cells, not its file
        source = file.source
        result["fixes"] = [
            {
                "description": {"text": fix.message},
                "artifactChanges": [
                    {
                        **location,
                        "replacements": [
                            {
                                "deletedRegion": _region(*source.position(edit.start), *source.position(edit.end)),
                                "insertedContent": {"text": edit.content},
                            }
                            for edit in fix.edits
                        ],
                    }
                ],
                "properties": {"applicability": fix.applicability.value},
            }
        ]
    return result


def _located(span: Related, root: SourceRoot) -> dict[str, object]:
    """A span of the finding's path: its file, its region when the line is known (a notebook's cell rows
    are not the file's lines: the cell goes into the properties), and its role as the message."""
    physical: dict[str, object] = _artifact(root, span.path)
    if span.file_region is not None:
        physical["region"] = _region(*span.file_region)
    located: dict[str, object] = {"physicalLocation": physical, "message": {"text": f"{span.role}: {span.message}"}}
    if span.cell is not None:
        located["properties"] = {"cell": span.cell, "cellLine": span.row}
    return located


def message_text(violation: Violation) -> str:
    """The headline, then one note per line (code scanning shows the first line as the alert's title),
    then the path with each span an embedded link to its related location (`[train.py:7](4)`), which
    code scanning turns into a link. Brackets that are not a link are escaped, as SARIF asks (§3.11.6)."""
    lines = [_escaped(violation.message), *(f"{note.label}: {_escaped(note.text)}" for note in violation.notes)]
    if len(violation.related) > 1:
        steps = [f"{span.role} [{_escaped(span.where)}]({number})" for number, span in enumerate(violation.related, 1)]
        lines.append(f"path: {' -> '.join(steps)}")
    return "\n".join(lines)


def _escaped(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")
