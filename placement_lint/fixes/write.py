"""Write a fixed file atomically: a temp file in the same folder, the same mode bits, then os.replace."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


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
