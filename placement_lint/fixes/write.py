"""Write a fixed file atomically: a temp file in the same folder, the same mode bits, then os.replace."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
        if libcst.parse_module(data).bytes == data:
            return
        problem = "the fixed file does not round-trip byte for byte"
    except Exception as exc:  # libcst.ParserSyntaxError and encoding errors
        problem = str(exc).splitlines()[0]
    # Asked only when the fixed bytes fail: parsing every original too cost a third of a migration.
    try:
        if libcst.parse_module(original).bytes != original:
            return  # LibCST cannot represent this file (lone CR line endings): ast's check must do
    except Exception:
        return
    raise NotLossless(problem)


class ChangedOnDisk(Exception):
    """The file changed between reading and writing: we do not overwrite someone else's edit."""


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while one file is written, then deliver them.

    A KeyboardInterrupt can land on any bytecode, including between `mkstemp` returning and the
    `try` that would remove its file; holding the signals makes "untouched or fixed, no temp file
    left" true for every file rather than almost every one.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {number: signal.signal(number, lambda number, _frame: arrived.append(number)) for number in _STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        for number in arrived[:1]:
            signal.raise_signal(number)


def write_atomically(path: Path, data: bytes, expected: bytes) -> None:
    with _stop_signals_held():
        _write(path, data, expected)


def _write(path: Path, data: bytes, expected: bytes) -> None:
    target = path.resolve()  # write through a symlink, never replace the link itself
    if target.read_bytes() != expected:
        raise ChangedOnDisk(str(path))
    replace_file(target, data, stat.S_IMODE(target.stat().st_mode))


def replace_file(target: Path, data: bytes, mode: int | None, durable: bool = True) -> None:
    """Put `data` at `target` whole or not at all: a temp file in the same folder, fsync, `os.replace`.

    `mode`: the permission bits to keep; None for a new file (0666 less the umask, as `open` gives).
    `durable=False` skips the fsync, for files that can be rebuilt (the cache).
    """
    handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".placement-lint")
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
            if durable:
                temp.flush()
                os.fsync(temp.fileno())
        os.chmod(temp_name, mode if mode is not None else 0o666 & ~_umask())
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
