"""Machine format `junit`: JUnit XML, shaped like ruff's: one test suite per file with findings,
one failing test case per finding; a file that could not be checked is a test case in error, and
warnings go to its suite's `system-err`. A clean run is one passing test case."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from placement_lint.report.common import SourceRoot, located, problems
from placement_lint.report.text import one_line

if TYPE_CHECKING:
    from placement_lint.report.formats import Report

TOOL = "placement-lint"
# XML 1.0 cannot hold these at all, escaped or not; a message quoting odd source text may contain them.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(value: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", value)


class _Suite:
    def __init__(self, name: str) -> None:
        self.element = ET.Element("testsuite", name=_xml_text(name), package=TOOL)
        self.tests = self.failures = self.errors = 0
        self.stderr: list[str] = []

    def case(self, name: str, classname: str, **attributes: str) -> ET.Element:
        self.tests += 1
        attributes = {key: _xml_text(value) for key, value in attributes.items()}
        return ET.SubElement(self.element, "testcase", name=_xml_text(name), classname=_xml_text(classname), **attributes)

    def finish(self) -> ET.Element:
        self.element.attrib.update(
            tests=str(self.tests), failures=str(self.failures), errors=str(self.errors), skipped="0", disabled="0"
        )
        if self.stderr:
            ET.SubElement(self.element, "system-err").text = _xml_text("\n".join(self.stderr))
        return self.element


def render(report: Report) -> str:
    root = SourceRoot(report.cwd)
    suites: dict[str, _Suite] = {}

    def suite(name: str) -> _Suite:
        return suites.setdefault(name, _Suite(name))

    for item in located(report.result, root):
        finding = item.finding
        region = finding.file_region  # none in a notebook: no line attribute, as ruff does
        position = {} if region is None else {"line": str(region.row), "column": str(region.column)}
        case = suite(finding.display).case(f"{TOOL}.{finding.code}", _classname(finding.display), file=item.path, **position)
        message = _xml_text(one_line(finding))
        failure = ET.SubElement(case, "failure", message=message, type=finding.code)
        cell = "" if finding.cell is None else f"cell {finding.cell}, "
        notes = "".join(f"\n{note.label}: {note.text}" for note in finding.violation.notes)
        failure.text = f"{cell}line {finding.row}, col {finding.column}, {message}{_xml_text(notes)}"
        suites[finding.display].failures += 1
    for problem in problems(report.result):
        target = suite(problem.display or TOOL)
        if problem.level == "error":
            classname = _classname(problem.display) if problem.display else TOOL
            extra = {"file": root.path(problem.display)} if problem.display else {}
            case = target.case(f"{TOOL}.error", classname, **extra)
            ET.SubElement(case, "error", message=_xml_text(problem.message), type="error").text = _xml_text(problem.message)
            target.errors += 1
        else:
            target.stderr.append(f"warning: {problem.message}")
    if not any(s.tests for s in suites.values()):
        suite(TOOL).case("No errors found", TOOL)

    document = ET.Element("testsuites", name=TOOL)
    for name in sorted(suites, key=lambda n: (n == TOOL, n)):
        document.append(suites[name].finish())
    document.attrib.update(
        tests=str(sum(s.tests for s in suites.values())),
        failures=str(sum(s.failures for s in suites.values())),
        errors=str(sum(s.errors for s in suites.values())),
    )
    ET.indent(document, space="    ")
    buffer = io.StringIO()
    ET.ElementTree(document).write(buffer, encoding="unicode", xml_declaration=False)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + buffer.getvalue()


def _classname(display: str) -> str:
    """As ruff names a case's class: the file's path without its suffix."""
    return str(PurePosixPath(display.replace("\\", "/")).with_suffix(""))
