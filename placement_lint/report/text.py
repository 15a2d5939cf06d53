"""Human formats: `full` (a code frame per finding, like ruff) and `concise` (one line per finding)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from placement_lint.report.formats import Report
    from placement_lint.results import Finding, RunOptions, RunResult

# A tiny style vocabulary; `style(text, name)` renders it in colour (the CLI's ANSI codes) or leaves it plain.
Style = Callable[[str, str], str]


def plain(text: str, _: str) -> str:
    return text


def render_full(report: Report) -> str:
    return "\n".join(full(report.result, report.options, report.style))


def render_concise(report: Report) -> str:
    return "\n".join(concise(report.result, report.options, report.style))


def marker(finding: Finding, options: RunOptions) -> str:
    fix = finding.violation.fix
    if fix is None:
        return ""
    if fix.safe or options.unsafe_fixes:
        return "[*] "
    return ""


def finding_position(finding: Finding) -> str:
    """`train.py:12:5`, or in a notebook `train.ipynb:cell 3:2:15` (ruff's spelling)."""
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{cell}{finding.row}:{finding.column}"


def concise(result: RunResult, options: RunOptions, style: Style = plain) -> list[str]:
    return [
        f"{style(f.display, 'path')}:{finding_position(f)}: {style(f.code, 'code')} {marker(f, options)}{f.violation.message}"
        for f in result.findings
    ]


def full(result: RunResult, options: RunOptions, style: Style = plain) -> list[str]:
    lines: list[str] = []
    for file in result.files:
        for finding in file.findings:
            lines.append(
                f"{style(finding.display, 'path')}:{finding_position(finding)}: "
                f"{style(finding.code, 'code')} {marker(finding, options)}{finding.violation.message}"
            )
            lines += _frame(file.source.frame_source(finding.cell) if file.source else None, finding, style)
            fix = finding.violation.fix
            if fix is not None:
                suffix = "" if fix.safe else " (unsafe fix)"
                lines.append(f"  {style('= help', 'help')}: {fix.message}{suffix}")
            lines.append("")
    return lines


def _frame(source, finding: Finding, style: Style) -> list[str]:  # type: ignore[no-untyped-def]
    if source is None:
        return []
    first = max(1, finding.row - 1)
    last = min(source.line_count, finding.end_row + 1)
    width = len(str(last))
    gutter = " " * (width + 1)
    out = [f"{gutter}{style('|', 'gutter')}"]
    for row in range(first, last + 1):
        text = source.line(row).expandtabs(4)
        out.append(f"{style(str(row).rjust(width), 'gutter')} {style('|', 'gutter')} {text}")
        if finding.row <= row <= finding.end_row:
            start = finding.column - 1 if row == finding.row else len(text) - len(text.lstrip())
            end = finding.end_column - 1 if row == finding.end_row else len(text)
            carets = "^" * max(1, end - start)
            label = f" {finding.code}" if row == finding.end_row else ""
            out.append(f"{gutter}{style('|', 'gutter')} {' ' * start}{style(carets + label, 'caret')}")
    out.append(f"{gutter}{style('|', 'gutter')}")
    return out


def statistics(result: RunResult, names: dict[str, str]) -> list[str]:
    counts = Counter(f.code for f in result.findings)
    fixable = Counter(f.code for f in result.findings if f.violation.fix is not None)
    width = max((len(str(n)) for n in counts.values()), default=1)
    return [
        f"{str(count).rjust(width)}\t{code}\t{'[*] ' if fixable[code] == count else '[-] ' if fixable[code] else '    '}{names.get(code, '')}"
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def summary(result: RunResult, options: RunOptions) -> str:
    findings = result.findings
    fixed = sum(len(f.fixed) for f in result.files)
    files_with = len({f.display for f in findings})
    if options.fix and fixed:
        remaining = f"{len(findings)} remaining" if findings else "0 remaining"
        return f"Fixed {plural(fixed, 'problem')} in {plural(len([f for f in result.files if f.fixed]), 'file')}, {remaining}."
    if not findings:
        failed = len(result.errors) + sum(1 for f in result.files if f.error)
        return f"No problems found, but {plural(failed, 'path')} could not be checked." if failed else "All checks passed!"
    safe = sum(1 for f in findings if f.violation.fix and f.violation.fix.safe)
    unsafe = sum(1 for f in findings if f.violation.fix and not f.violation.fix.safe)
    parts = []
    if options.unsafe_fixes and (safe + unsafe):
        parts.append(f"{safe + unsafe} fixable with --fix --unsafe-fixes")
    else:
        if safe:
            parts.append(f"{safe} fixable with --fix")
        if unsafe:
            parts.append(f"{unsafe} more with --unsafe-fixes")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"Found {plural(len(findings), 'problem')} in {plural(files_with, 'file')}{detail}."


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
