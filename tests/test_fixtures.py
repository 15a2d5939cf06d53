"""Golden fixtures, one folder per rule (TorchFix style).

For every `tests/fixtures/DPLnnn/<case>.py`:
- `<case>.expected` holds the findings (`row:col CODE headline`, then its notes indented), empty or
  absent for a clean file;
- `<case>.fixed.py` holds the file after `--fix --unsafe-fixes`; absent when nothing is fixed.
Cases named `bad_*` must produce their folder's rule; cases named `good_*` must produce nothing.
Each folder's rule is enabled on top of the default set, so opt-in rules (DPL100) are checked too.
Regenerate with `PLACEMENT_LINT_UPDATE_GOLDENS=1 pytest tests/test_fixtures.py`, then read the diff.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers import CODES, lint_file, notes_of

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("DPL*/*.py") if not p.name.endswith(".fixed.py"))
UPDATE = os.environ.get("PLACEMENT_LINT_UPDATE_GOLDENS") == "1"


def _ids(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _render(result) -> str:  # type: ignore[no-untyped-def]
    return "".join(f"{f.row}:{f.column} {f.code} {f.violation.message}\n{notes_of(f)}" for f in result.findings)


def _golden(path: Path, actual: str | None) -> None:
    if UPDATE:
        if actual:
            path.write_text(actual, encoding="utf-8", newline="")
        elif path.exists():
            path.unlink()
        return
    expected = path.read_text(encoding="utf-8") if path.exists() else None
    assert (actual or None) == expected, f"{path.name} differs from the run"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_findings_match_golden(case: Path) -> None:
    result = lint_file(case, (case.parent.name,))
    assert result.error is None
    _golden(case.with_suffix(".expected"), _render(result))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_fix_matches_golden_and_is_idempotent(case: Path, tmp_path: Path) -> None:
    work = tmp_path / case.parent.name
    shutil.copytree(case.parent, work)
    target = work / case.name
    first = lint_file(target, (case.parent.name,), fix=True, unsafe_fixes=True)
    assert first.error is None and not first.warnings
    fixed = target.read_bytes()
    golden = case.with_name(case.stem + ".fixed.py")
    _golden(golden, fixed.decode("utf-8") if fixed != case.read_bytes() else None)
    second = lint_file(target, (case.parent.name,), fix=True, unsafe_fixes=True)
    assert not second.fixed and target.read_bytes() == fixed, "a second --fix changed the file"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_case_name_says_what_it_shows(case: Path) -> None:
    found = [finding.code for finding in lint_file(case, (case.parent.name,)).findings]
    if case.name.startswith("good_"):
        assert found == [], f"a correct look-alike was flagged: {found}"
    else:
        assert case.name.startswith("bad_"), "fixture names start with bad_ or good_"
        assert case.parent.name in found


@pytest.mark.parametrize("code", CODES)
def test_every_rule_has_bad_and_good_fixtures(code: str) -> None:
    folder = FIXTURES / code
    assert list(folder.glob("bad_*.py")) and list(folder.glob("good_*.py"))
