"""`-o/--output-file`: the report goes to a file, written whole or not at all, so a CI step that
uploads it never reads half a SARIF log."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_report(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through a temporary file in the same folder and `os.replace`.

    The folder is created if needed, as ruff does. A new file gets the usual permissions (0666 less
    the umask, which `os.open` applies); an existing one keeps its mode bits.
    """
    target = path.resolve() if path.is_symlink() else path  # write through a symlink, never replace the link
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    temp = target.parent / f".{target.name}.{secrets.token_hex(4)}.placement-lint"
    handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        # A file name that is not UTF-8 holds surrogate escapes; written as `\udcff` the report stays
        # UTF-8, and inside a JSON string that is the escape JSON reads back as the same character.
        with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace", newline="") as stream:
            stream.write(text)
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
