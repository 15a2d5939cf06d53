"""`-o/--output-file`: the report goes to a file, written whole or not at all, so a CI step that
uploads it never reads half a SARIF log."""

from __future__ import annotations

from pathlib import Path

from placement_lint.fixes.write import replace_file


def write_report(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically. The folder is created if needed, as ruff does; a
    new file gets the usual permissions, an existing one keeps its mode bits."""
    target = path.resolve() if path.is_symlink() else path  # write through a symlink, never replace the link
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    # A file name that is not UTF-8 holds surrogate escapes; written as `\udcff` the report stays
    # UTF-8, and inside a JSON string that is the escape JSON reads back as the same character.
    replace_file(target, text.encode("utf-8", errors="backslashreplace"), mode)
