"""Where held partitions start, and fetching ahead of the claim while a node joins.

Holding a partition reads its watermarks and the group's committed offset, picks the start
(``StartChooser``), commits it where the rules say so, and assigns it to the client. Its
batches wait for ``announce``.

**Fetching ahead.** A node's share follows from the metadata alone, so while the member still
joins the status topic (round trips of tens of milliseconds) it can read where each partition
of that share starts and fetch it already. Nothing of such a partition is handed out or
committed before it is claimed and held: ``hold`` first asks the group's committed offsets
again, and keeps what was fetched only where the start it would choose now is the one it
fetched from. Any other partition fetched ahead (a claim lost, a commit made meanwhile) is
unassigned and its messages dropped, and, if it is to be held, it starts again from where it
should. Fetching ahead moves the first fetch earlier; it never changes what is delivered.

Of the share, only the partition with the most to read is assigned ahead; the others are read
ahead and assigned at the claim. A fetch brings up to ``max.partition.fetch.bytes`` (1 MiB by
default) of every partition it asks for, and librdkafka hands none of it out before the whole
answer is parsed: eight partitions with a backlog took 12 ms to the first message on an idle
machine, and 60 ms on a busy one, where one partition takes 3 ms. A share with nothing to read
is assigned whole, so that its fetch waits for the first new message.

At the claim, the rest of a share whose first partition is being fetched already is assigned
paused (``deferred``), and resumed once the first batch is out or ``DEFERRED_MAX_S`` passed: its
backlog (a megabyte a partition) would otherwise be fetched and parsed just while that batch is
handed out, on the same two cores and the same queue.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from client_balance._kafka import (
    AdminClient,
    Consumer,
    KafkaException,
    SecondReader,
    kafka_tp,
    read_committed,
    read_starts,
)
from client_balance._logging import get_logger
from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._commits import Committer
from client_balance.consumer._shelf import Shelf
from client_balance.keys import TopicPartition

__all__ = [
    "AHEAD_WAIT_S",
    "DEFERRED_MAX_S",
    "StartChooser",
    "StartCommit",
    "StartRules",
    "Starter",
]

_log = get_logger("fetch")


class StartCommit(enum.Enum):
    """Whether a start is committed when its partition is held, and whether that is waited for."""

    NONE = "none"
    """The start is the group's committed offset already."""
    WAITED = "waited"
    """Committed before the first batch goes out: a crash must not lose the start."""
    SENT = "sent"
    """Sent and not waited for: a next holder would choose the same start anyway."""


StartChooser = Callable[[TopicPartition, "int | None", int, int], tuple[int, StartCommit]]
"""(partition, committed or None, low, high) -> (start offset, how it is committed)."""
DEFERRED_MAX_S = 0.05
"""The rest of a share assigned paused at its claim waits at most this for the first batch."""
AHEAD_WAIT_S = 1.0
"""At most this for the queries of fetching ahead: on a healthy cluster they take milliseconds."""
Requests = Mapping[TopicPartition, "frozenset[str] | None"]
"""Partitions to start, each with its header filters (None: every message)."""


@dataclass(frozen=True)
class StartRules:
    """Where each partition of ``wanted`` (-> bootstrap offset) starts; a ``StartChooser``.

    A log start (``from_log_start``: its topic was created again) or a bootstrap offset
    (>= 0) wins and is committed before a batch goes out; else the group's committed offset;
    else the start position (``from_earliest``), committed at once too.
    """

    wanted: Mapping[TopicPartition, int]
    from_log_start: frozenset[TopicPartition]
    from_earliest: Callable[[TopicPartition], bool]

    def __call__(
        self, partition: TopicPartition, committed: int | None, low: int, high: int
    ) -> tuple[int, StartCommit]:
        """(start offset, how it is committed) of ``partition``, from what Kafka says."""
        offset = self.wanted[partition]
        if partition in self.from_log_start:
            return low, StartCommit.WAITED
        if offset >= 0:
            return min(max(offset, low), high), StartCommit.WAITED
        if committed is None:
            if self.from_earliest(partition):
                # A next holder would start at the log start too, so the first batch need not
                # wait for the commit: it is sent, and the interval's commit repeats it should
                # it fail (docs/consumer.md, "Offsets").
                return low, StartCommit.SENT
            # Waited for: a crash before the first confirm must not let the next holder
            # resolve "latest" again, later, and skip what arrived meanwhile.
            return high, StartCommit.WAITED
        return min(max(committed, low), high), StartCommit.NONE


class Starter:
    """Starts partitions on the fetcher's client; every method runs holding the client lock."""

    def __init__(
        self,
        consumer: Consumer,
        *,
        held: dict[TopicPartition, HeldPartition],
        lock: threading.Condition,
        shelf: Shelf,
        commits: Committer,
        timeout_s: float,
        isolation: object = None,
    ) -> None:
        self._consumer = consumer
        self._held = held
        self._lock = lock
        self._shelf = shelf
        self._commits = commits
        self._timeout_s = timeout_s
        self._read_ahead: dict[TopicPartition, HeldPartition] = {}
        """Partitions read ahead of their claim but not assigned yet (module docstring)."""
        self.admin: AdminClient | None = None
        """Asks the watermarks while the client fetches anything (``read_starts``)."""
        self.second_reader: SecondReader | None = None
        """Reads committed offsets when the client is slow to find its coordinator (``launch``)."""
        self._read_committed_only = isolation != "read_uncommitted"
        """The client's ``isolation.level``: the log's end is asked as it reads it."""
        self.deferred: list[HeldPartition] = []
        """Assigned paused at a claim until the first batch is out (module docstring)."""
        self.deferred_since_s = 0.0
        """Monotonic time of the latest deferral."""

    def ahead(self, wanted: Requests, choose_start: StartChooser) -> None:
        """Fetch ``wanted`` before it is claimed (module docstring); ``hold`` adopts it.

        Its queries wait at most ``AHEAD_WAIT_S``: it holds the client lock, which a
        ``start()`` that fails meanwhile (a group it may not read) waits for before it closes
        the client. Later, the first round asks again with the full timeout.
        """
        wait_s = min(self._timeout_s, AHEAD_WAIT_S)
        read = self._read(wanted, choose_start, wait_s, ahead=True, skip_unreadable=True)
        states = [state for state, _ in read]
        first = _first_to_fetch(states)
        chosen = {state.partition for state in first}  # a set: a share may have 100,000
        with self._lock:
            self._read_ahead.update((s.partition, s) for s in states if s.partition not in chosen)
        self._assign(first)
        _log.debug("fetching ahead of the claim", partitions=[str(s.partition) for s in first])

    def drop_read_ahead(self) -> None:
        """Forget partitions read ahead and not assigned (their claim is over, won or lost)."""
        with self._lock:
            self._read_ahead.clear()

    def hold(
        self, wanted: Requests, choose_start: StartChooser, *, skip_unreadable: bool = False
    ) -> dict[TopicPartition, int]:
        """Start ``wanted`` (adopting what was fetched ahead where it still stands); starts.

        ``skip_unreadable``: a partition whose start cannot be read now is not started (and
        not in the answer) rather than failing the others (``read_starts``).
        """
        kept, to_commit = self._adopt(wanted, choose_start)
        fresh = {tp: filters for tp, filters in wanted.items() if tp not in kept}
        with self._lock:  # those only read ahead are assigned with the fresh ones, after the commit
            states = [s for s in kept.values() if self._held.get(s.partition) is not s]
        fetching = len(states) < len(kept)  # a partition fetched ahead is assigned already
        read = self._read(
            fresh, choose_start, self._timeout_s, ahead=False, skip_unreadable=skip_unreadable
        )
        for state, how in read:
            states.append(state)
            to_commit.append((state, how))
        waited = [state for state, how in to_commit if how is StartCommit.WAITED]
        if waited:
            self._commits.commit(waited)
        with self._lock:
            for state in kept.values():
                state.fetched_ahead = None
        self._assign(states, deferred=fetching)
        self._commits.send([state for state, how in to_commit if how is StartCommit.SENT])
        return {state.partition: state.confirmed for state in [*kept.values(), *states]}

    def _read(
        self,
        wanted: Requests,
        choose_start: StartChooser,
        wait_s: float,
        *,
        ahead: bool,
        skip_unreadable: bool,
    ) -> list[tuple[HeldPartition, StartCommit]]:
        """A state for each partition of ``wanted`` where Kafka says it starts, and commit it.

        With ``skip_unreadable``, only for those whose watermarks could be read.
        """
        if not wanted:
            return []
        with self._lock:  # a fetch may be waiting at its broker: see read_starts
            through = self.admin if self._held else None
        ranges, committed = read_starts(
            self._consumer, wanted, wait_s, through=through,
            read_committed_only=self._read_committed_only, skip_unreadable=skip_unreadable,
            fallback=self.admin, second_reader=self.second_reader,
        )  # fmt: skip
        read = []
        for partition, filters in wanted.items():
            if partition not in ranges:  # unreadable now: a later round asks again
                continue
            low, high = ranges[partition]
            start, how = choose_start(partition, committed.get(partition), low, high)
            state = HeldPartition(
                partition, filters, start, committed.get(partition), high=high,
                announced=False, fetched_ahead=(low, high) if ahead else None,
            )  # fmt: skip
            read.append((state, how))
        return read

    def forget(self, states: Sequence[HeldPartition]) -> None:
        """Stop fetching partitions fetched ahead or released, dropping what was fetched of them.

        A state no longer held was forgotten already, or its partition is held anew: the
        client is left alone for it.
        """
        self.unassign(self.drop(states))

    def drop(self, states: Sequence[HeldPartition]) -> list[HeldPartition]:
        """Drop those of ``states`` still held, and what was fetched of them: the ones dropped."""
        with self._lock:
            gone = [state for state in states if self._held.get(state.partition) is state]
            for state in gone:
                del self._held[state.partition]
                self._shelf.drop(state)
        return gone

    def unassign(self, gone: Sequence[HeldPartition]) -> None:
        """Have the client stop fetching the partitions of ``gone`` (states :meth:`drop` took)."""
        if gone:
            with contextlib.suppress(KafkaException):  # never assigned, or already gone
                self._consumer.incremental_unassign([kafka_tp(state.partition) for state in gone])

    def _adopt(
        self, wanted: Requests, choose_start: StartChooser
    ) -> tuple[dict[TopicPartition, HeldPartition], list[tuple[HeldPartition, StartCommit]]]:
        """Of ``wanted``'s partitions fetched ahead: those kept, and those of them to commit."""
        with self._lock:
            ahead = [
                state
                for tp in wanted
                if (state := self._held.get(tp) or self._read_ahead.pop(tp, None)) is not None
                and state.fetched_ahead is not None
            ]
        if not ahead:
            return {}, []
        committed = read_committed(
            self._consumer, [s.partition for s in ahead], self._timeout_s,
            second_reader=self.second_reader,
        )  # fmt: skip
        kept, to_commit, wrong = {}, [], []
        for state in ahead:
            low, high = state.fetched_ahead or (0, 0)
            now = committed.get(state.partition)
            start, how = choose_start(state.partition, now, low, high)
            if now != state.committed or start != state.confirmed:
                wrong.append(state)  # the group moved meanwhile: start again, from the right place
                continue
            kept[state.partition] = state
            to_commit.append((state, how))
        if wrong:
            with self._lock:
                assigned = [s for s in wrong if self._held.get(s.partition) is s]
            self.forget(assigned)
        return kept, to_commit

    def _assign(self, states: Sequence[HeldPartition], *, deferred: bool = False) -> None:
        if not states:
            return
        with self._lock:
            for state in states:
                self._held[state.partition] = state
                state.paused = deferred
            if deferred:
                self.deferred.extend(states)
                self.deferred_since_s = time.monotonic()
        assigned = [kafka_tp(s.partition, s.confirmed) for s in states]
        self._shelf.topics_assigned.update(s.partition.topic for s in states)
        if deferred:
            # Paused before the assign, which keeps the pause: no fetch of them starts until
            # ``resume_deferred``.
            self._consumer.pause(assigned)
            self._consumer.incremental_assign(assigned)
            shown = [str(state.partition) for state in states]
            _log.debug("held paused until the first batch", partitions=shown)
            return
        self._consumer.incremental_assign(assigned)
        # librdkafka keeps a partition's pause across unassign and assign: one paused (full
        # buffer) when it was last released would never be fetched again.
        self._consumer.resume(assigned)

    def resume_deferred(self) -> None:
        """Let the partitions assigned paused at a claim be fetched (under the client lock)."""
        with self._lock:
            states, self.deferred = self.deferred, []
            states = [s for s in states if s.paused and self._held.get(s.partition) is s]
            for state in states:
                state.paused = False
        if states:
            self._consumer.resume([kafka_tp(state.partition) for state in states])

    def deferred_wait_s(self, call: Callable[[Callable[[], None]], None]) -> float:
        """Seconds until the deferred partitions are resumed anyway (inf: none are deferred).

        Once that time has come, they are resumed now, through ``call`` (the client lock).
        """
        if not self.deferred:
            return float("inf")
        left_s = self.deferred_since_s + DEFERRED_MAX_S - time.monotonic()
        if left_s <= 0:  # no batch went out meanwhile
            call(self.resume_deferred)
            return float("inf")
        return left_s


def _first_to_fetch(states: Sequence[HeldPartition]) -> list[HeldPartition]:
    """The partition with the most to read (the first of equals), or all if none has any."""
    backlogs = [(state.fetched_ahead or (0, 0))[1] - state.confirmed for state in states]
    most = max(backlogs, default=0)
    return [states[backlogs.index(most)]] if most > 0 else list(states)
