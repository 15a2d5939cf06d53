"""What the machine formats share: repository-relative paths, stable fingerprints, and the run's
errors and warnings as data, so each format can carry them where it has a place for them."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from placement_lint.discover import repository_root
from placement_lint.records import NamedTuple
from placement_lint.results import FileResult, Finding, PlacedWarning, RunResult


class SourceRoot:
    """Where CI tools expect paths to start: the repository holding the working folder (`.git`, else
    the outermost project marker, see `discover.repository_root`), or the working folder itself."""

    def __init__(self, cwd: Path, root: Path | None = None) -> None:
        self.cwd = cwd
        self.root = (root or repository_root(cwd.resolve()) or cwd).resolve()

    def absolute(self, display: str) -> Path:
        path = Path(display)
        return (path if path.is_absolute() else self.cwd / path).resolve()

    def relative(self, display: str) -> str | None:
        """`display` (as the run names a file: relative to the working folder, or absolute) relative
        to the root, in POSIX form; None for a file outside it."""
        try:
            return self.absolute(display).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def path(self, display: str) -> str:
        """For formats that take a plain path: relative to the root when inside it, else absolute."""
        return self.relative(display) or str(self.absolute(display))

    def root_uri(self) -> str:
        return self.root.as_uri().rstrip("/") + "/"


def relative_uri(relative: str) -> str:
    # A file name that is not UTF-8 holds surrogate escapes: its URI percent-encodes the real bytes.
    return quote(os.fsencode(relative), safe="/")


# Named tuples, not dataclasses: the CLI imports this module on every run, and creating a dataclass
# costs a warm run about 1% of its time.


class Located(NamedTuple):
    """A finding with what the machine formats derive from it."""

    file: FileResult
    finding: Finding
    path: str  # relative to the source root (or absolute, outside it)
    relative: str | None  # relative to the source root; None outside it
    fingerprint: str


def located(result: RunResult, root: SourceRoot) -> list[Located]:
    """Every finding in report order, each with a fingerprint that survives edits elsewhere in the
    file: it hashes the rule, the path and the flagged lines' text (whitespace collapsed), never a
    line number, plus how many identical findings came before it in the file."""
    import hashlib  # loads OpenSSL: only the formats that fingerprint findings pay for it

    items: list[Located] = []
    for file in result.files:
        relative = root.relative(file.display)
        path = relative or str(root.absolute(file.display))
        seen: Counter[str] = Counter()
        for finding in file.findings:
            identity = "\0".join((finding.code, path, _flagged_text(file, finding)))
            occurrence = seen[identity]
            seen[identity] += 1
            digest = hashlib.sha256(f"{identity}\0{occurrence}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
            items.append(Located(file, finding, path, relative, digest))
    return items


def _flagged_text(file: FileResult, finding: Finding) -> str:
    if file.source is None:
        return finding.violation.message
    source = file.source.frame_source(finding.cell)  # a notebook's rows are in the finding's cell
    rows = range(finding.row, min(finding.end_row, source.line_count) + 1)
    return " ".join(" ".join(source.line(row) for row in rows).split())


class Problem(NamedTuple):
    """An error or warning about the run (a file that could not be read or parsed, a config that
    does not load, a fix not written): not a finding, but it must not get lost in CI."""

    level: str  # "error" or "warning"
    message: str  # as printed on stderr after "error: " / "warning: "
    display: str | None = None  # the file it is about, when there is one
    place: PlacedWarning | None = None  # the place in it, when there is one


def problems(result: RunResult) -> list[Problem]:
    found = [Problem("error", message) for message in result.errors]
    found += [Problem("warning", message) for message in result.warnings]
    for file in result.files:
        if file.error:
            found.append(Problem("error", f"{file.display}: {file.error}", file.display))
        found += [Problem("warning", placed.message, file.display, placed) for placed in file.placed_warnings]
        found += [Problem("warning", warning, file.display) for warning in file.warnings]
    return found
