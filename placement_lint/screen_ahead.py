"""Pre-checking files on the spare core while the launch context is built.

Building a repository's launch context runs in one process (reading its docs, scripts and module
graph: 0.7 s of the 10,000-file docs monorepo's cold run), and the text pre-check of its files
waited for it, though it needs the context only to choose between two answers: whether a rule could
fire in the file if no launch reaches it, and whether one could if a launch does. A forked child
works out both for as many files as it can meanwhile; when the context is built the run stops it
and takes what it wrote. A file it did not reach, or one worth parsing under its launches, is
pre-checked and checked as before, so the findings are the same whether the child got far or not.
"""

from __future__ import annotations

import mmap
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from placement_lint.process import leave_alone_what_lives, thaw
from placement_lint.source import DIGEST_BYTES, content_digest, read_bytes

if TYPE_CHECKING:
    from placement_lint.precheck import PreCheck

# One slot a file: a byte that says it is done and what the pre-check answered, then its digest.
_DONE = 0x80
_SLOT = 1 + DIGEST_BYTES


class ScreeningAhead:
    """A child pre-checking `names` (in order) into memory it shares with this process."""

    def __init__(self, names: list[str], make_precheck: Callable[[], PreCheck], hashing: bool) -> None:
        self.names = names
        self.hashing = hashing
        self._memory = mmap.mmap(-1, max(1, len(names)) * _SLOT)  # anonymous and shared: a forked child writes, we read
        # Else this process's collections, walking what it had before the fork, copy those pages from
        # the child's: 0.06 s more to build the docs monorepo's context.
        leave_alone_what_lives()
        try:
            self._pid = os.fork()
        except OSError:  # no process to spare (a process limit): the caller goes on without one
            thaw()
            raise
        if self._pid == 0:
            status = 1
            try:
                _screen(names, make_precheck(), hashing, self._memory)
                status = 0
            finally:
                os._exit(status)

    def stop(self, wait: bool = False) -> dict[str, tuple[int, str | None]]:
        """Stop the child (wherever it is; with `wait`, once it has gone through every file) and give
        what it worked out: for each file it finished, its WORTH_* bits and, if asked for, its digest."""
        if not wait:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except OSError:
                pass  # it had finished
        os.waitpid(self._pid, 0)
        thaw()
        memory = self._memory
        answers: dict[str, tuple[int, str | None]] = {}
        for index, name in enumerate(self.names):
            start = index * _SLOT
            state = memory[start]
            if not state & _DONE:
                continue
            answers[name] = (state & ~_DONE, memory[start + 1 : start + _SLOT].hex() if self.hashing else None)
        memory.close()
        return answers


def _screen(names: list[str], precheck: PreCheck, hashing: bool, memory: mmap.mmap) -> None:
    for index, name in enumerate(names):
        try:
            raw = read_bytes(name)
        except OSError:
            continue  # the run reports it
        verdict = precheck.worth_parsing_when(raw, name)
        start = index * _SLOT
        if hashing:
            memory[start + 1 : start + _SLOT] = content_digest(raw)
        memory[start] = _DONE | verdict  # last: a slot marked done is whole
