"""Machine format `gitlab`: a GitLab Code Quality report (a JSON list of CodeClimate-style issues).

GitLab shows neither `check_name` nor anything but `description` in its widget, so the code leads
the description, as ruff does. Files that could not be checked are issues too, so a broken file
does not pass CI looking clean.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from placement_lint.report.common import SourceRoot, located, problems
from placement_lint.report.text import one_line

if TYPE_CHECKING:
    from placement_lint.report.formats import Report

_SEVERITY = {"error": "critical", "warning": "info"}


def render(report: Report) -> str:
    # GitLab resolves paths against the project checkout; ruff reads the same variable.
    project = os.environ.get("CI_PROJECT_DIR")
    root = SourceRoot(report.cwd, Path(project) if project else None)
    issues: list[dict[str, object]] = [
        {
            "description": f"{item.finding.code}: {one_line(item.finding)}",
            "check_name": item.finding.code,
            "fingerprint": item.fingerprint,
            "severity": "major",
            "location": {
                "path": item.path,
                "lines": {"begin": item.finding.annotated_region.row, "end": item.finding.annotated_region.end_row},
            },
        }
        for item in located(report.result, root)
    ]
    for problem in problems(report.result):
        path = root.path(problem.display) if problem.display else "."
        issues.append(
            {
                "description": f"placement-lint {problem.level}: {problem.message}",
                "check_name": f"placement-lint/{problem.level}",
                "fingerprint": hashlib.sha256(
                    f"{problem.level}\0{path}\0{problem.message}".encode("utf-8", "surrogatepass")
                ).hexdigest()[:32],
                "severity": _SEVERITY[problem.level],
                "location": {"path": path, "lines": {"begin": 1, "end": 1}},
            }
        )
    return json.dumps(issues, indent=2, ensure_ascii=False)
