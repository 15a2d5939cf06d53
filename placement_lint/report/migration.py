"""What a one-shot `--fix` of a repository needs to say: what was fixed (`--show-fixes`), and a
summary a person can act on (files, per-rule counts, what still needs a human).

Both are for people: they go with the human formats only, never into a machine format's stdout.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from placement_lint.edits import Applicability
from placement_lint.report.text import Style, finding_position, plain, plural
from placement_lint.results import Finding, RunOptions, RunResult

if TYPE_CHECKING:
    from placement_lint.fixes.apply import AppliedFix

_MAX_PLACES = 10  # locations listed per group of remaining findings


def fix_list(result: RunResult, would: bool) -> list[str]:
    """`--show-fixes`, shaped like ruff's: per file, each fix with its line in the file as it was
    before (the line `check` reported), its code and what it did."""
    fixed = [file for file in result.files if file.fixed]
    total = sum(len(file.fixed) for file in fixed)
    if not total:
        return []
    lines = [f"{'Would fix' if would else 'Fixed'} {plural(total, 'problem')}:"]
    for file in fixed:
        lines.append(f"- {file.display}:")
        width = max(len(_where(applied)) for applied in file.fixed)
        for applied in sorted(file.fixed, key=lambda a: (a.cell or 0, a.row, a.code)):
            unsafe = " (unsafe fix)" if applied.applicability is Applicability.UNSAFE else ""
            lines.append(f"    {_where(applied).rjust(width)}  {applied.code}  {applied.message}{unsafe}")
    return lines


def _where(applied: AppliedFix) -> str:
    """Its line, in a notebook `cell N:line` as findings are located there."""
    return f"cell {applied.cell}:{applied.row}" if applied.cell is not None else str(applied.row)


@dataclass(frozen=True)
class RuleCounts:
    code: str
    name: str
    found: int
    fixed: int
    noqa: int
    remaining: int


@dataclass(frozen=True)
class HumanWork:
    """Remaining findings of one rule that need the same kind of attention."""

    code: str
    hint: str
    places: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MigrationSummary:
    scanned: int
    with_findings: int
    fixed_files: int
    failed: int  # paths that could not be read, parsed or written
    rules: list[RuleCounts]
    needs_human: list[HumanWork]
    noqa_added: int = 0


def summarize(result: RunResult, options: RunOptions, names: dict[str, str]) -> MigrationSummary:
    fixed = Counter(applied.code for file in result.files for applied in file.fixed)
    remaining = Counter(finding.code for finding in result.findings)
    noqa = Counter(finding.code for finding in result.baselined)
    rules = [
        RuleCounts(
            code, names.get(code, ""), fixed[code] + noqa[code] + remaining[code], fixed[code], noqa[code], remaining[code]
        )
        for code in sorted(set(fixed) | set(remaining) | set(noqa))
    ]
    groups: dict[tuple[str, str], HumanWork] = {}
    for finding in result.findings:
        key = (finding.code, _hint(finding, options))
        groups.setdefault(key, HumanWork(*key)).places.append(f"{finding.display}:{finding_position(finding)}")
    return MigrationSummary(
        scanned=result.checked,
        with_findings=len(
            {file.display for file in result.files if file.fixed or file.findings} | {f.display for f in result.baselined}
        ),
        fixed_files=sum(1 for file in result.files if file.fixed),
        failed=len(result.errors) + sum(1 for file in result.files if file.error),
        rules=rules,
        needs_human=[groups[key] for key in sorted(groups)],
        noqa_added=result.noqa_added,
    )


def _hint(finding: Finding, options: RunOptions) -> str:
    fix = finding.violation.fix
    if fix is None:
        return f"no automatic fix: edit by hand (placement-lint rule {finding.code})"
    if not fix.safe and not options.unsafe_fixes:
        return "unsafe fix available: review it with --diff --unsafe-fixes, apply with --fix --unsafe-fixes"
    return "fix not applied: see the warnings above"


def render_summary(summary: MigrationSummary, style: Style = plain, terminal: bool = False) -> list[str]:
    """The summary's lines: file counts, a table per rule (Markdown unless on a terminal, so it can
    go into the migration's pull request as it is), then what still needs a human."""
    counts = [
        ("files scanned", summary.scanned),
        ("files with findings", summary.with_findings),
        ("files fixed", summary.fixed_files),
    ]
    if summary.noqa_added:
        counts.append(("noqa comments added", summary.noqa_added))
    if summary.failed:
        counts.append(("paths with errors", summary.failed))
    label_width = max(len(label) for label, _ in counts)
    number_width = max(len(str(number)) for _, number in counts)
    lines = [style("Summary", "path")]
    lines += [f"{label.ljust(label_width)}  {str(number).rjust(number_width)}" for label, number in counts]
    if summary.rules:
        lines += ["", *_rule_table(summary.rules, style, terminal)]
    if summary.needs_human:
        total = sum(len(work.places) for work in summary.needs_human)
        lines += ["", style(f"Still needs a human ({total}):", "path")]
        for work in summary.needs_human:
            lines.append(f"  {style(work.code, 'code')} ({len(work.places)})  {style(work.hint, 'help')}")
            lines += [f"      {style(place, 'path')}" for place in work.places[:_MAX_PLACES]]
            if len(work.places) > _MAX_PLACES:
                lines.append(f"      ... and {len(work.places) - _MAX_PLACES} more")
    return lines


def _rule_table(rules: list[RuleCounts], style: Style, terminal: bool) -> list[str]:
    show_noqa = any(rule.noqa for rule in rules)
    header = ["rule", "name", "found", "fixed", *(["noqa"] if show_noqa else []), "remaining"]
    rows = [
        [rule.code, rule.name, *map(str, (rule.found, rule.fixed, *((rule.noqa,) if show_noqa else ()), rule.remaining))]
        for rule in rules
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def cells(row: list[str], styled: bool) -> list[str]:
        out = [cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        if styled:  # pad first: colour codes must not count towards a column's width
            out[0] = style(row[0], "code") + out[0][len(row[0]) :]
        return out

    if terminal:
        from placement_lint.report.terminal import rich_table

        return rich_table(header, rows, right_from=2)
    markdown = [f"| {' | '.join(cells(header, False))} |", "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return markdown + [f"| {' | '.join(cells(row, True))} |" for row in rows]
