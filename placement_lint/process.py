"""Settings of the Python process that runs the checks (the CLI's, or a pool worker)."""

from __future__ import annotations

import gc


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


def thaw() -> None:
    """Undo leave_alone_what_lives once this process's share is checked: a process that goes on
    (a program calling the API) gets its objects collected as before."""
    gc.unfreeze()
