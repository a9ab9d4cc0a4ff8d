"""How the bench scripts time a side: fresh inputs per call, and a peer's runs kept apart.

``timed`` frees the previous call's result before the clock starts. ``PeerProcess`` runs a
peer that lives in Python (kafka-python's assignors) in a process of its own, as the Java peer
runs in its own JVM. Timed in the bench's process, that peer's allocations (its sticky assignor
builds for some 15 s a case) left the heap our assignors were timed in afterwards 20-40%
slower on some lines (docs/benchmarks.md, "kafka-python in a process of its own").
"""

from __future__ import annotations

import gc
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")


def timed(
    prepare: Callable[[], Callable[[], T]], runs: int, budget_s: float
) -> tuple[list[float], T]:
    """Wall times of ``runs`` calls (fewer once ``budget_s`` is spent) and the last result.

    ``prepare`` builds whatever a call must not share with the previous one, untimed.
    """
    times: list[float] = []
    result: T | None = None
    while True:
        call = prepare()
        # Free the previous result before the clock starts: otherwise freeing a million
        # tuples lands inside the next timed call, which a JVM's young collection never pays.
        result = None
        gc.collect()
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
        if len(times) >= runs or sum(times) >= budget_s:
            return times, result


class PeerProcess:
    """One process of its own for a peer's calls: started on first use, kept for the run.

    Started with ``spawn``, so it shares nothing of the bench's heap; a call's function and
    arguments travel pickled, and so does its answer. A process that died is replaced at the
    next call (the call that found it dead raises).
    """

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the peer's process; its answer, or what it raised."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        try:
            return self._pool.submit(function, *args).result()
        except BrokenProcessPool:
            self.close()
            raise

    def close(self) -> None:
        """Stop the process (a later call starts another)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
