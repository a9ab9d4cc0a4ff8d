"""The shelf: every held partition's buffer as one, between ``consume()`` and ``get_message``.

What one ``consume()`` returned is shared out to the partitions' buffers, and batches are
taken off round robin over the partitions that have data and no batch out. The bytes buffered
across all partitions are kept within ``max_buffered_bytes`` (:class:`ByteBudget`). Once
only partitions whose batch is out fill it, they are paused, and their buffers are dropped if
a caller's fetch brings another partition's messages (``stuck``): one slow batch never stops
the other partitions.

A caller's own fetch hands the first run it can out at once, without buffering it: with one
application thread almost every batch of 100 messages or more goes that way, and only what
stays behind is measured (counting bytes is a pass over every message, which would cost more
than the split), but for the first fetch: the byte bound needs a size before it buffers.
Smaller batches are fetched several at a time (``fetch_size``).

Pure bookkeeping, no Kafka calls: the fetcher holds its lock around every use and makes the
calls (pausing a partition) that the shelf asks for.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from client_balance.consumer._buffers import Batch, ByteBudget, HeldPartition, split_runs
from client_balance.keys import TopicPartition

__all__ = ["Shelf"]

_BUFFER_FLOOR = 50_000  # messages per partition before it is paused
_BUFFER_BATCHES = 10  # ... or this many batches, if more
_FETCH_FLOOR = 100
"""Messages one ``consume()`` asks for at least (a whole number of batches), once their size
is known. A ``consume()`` and the batch it hands out directly cost about twice what a batch
taken from the buffer costs, whatever their size: with batches of 10 messages, asking for 10
at a time left the SDK at 0.36x a raw ``consume(10)`` loop. Batches of 100 and more are asked
one at a time, as before: there a buffered batch's byte count costs as much as it saves."""


def fetch_size(batch_max: int) -> int:
    """How many messages a ``consume()`` asks for with batches of ``batch_max`` (sizes known)."""
    return batch_max * max(1, -(-_FETCH_FLOOR // batch_max))


class Shelf:
    """Buffers of the held partitions, the round robin of batches, the byte budget."""

    def __init__(
        self,
        held: dict[TopicPartition, HeldPartition],
        batch_max: int,
        max_bytes: int,
        filter_header: str,
    ) -> None:
        self._held = held
        self._batch_max = batch_max
        self._fetch_max = fetch_size(batch_max)
        # Pausing makes librdkafka drop what it prefetched for the partition and fetch it again,
        # and one fetch brings thousands of messages: pause only well above a batch.
        self.buffer_max = max(_BUFFER_BATCHES * batch_max, _BUFFER_FLOOR)
        self._filter_header = filter_header
        self.ready: deque[TopicPartition] = deque()
        """Partitions that may have a batch to hand out, in turn (stale entries are skipped)."""
        self.budget = ByteBudget(max_bytes)
        self.topics_assigned: set[str] = set()
        """Every topic ever assigned to the client; one topic allows a cheaper split."""
        self.lease_ok: Callable[[], bool] = lambda: True
        # From a random start, not 1: a context of another consumer, or of one shut down in
        # this process (a stale worker thread), must name no batch here. 52 bits stay exact
        # in a JSON number or a double, wherever an application stores its contexts.
        self._tokens = itertools.count((int.from_bytes(os.urandom(7), "big") >> 4) + 1)

    def may_fetch(self, *, for_caller: bool = False) -> bool:
        """Whether a fetch could buffer anything now; ``for_caller``: hand anything out now.

        Partitions not announced yet (fetched ahead of their claim, ``_starts``) are fetched
        only until one of them has a batch waiting, which is all the first message needs:
        the rest waits in librdkafka's queue, where it costs no Python objects and no CPU
        taken from the threads joining the group. A caller does not fetch for them at all.
        With the budget full a caller still fetches while the shelf is ``stuck``: what it
        brings then takes the place of the buffers of batches out (``share_out``).
        """
        if not self.budget.has_room():
            return for_caller and self.stuck()
        states = self._held.values()
        if any(not s.paused and s.announced for s in states):
            return True
        return not for_caller and not any(s.buffer for s in states) and bool(states)

    def fetch_count(self) -> int:
        """How many messages the next ``consume()`` may ask for.

        No more than a batch until a fetch has shown how big the messages are: the byte bound
        can only be kept for sizes it knows. Never more than fit in what the bound has left.
        """
        return self.budget.fetch_count(self._fetch_max if self.budget.typical else self._batch_max)

    def take(self) -> Batch | None:
        """The next buffered batch in turn, or None."""
        ready, held = self.ready, self._held
        while ready and self.lease_ok():
            state = held.get(ready.popleft())
            if state is not None and state.can_hand_out:
                batch, size = state.hand_out(
                    self._batch_max, next(self._tokens), self._filter_header
                )
                self.budget.used -= size
                return batch
        return None

    def settle(
        self, state: HeldPartition, consumed: bool, until: int | None
    ) -> tuple[Batch, int | None]:
        """Take back ``state``'s batch (out), confirmed (``until``: that far) or not.

        Returns the batch and where the partition must be rewound to, if anywhere.
        """
        batch, state.batch = state.batch, None
        assert batch is not None  # noqa: S101 - the fetcher checked its token
        state.updated_s = time.time()
        if consumed:
            state.confirmed = batch.end if until is None else until
        rewind_to = until if consumed else batch.start
        if state.cut_to is not None:  # the new log ends below the batch (``cut``)
            state.confirmed = min(state.confirmed, state.cut_to)
            rewind_to = None if rewind_to is None else min(rewind_to, state.cut_to)
            state.cut_to = None
        if state.evicted:  # what followed the batch was dropped: fetch it again from there
            rewind_to, state.evicted = state.confirmed, False
        if rewind_to is not None:
            self.drop(state)
            state.rewinding = True  # nothing fetched before the rewind may be buffered
        elif state.buffer and not state.releasing:
            self.ready.append(state.partition)
        return batch, rewind_to

    def drained(self, state: HeldPartition) -> bool:
        """Whether a partition paused for a full buffer may be resumed now."""
        return state.paused and not state.evicted and state.buffered < self.buffer_max // 2

    def drop(self, state: HeldPartition) -> None:
        """Forget ``state``'s buffer (a rewind or a release)."""
        self.budget.used -= state.drop_buffer()

    def cut(self, state: HeldPartition, restart: int) -> None:
        """A log truncated under ``state``: its buffer goes, and it stands at most at ``restart``.

        A batch that ends beyond it stands there once settled: its next batch starts at the new
        log's end, and a rollback of it goes back no further than there.
        """
        self.drop(state)
        state.confirmed = min(state.confirmed, restart)
        if state.batch is not None and state.batch.end > restart:
            state.cut_to = restart if state.cut_to is None else min(state.cut_to, restart)

    def share_out(self, messages: list[Any], taken: list[Batch] | None) -> list[TopicPartition]:
        """Buffer ``messages`` (errors dropped, not empty); the partitions to pause now.

        With ``taken`` (a caller's fetch, an empty list) the first run of a partition that may
        hand a batch out now goes straight into it as that batch (its first ``batch_max``
        messages, when a ``consume()`` asked for several small batches).
        """
        # A fetch past a full budget is a stuck caller's (or one made to serve a queued call):
        # batches out give their buffers up only for a partition that has nothing.
        to_pause = [] if self.budget.has_room() or not self.stuck() else self._evict()
        # The sizes seen: what is buffered (summed anyway), and, while no size is known yet,
        # a batch handed out directly too (summed only then: that pass is the cost it saves).
        measure = not self.budget.typical
        seen = seen_bytes = start = 0
        for key, length in split_runs(messages, self.topics_assigned):
            run = messages if length == len(messages) else messages[start : start + length]
            start += length
            state = self._held.get(key)  # type: ignore[call-overload]  # a plain tuple matches
            if state is None or state.releasing or state.rewinding or state.evicted:
                continue
            if taken is not None and not taken and self._takes_directly(state):
                token = next(self._tokens)
                if length <= self._batch_max:
                    taken.append(state.take_run(run, token, self._filter_header))
                    if measure:
                        seen, seen_bytes = seen + length, seen_bytes + sum(map(len, run))
                    continue
                # A consume() of several small batches: the first goes out, the rest waits.
                head, run = run[: self._batch_max], run[self._batch_max :]
                taken.append(state.take_run(head, token, self._filter_header))
                if measure:
                    seen, seen_bytes = seen + len(head), seen_bytes + sum(map(len, head))
            if not state.buffer and state.batch is None:
                self.ready.append(state.partition)
            size = sum(map(len, run))
            seen, seen_bytes = seen + len(run), seen_bytes + size
            self.budget.add(size)
            if state.add_run(run, len(run), size, self.buffer_max):
                to_pause.append(state.partition)
        if seen:
            self.budget.saw(seen, seen_bytes)
        if not self.budget.has_room() and self.stuck():
            to_pause += self._hold_back()
        return to_pause

    def stuck(self) -> bool:
        """Whether only batches out hold buffers while some partition has nothing buffered.

        With the budget full, no fetch would run until one of those batches is settled, however
        long its work takes, and the partitions with nothing buffered would get nothing.
        """
        states = self._held.values()
        return (
            not any(s.can_hand_out for s in states)
            and any(s.batch is not None and s.buffer for s in states)
            and any(map(_waiting, states))
        )

    def _hold_back(self) -> list[TopicPartition]:
        # Paused, their buffers kept: if no other partition has data, the confirm resumes them
        # (``drained``) and nothing is fetched twice.
        held = [s for s in self._held.values() if s.batch is not None and s.buffer and not s.paused]
        for state in held:
            state.paused = True
        return [state.partition for state in held]

    def _evict(self) -> list[TopicPartition]:
        # Dropped, for another partition's messages: each is fetched again from its confirmed
        # position once its batch is settled (``settle``).
        evicted = [s for s in self._held.values() if s.batch is not None and s.buffer]
        for state in evicted:
            self.drop(state)
            state.evicted = state.paused = True
        return [state.partition for state in evicted]

    def _takes_directly(self, state: HeldPartition) -> bool:
        return state.announced and state.batch is None and not state.buffer and self.lease_ok()


def _waiting(state: HeldPartition) -> bool:
    # Nothing buffered, and a fetch may bring it something (its batch may be out).
    return (
        state.announced
        and not state.buffer
        and not (state.paused or state.releasing or state.rewinding or state.evicted)
    )
