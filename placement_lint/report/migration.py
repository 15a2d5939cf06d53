"""What a one-shot `--fix` of a repository needs to say: what was fixed (`--show-fixes`), and a
summary a person can act on (files, per-rule counts, what still needs a human).

Both are for people: they go with the human formats only, never into a machine format's stdout.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field

from placement_lint.edits import Applicability
from placement_lint.engine import Finding, RunOptions, RunResult

# Every other format (json, and whatever machine formats come) is read by a program.
HUMAN_FORMATS = frozenset({"full", "concise", "grouped"})
_MAX_PLACES = 10  # locations listed per group of remaining findings


def fix_list(result: RunResult, would: bool) -> list[str]:
    """`--show-fixes`, shaped like ruff's: per file, each fix with its line in the file as it was
    before (the line `check` reported), its code and what it did."""
    fixed = [file for file in result.files if file.fixed]
    total = sum(len(file.fixed) for file in fixed)
    if not total:
        return []
    lines = [f"{'Would fix' if would else 'Fixed'} {_plural(total, 'problem')}:"]
    for file in fixed:
        lines.append(f"- {file.display}:")
        width = max(len(str(applied.row)) for applied in file.fixed)
        for applied in sorted(file.fixed, key=lambda a: (a.row, a.code)):
            unsafe = " (unsafe fix)" if applied.applicability is Applicability.UNSAFE else ""
            lines.append(f"    {str(applied.row).rjust(width)}  {applied.code}  {applied.message}{unsafe}")
    return lines


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
        groups.setdefault(key, HumanWork(*key)).places.append(f"{finding.display}:{finding.row}:{finding.column}")
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
    if fix.applicability is Applicability.UNSAFE and not options.unsafe_fixes:
        return "unsafe fix available: review it with --diff --unsafe-fixes, apply with --fix --unsafe-fixes"
    return "fix not applied: see the warnings above"


def render_summary(summary: MigrationSummary, color: bool) -> str:
    """The summary as text: a rich table (coloured on a terminal), then what still needs a human."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = io.StringIO()
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False, width=200, soft_wrap=True)
    files = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
    files.add_column(style="bold")
    files.add_column(justify="right")
    files.add_row("files scanned", str(summary.scanned))
    files.add_row("files with findings", str(summary.with_findings))
    files.add_row("files fixed", str(summary.fixed_files))
    if summary.noqa_added:
        files.add_row("noqa comments added", str(summary.noqa_added))
    if summary.failed:
        files.add_row(Text("paths with errors", style="bold red"), str(summary.failed))
    console.print(Text("Summary", style="bold"))
    console.print(files)
    if summary.rules:
        show_noqa = any(rule.noqa for rule in summary.rules)
        # Plain, a Markdown table: a migration's summary often ends up in its pull request.
        rules = Table(box=box.SIMPLE_HEAD if color else box.MARKDOWN, pad_edge=not color, show_edge=not color)
        rules.add_column("rule", style="bold red")
        rules.add_column("name")
        for heading in ("found", "fixed", *(("noqa",) if show_noqa else ()), "remaining"):
            rules.add_column(heading, justify="right")
        for rule in summary.rules:
            counts = (rule.found, rule.fixed, *((rule.noqa,) if show_noqa else ()), rule.remaining)
            rules.add_row(rule.code, rule.name, *map(str, counts))
        console.print()
        console.print(rules)
    if summary.needs_human:
        total = sum(len(work.places) for work in summary.needs_human)
        console.print()
        console.print(Text(f"Still needs a human ({total}):", style="bold"))
        for work in summary.needs_human:
            line = Text("  ")
            line.append(work.code, style="bold red")
            line.append(f" ({len(work.places)})  {work.hint}")
            console.print(line)
            for place in work.places[:_MAX_PLACES]:
                console.print(Text(f"      {place}"))
            if len(work.places) > _MAX_PLACES:
                console.print(Text(f"      ... and {len(work.places) - _MAX_PLACES} more"))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    # The Markdown box draws its top and bottom edges as blank lines: keep one blank line, never two.
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1])).strip("\n")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
