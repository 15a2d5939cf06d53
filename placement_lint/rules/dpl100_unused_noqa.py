"""DPL100 unused-noqa: a `# noqa: DPL…` that suppresses nothing (ruff's RUF100, for our codes)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from placement_lint.edits import Applicability, Edit
from placement_lint.patterns import LazyPattern
from placement_lint.rules.base import CheckedFile, FixAvailability, Rule, Violation, fix
from placement_lint.rules.noqa import NOQA_TOKENS, Code, Directive, Suppressions, noqa_row, unknown_code

# The text pre-check: a directive naming one of our codes. Without one there is nothing to report,
# so a file that no other rule would parse stays unparsed.
_OUR_DIRECTIVE = LazyPattern(rb"noqa[^\r\n]*DPL", re.IGNORECASE)


class UnusedNoqa(Rule):
    code = "DPL100"
    name = "unused-noqa"
    summary = "A `# noqa: DPL...` comment, or a DPL code in one, that suppresses nothing"
    fix_availability = FixAvailability.ALWAYS
    triggers = ()  # could_fire looks for a directive naming a DPL code instead
    anchors = NOQA_TOKENS
    context_free = True  # a comment that suppresses nothing does so in every setup
    checks_suppressions = True
    valid = (
        # DeepSpeed ZeRO-3: DPL001 fires on the line, the comment is used.
        'from transformers import AutoModelForCausalLM, TrainingArguments\nargs = TrainingArguments("o", deepspeed="ds.json")\n'
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")  # noqa: DPL001\n',
        # Other tools' codes are theirs to judge, and a bare noqa comment is shared with every other linter.
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")  # noqa: E501\n',
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")  # noqa\n',
        # Inside a string it is not a comment.
        'HELP = "silence it with # noqa: DPL001"\n',
    )
    invalid = ('model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")  # noqa: DPL001\n',)

    @classmethod
    def could_fire(cls, raw: bytes) -> bool:
        return _OUR_DIRECTIVE.search(raw) is not None

    def check(self, file: CheckedFile) -> Iterator[Violation]:
        return iter(())

    def check_suppressions(
        self, file: CheckedFile, suppressions: Suppressions, found: list[Violation], judged: frozenset[str], known: frozenset[str]
    ) -> list[Violation]:
        if suppressions.whole_file or suppressions.in_file(self.code):
            return []  # like ruff: a file directive that covers this rule silences it, before it looks
        # A line's code is used by a finding on its line that the file's directives leave to it (they
        # apply first, as in ruff); a file directive's code, by any finding of its rule in the file.
        fired: dict[int, set[str]] = {}
        for violation in found:
            if not suppressions.in_file(violation.code):
                fired.setdefault(noqa_row(file.source, violation.start), set()).add(violation.code)
        anywhere = {violation.code for violation in found}
        violations = []
        for directive in sorted((*suppressions.lines.values(), *suppressions.file), key=lambda d: d.start):
            # Like ruff: a directive that names this rule keeps itself.
            if any(code.upper == self.code for code in directive.codes):
                continue
            used = anywhere if directive.file_level else fired.get(directive.row, set())
            unused, unknown, duplicated, seen = [], [], [], set()
            for code in directive.codes:
                if code.upper in seen:
                    duplicated.append(code)
                elif unknown_code(code.upper, known):
                    unknown.append(code)
                elif code.upper in judged and code.upper not in used:
                    unused.append(code)
                seen.add(code.upper)
            if not unused and not unknown and not duplicated:
                continue
            parts = [
                f"{label}: {', '.join(f'`{c.text}`' for c in codes)}"
                for label, codes in (("unused", unused), ("unknown", unknown), ("duplicated", duplicated))
                if codes
            ]
            dropped = {*unused, *unknown, *duplicated}
            kept = [code for code in directive.codes if code not in dropped]
            edit = _keep_codes(directive, kept) if kept else _remove(file, directive)
            violations.append(
                Violation(
                    self.code,
                    f"Unused `noqa` directive ({'; '.join(parts)})",
                    directive.start,
                    directive.end,
                    fix(Applicability.SAFE, "Remove unused `noqa` directive" if not kept else "Remove the unused codes", edit),
                )
            )
        return violations


def _keep_codes(directive: Directive, kept: list[Code]) -> Edit:
    """Rewrite the list of codes, keeping the others (another tool's `E501`, a DPL code still in use)."""
    return Edit(directive.codes[0].start, directive.codes[-1].end, ", ".join(code.text for code in kept))


def _remove(file: CheckedFile, directive: Directive) -> Edit:
    """Remove the directive and keep the rest of the comment (`# type: ignore`, an explanation)."""
    text, source = file.source.text, file.source
    line_start = source.line_starts[directive.row - 1]
    line_end = line_start + len(source.line(directive.row))
    before = text[line_start : directive.start]
    after = text[directive.end : line_end]
    rest = after.lstrip(" \t")
    if not rest:
        if not before.strip():  # the line holds nothing else: it goes, with its line ending
            next_line = source.line_starts[directive.row] if directive.row < source.line_count else len(text)
            return Edit(line_start, next_line, "")
        return Edit(line_start + len(before.rstrip(" \t")), line_end, "")
    skipped = directive.end + len(after) - len(rest)
    if rest.startswith("#"):  # `# noqa: DPL001  # type: ignore`: the next comment stays where it is
        return Edit(directive.start, skipped, "")
    return Edit(directive.start, skipped, "# ")  # `# noqa: DPL001 why`: the explanation stays a comment
