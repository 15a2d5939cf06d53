"""Machine format `json-lines`: one JSON object per finding per line, the same objects as `json`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from placement_lint.report.json_format import finding_json

if TYPE_CHECKING:
    from placement_lint.report.formats import Report


def render(report: Report) -> str:
    return "\n".join(
        json.dumps(finding_json(file, finding, report.cwd, report.result.rule_url_base), ensure_ascii=False)
        for file in report.result.files
        for finding in file.findings
    )
