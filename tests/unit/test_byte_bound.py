"""``max_buffered_bytes`` in steady state: the size estimate behind the byte bound (no broker)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from confluent_kafka import Message

from client_balance.consumer._buffers import ByteBudget, HeldPartition
from client_balance.consumer._shelf import Shelf
from client_balance.keys import TopicPartition

KIB = 1024
LIMIT = 64 * KIB
T0 = TopicPartition("t", 0)


def _shelf(batch_max: int) -> tuple[Shelf, HeldPartition]:
    state = HeldPartition(T0, None, 0, None)
    shelf = Shelf({T0: state}, batch_max, LIMIT, "type")
    shelf.topics_assigned.add("t")
    return shelf, state


def _message(offset: int, value: bytes | None) -> Any:
    return Message(topic="t", partition=0, offset=offset, value=value)


def _fill_cycles(
    shelf: Shelf, state: HeldPartition, fetch: Callable[[int], list[Any]], cycles: int
) -> list[int]:
    """Bytes buffered after each fetch, through ``cycles`` rounds of filling and draining.

    A caller's fetch first (handed out directly, confirmed); then the fetch thread's fetches
    while the shelf allows them, and batches taken and confirmed until it allows one again.
    """
    taken: list[Any] = []
    shelf.share_out(fetch(shelf.fetch_count()), taken)
    shelf.settle(state, True, None)
    after = []
    for _ in range(cycles):
        while shelf.may_fetch():
            shelf.share_out(fetch(shelf.fetch_count()), None)
            after.append(shelf.budget.used)
        while not shelf.may_fetch():
            assert shelf.take() is not None
            shelf.settle(state, True, None)
    return after


def test_tombstones_at_the_ends_of_each_fetch_keep_the_buffers_within_the_bound() -> None:
    """Deletes (no value, 0 bytes) first and last in every consume() no longer lift the bound."""
    shelf, state = _shelf(batch_max=10)
    fetched = 0

    def fetch(count: int) -> list[Any]:
        # A compacted topic's deletes at both ends of every list, 10 KiB values between.
        nonlocal fetched
        ends = {0, count - 1} if count > 2 else set()
        values = [None if i in ends else b"v" * (10 * KIB) for i in range(count)]
        out = [_message(fetched + i, value) for i, value in enumerate(values)]
        fetched += count
        return out

    after = _fill_cycles(shelf, state, fetch, cycles=5)
    assert max(after) <= LIMIT, [used // KIB for used in after]
    assert shelf.budget.peak <= LIMIT


def test_sizes_varied_from_one_distribution_pass_the_bound_seldom_and_by_little() -> None:
    """Values of 1 to 12 KiB at random: the estimate follows the mean, not the fetch's ends."""
    shelf, state = _shelf(batch_max=100)
    sizes = random.Random(7)
    fetched = 0

    def fetch(count: int) -> list[Any]:
        nonlocal fetched
        out = [_message(fetched + i, b"v" * sizes.randint(KIB, 12 * KIB)) for i in range(count)]
        fetched += count
        return out

    after = _fill_cycles(shelf, state, fetch, cycles=200)
    over = [used for used in after if used > LIMIT]
    # Measured ends let it pass the bound in half the cycles, by up to 3.2 times.
    assert len(over) <= len(after) // 20
    assert shelf.budget.peak <= LIMIT * 11 // 10


def test_a_fetch_of_tombstones_only_leaves_a_size_of_one_byte_not_none() -> None:
    """A known estimate never falls to 0 bytes: fetches stay bounded by what is left."""
    shelf, _ = _shelf(batch_max=10)
    shelf.share_out([_message(o, None) for o in range(10)], None)
    assert shelf.budget.typical == 1
    budget = ByteBudget(100)
    budget.add(96)  # sizes not known yet, and something buffered all the same
    assert budget.fetch_count(batch_max=50) == 4


def test_the_estimate_is_the_mean_of_what_was_buffered_not_the_ends() -> None:
    """Small messages first and last, big ones between: the next fetch asks for what fits."""
    shelf, _ = _shelf(batch_max=10)
    values = [b"s"] + [b"b" * (4 * KIB)] * 8 + [b"s"]
    shelf.share_out([_message(o, value) for o, value in enumerate(values)], None)
    mean = shelf.budget.used // len(values)
    assert shelf.budget.typical >= mean
    assert shelf.fetch_count() <= (LIMIT - shelf.budget.used) // mean
