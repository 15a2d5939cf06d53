"""Settings of the Python process that runs the checks (the CLI's, or a pool worker)."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator


def collect_garbage_rarely() -> None:
    """A check allocates hundreds of thousands of short-lived AST nodes and few reference cycles;
    CPython's default (a collection every 700 allocations) spent a quarter of the checking time on
    trl's trainers scanning them. Every 300,000: against 100,000, 3% fewer instructions on trl
    and 10% less time on the monorepo's cold run, for 96 MiB of peak memory there instead of 77
    (every 1,000,000: 190 MiB). Called only by processes the tool owns: the API leaves its caller's
    collector alone."""
    gc.set_threshold(300_000, 50, 100)


def collect_after_check() -> None:
    """A checked file's tree is held in reference cycles by the analyses over it (an index kept on
    the tree, flows and resolvers that hold each other), so it goes only when the collector runs.
    With the rare collections above, a tree still alive at one was promoted, then waited for a
    collection of the older generation: a worker over 5,000 monorepo scripts grew by 55 MiB. Once a
    file is done its objects are garbage, so a young collection then frees them for one scan each."""
    gc.collect(1)


def leave_alone_what_lives() -> None:
    """Before a worker (or this process, for its share) starts checking: what is alive then (the
    launch contexts, the rules, a forked worker's copy of its parent) lives for the run, so the
    collections after each file (collect_after_check) need not scan it. Without this, each forked
    worker's first collection walked everything it inherited: 0.1-0.2 s of a cold run over the
    docs monorepo."""
    gc.freeze()


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """No collection while a launch context is built: it keeps every module tree it parses until it is
    done (diffusers' 400 modules), so each collection walked millions of live nodes to free almost
    nothing (7 collections, 0.5 s of a 4.3 s build). What it leaves is frozen before the checks
    (leave_alone_what_lives) or collected as before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def thaw() -> None:
    """Undo leave_alone_what_lives once this process's share is checked: a process that goes on
    (a program calling the API, the editor server, the test suite) gets its objects collected as
    before, and the run's garbage collected now. What was frozen comes back as long-lived, and
    CPython collects its oldest generation only once a quarter of that is new: each run's garbage
    raised the bar for the next (7 GB over the test suite's 300 pooled runs)."""
    gc.unfreeze()
    if not _ENDS_AFTER_THE_RUN:
        gc.collect()


_ENDS_AFTER_THE_RUN = False  # see ends_after_the_run


def ends_after_the_run() -> None:
    """This process leaves once its one run is reported (the command line's `check`): its garbage
    goes with it, uncollected."""
    global _ENDS_AFTER_THE_RUN
    _ENDS_AFTER_THE_RUN = True


class Aside:
    """`work()` run in a forked child while this process goes on with something else; `result()`
    gives what it returned (pickled back through a pipe), or None when there was no child or it did
    not finish (then the caller does the work itself). Only where the platform forks safely (not
    macOS, not Windows): the child inherits what this process built, its parsed trees too."""

    def __init__(self, work: Callable[[], object]) -> None:
        self._pid = 0
        self._reader = -1
        if not CAN_FORK:
            return
        reader, writer = os.pipe()
        leave_alone_what_lives()  # the child's collections walk nothing it inherited (no pages copied for them)
        try:
            pid = os.fork()
        except OSError:  # no process to spare: the caller does the work
            thaw()
            os.close(reader)
            os.close(writer)
            return
        if pid == 0:
            status = 1
            try:
                os.close(reader)
                import pickle

                with os.fdopen(writer, "wb") as out:
                    pickle.dump(work(), out, protocol=pickle.HIGHEST_PROTOCOL)
                status = 0
            finally:
                os._exit(status)
        thaw()
        os.close(writer)
        self._pid, self._reader = pid, reader

    def done(self) -> bool:
        """Has the child finished, or begun to send what it found? Never waits (True: no child)."""
        if not self._pid:
            return True
        import select

        readable, _, _ = select.select([self._reader], [], [], 0)
        return bool(readable)

    def result(self) -> object | None:
        if not self._pid:
            return None
        import pickle

        try:
            with os.fdopen(self._reader, "rb") as incoming:
                data = incoming.read()
            _, status = os.waitpid(self._pid, 0)
            return pickle.loads(data) if os.waitstatus_to_exitcode(status) == 0 else None
        except Exception:  # a truncated stream (the child was killed mid-write), or it is gone already
            return None
        finally:
            self._pid = 0

    def cancel(self) -> None:
        """Stop the child (Ctrl-C, or the work it does was not needed after all)."""
        if self._pid:
            try:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            except OSError:
                pass
            finally:
                try:
                    os.close(self._reader)  # whether or not the child was still there to be stopped
                except OSError:
                    pass
            self._pid = 0


# Forking is cheap where the platform forks safely; macOS forks unsafely (system libraries) and Windows not at all.
CAN_FORK = hasattr(os, "fork") and sys.platform != "darwin"
