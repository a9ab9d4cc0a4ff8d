"""Pausing the cyclic collector while a large, acyclic structure is built (strategies, metadata).

Below ``PAUSE_FROM`` partitions too little is allocated for the collector to matter. Above it,
it does: at 10k partitions the young collections (one per 700 allocations) and the full one
they trigger now and then cost a fifth of a sticky or range assignment, and a metadata answer
of 15,000 partitions, promoted while it was built, brought on a full collection of the whole
process every few reconcile rounds (a round of 35 ms took 150).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["PAUSE_FROM", "paused_gc"]

PAUSE_FROM = 1_000
"""Partitions from which :func:`paused_gc` pauses the collector."""


@contextlib.contextmanager
def paused_gc(partition_count: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a structure of ``partition_count`` is built.

    An assignment of a million partitions allocates a million small tuples, and the collector,
    triggered every few hundred allocations, keeps rescanning them: pausing it makes building
    such an assignment about three times faster. What is built here has no reference cycles
    (an assignment, a metadata answer read and dropped), so nothing is left for it; it is
    resumed on the way out, and only if it was running. The pause lasts one call: a metadata
    query may wait for a slow broker meanwhile, so callers pause around one request, no more.

    Resuming alone is not enough: every tuple allocated meanwhile still counts towards the
    youngest generation, so the first allocation after ``gc.enable()`` would scan all of them
    at once (0.2 s for a million, in the order they sit in the answer's lists, which is not
    the order they sit in memory). Freezing and unfreezing instead moves every tracked object
    into the oldest generation in constant time and resets that count: the answer is scanned
    with the rest of the old objects, at the next full collection, like any long-lived data.
    This is skipped when the process has frozen objects of its own (``gc.freeze()`` before a
    fork): unfreezing would hand those back to the collector.
    """
    if partition_count < PAUSE_FROM or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()
