"""The cache's JSON for findings and launch evidence: what a rule reported, and what the launches
say of a file. Apart from `cache`, which imports it only when there is some to read or write."""

from __future__ import annotations

from placement_lint.analysis.consumers import Consumer, ConsumerKind
from placement_lint.context.evidence import Context, Evidence, Kind, Override
from placement_lint.distributed import Mode, Setup
from placement_lint.edits import Applicability, Edit, Fix
from placement_lint.rules.spans import Note, Related
from placement_lint.rules.violation import Violation


def violation_json(violation: Violation) -> dict[str, object]:
    return {
        "code": violation.code,
        "message": violation.message,
        "start": violation.start,
        "end": violation.end,
        "fix": None
        if violation.fix is None
        else {
            "applicability": violation.fix.applicability.value,
            "message": violation.fix.message,
            "edits": [edit._asdict() for edit in violation.fix.edits],
        },
        "context": None if violation.context is None else _context_json(violation.context),
        "notes": [list(note) for note in violation.notes],
        "related": [list(span) for span in violation.related],
    }


def violation_from_json(data: dict[str, object]) -> Violation:
    fix = data["fix"]
    return Violation(
        str(data["code"]),
        str(data["message"]),
        int(data["start"]),  # type: ignore[call-overload]
        int(data["end"]),  # type: ignore[call-overload]
        None
        if fix is None
        else Fix(
            Applicability(fix["applicability"]),  # type: ignore[index]
            fix["message"],  # type: ignore[index]
            tuple(Edit(**edit) for edit in fix["edits"]),  # type: ignore[index]
        ),
        None if data["context"] is None else _context(data["context"]),  # type: ignore[arg-type]
        tuple(Note(*note) for note in data.get("notes", ())),  # type: ignore[attr-defined]
        tuple(Related(*span) for span in data.get("related", ())),  # type: ignore[attr-defined]
    )


def evidence_json(evidence: Evidence) -> dict[str, object]:
    return {**evidence._asdict(), "kind": evidence.kind.value}


def evidence_from_json(e: dict[str, object]) -> Evidence:
    return Evidence(
        **{
            **e,
            "kind": Kind(e["kind"]),
            "chain": tuple(e["chain"]),  # type: ignore[arg-type]
            "arguments": tuple(tuple(a) for a in e["arguments"]),  # type: ignore[attr-defined]
            "pins": tuple(tuple(p) for p in e.get("pins", ())),  # type: ignore[attr-defined]
            "parser": tuple(tuple(f) for f in e.get("parser", ())),  # type: ignore[attr-defined]
            "configs": tuple(e.get("configs", ())),  # type: ignore[call-overload]
        }
    )


def consumers_json(by_name: dict[str, tuple[Consumer, ...]]) -> dict[str, list[list[str]]]:
    return {name: [[c.kind.value, c.name, c.where] for c in items] for name, items in by_name.items()}


def consumers_from_json(by_name: dict[str, list[list[str]]]) -> dict[str, tuple[Consumer, ...]]:
    return {name: tuple(_consumer(c) for c in items) for name, items in by_name.items()}


def _consumer(data: list[str]) -> Consumer:
    kind, name, where = data
    return Consumer(ConsumerKind(kind), name, None, where)


def _context_json(context: Context) -> dict[str, object]:
    override = context.override
    return {
        "evidence": [evidence_json(e) for e in context.evidence],
        "override": None
        if override is None
        else {"mode": override.setup.mode.value, "stage": override.setup.zero_stage, "source": override.source},
        "arguments": [list(a) for a in context.arguments],
    }


def _context(data: dict[str, object]) -> Context:
    evidence = tuple(evidence_from_json(e) for e in data["evidence"])  # type: ignore[attr-defined]
    raw = data["override"]
    override = None if raw is None else Override(Setup(Mode(raw["mode"]), raw["stage"], raw.get("single", False)), raw["source"])  # type: ignore[index,union-attr]
    return Context(evidence, override, tuple(tuple(a) for a in data["arguments"]))  # type: ignore[attr-defined,misc]
