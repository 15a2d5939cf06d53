"""Write a fixed file atomically: a temp file in the same folder, the same mode bits, then os.replace."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


class NotLossless(Exception):
    """LibCST cannot parse the fixed bytes back to exactly themselves."""


def verify_lossless(original: bytes, data: bytes) -> None:
    """The last gate before a fix is written: LibCST's lossless tree must reproduce every byte.

    Detection runs on `ast`, which forgets formatting; LibCST keeps all of it (comments, BOM,
    CRLF, tabs, the encoding cookie), so a round trip through it proves the fixed file is valid
    Python whose bytes are exactly what we computed. Imported here only, so lint-only runs never
    pay for it.
    """
    import libcst

    try:
        if libcst.parse_module(original).bytes != original:
            return  # LibCST cannot represent this file (lone CR line endings): ast's check must do
    except Exception:
        return
    try:
        module = libcst.parse_module(data)
    except Exception as exc:  # libcst.ParserSyntaxError and encoding errors
        raise NotLossless(str(exc).splitlines()[0]) from exc
    if module.bytes != data:
        raise NotLossless("the fixed file does not round-trip byte for byte")


class ChangedOnDisk(Exception):
    """The file changed between reading and writing: we do not overwrite someone else's edit."""


def write_atomically(path: Path, data: bytes, expected: bytes) -> None:
    target = path.resolve()  # write through a symlink, never replace the link itself
    if target.read_bytes() != expected:
        raise ChangedOnDisk(str(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".placement-lint")
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
