"""A finding's path as data: its spans (launch, config, imports, load, consumer) and its labelled
notes. Apart from `violation`, so a clean run, which makes no finding, never creates these classes."""

from __future__ import annotations

from placement_lint.records import NamedTuple
from placement_lint.source import FileRegion

# The roles of the spans on a finding's path, in the order the data flows: the command that runs the
# script, the config (or the in-file evidence) that makes the run distributed, the imports that lead
# from the launched script to the flagged module and the importer's call into it (`helper`), where a
# value not written in the load is written (`origin`: a helper's return, the loop that fills a map),
# the model's load, what trains or uses it. `finding`: the flagged code, when it is not a load;
# `attached`: the statement that makes the flagged model a submodule of the one the consumer takes.
ROLES = ("launch", "config", "import", "helper", "origin", "load", "finding", "attached", "consumer")


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
    def file_region(self) -> FileRegion | None:
        """Its rows and columns among the file's own lines; None when the line is not known, or is in a notebook's cell."""
        if self.row <= 0 or self.cell is not None:
            return None
        return FileRegion(self.row, self.column, self.end_row, self.end_column)

    @property
    def where(self) -> str:
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.row}" if self.row else self.path


class Note(NamedTuple):
    """One labelled fact under a finding's headline: `launched by`, `config`, `imported by`, `trained by`,
    `error` (what the library raises), `help` (what to do)."""

    label: str
    text: str
