"""Checks of a fault test's history: the workers' batch logs and what the group committed.

Each worker logs every batch it hands out and every confirm (``consumer_worker.batch_events``),
and every message it delivers. From those, after a fault:

- :func:`assert_nothing_behind_the_new_owner`: a member that lost its partitions (paused, cut
  off) handed out no batch and committed no position behind where their new owner had
  committed, from the fault on;
- :func:`assert_committed_was_delivered`: every offset below the group's committed offset was
  delivered by someone, and nothing past the high watermark is committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Event = tuple[str, int, int, int]
"""``(kind, partition, position, flag)`` of ``consumer_worker.batch_events``."""


def owner_commits(events: Iterable[Event]) -> dict[int, int]:
    """The furthest position each partition was committed at by a member's confirms."""
    furthest: dict[int, int] = {}
    for kind, partition, position, at_once in events:
        if kind == "confirmed" and at_once:
            furthest[partition] = max(furthest.get(partition, 0), position)
    return furthest


def assert_nothing_behind_the_new_owner(
    owner_events: Iterable[Event], events_since_fault: Iterable[Event]
) -> None:
    """No batch out, and no commit, behind the new owner's commits on the same partition.

    After the partitions are handed back the old member starts from the new owner's committed
    positions, so its legitimate batches and commits are never behind them.
    """
    owner_at = owner_commits(owner_events)
    for kind, partition, position, at_once in events_since_fault:
        behind = position < owner_at.get(partition, 0)
        assert not (kind == "out" and behind), (
            f"a batch of partition {partition} at {position} was handed out behind its new "
            f"owner ({owner_at[partition]})"
        )
        assert not (kind == "confirmed" and at_once and behind), (
            f"partition {partition} was committed back to {position} under its new owner's "
            f"{owner_at[partition]}"
        )


def assert_committed_was_delivered(
    committed: Mapping[int, int], delivered: set[tuple[int, int]], high: Mapping[int, int]
) -> None:
    """Every offset below each committed offset was delivered; none is past the high mark."""
    for partition, end in committed.items():
        assert end <= high[partition], f"partition {partition} committed past its end: {end}"
        missing = sorted({(partition, o) for o in range(end)} - delivered)
        assert not missing, f"committed over undelivered offsets: {missing[:5]}"
