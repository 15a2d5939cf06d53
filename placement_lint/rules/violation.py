"""What a rule reports: a code, a message, a span of the source and maybe a fix. Apart from the rules,
so the cache can read findings back without importing them."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from placement_lint.context.evidence import Context
    from placement_lint.edits import Fix


# The roles of the spans on a finding's path, in the order the data flows: the command that runs the
# script, the config (or the in-file evidence) that makes the run distributed, the imports that lead
# from the launched script to the flagged module, the model's load, what trains or uses it. `helper`:
# a call in an importer that returns the model to it; `finding`: the flagged code, when it is not a load.
ROLES = ("launch", "config", "import", "helper", "load", "finding", "consumer")


class Related(NamedTuple):
    """One span of a finding's path. Rows and columns are 1-based, as the finding's own; row 0: the
    file is known but not the line (then the columns are 0 too)."""

    role: str  # one of ROLES
    path: str  # as the run names files (relative to the working folder, or absolute)
    row: int
    column: int
    end_row: int
    end_column: int
    message: str  # what this span says, for a caret label: "accelerate launch --config_file z3.yaml train.py"
    cell: int | None = None  # in a notebook: the cell, and rows are in it

    @property
    def where(self) -> str:
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.row}" if self.row else self.path


class Note(NamedTuple):
    """One labelled fact under a finding's headline: `launched by`, `config`, `imported by`, `trained by`,
    `error` (what the library raises), `help` (what to do)."""

    label: str
    text: str


class Violation(NamedTuple):
    code: str
    message: str  # the headline: what is wrong, and under which setup (at most 160 characters)
    start: int
    end: int
    fix: Fix | None = None
    context: Context | None = None  # the evidence behind the finding
    notes: tuple[Note, ...] = ()  # one fact each, in the order they are shown
    related: tuple[Related, ...] = ()  # the path, as data: every span, the flagged one included, in data-flow order
