"""Fetching ahead of the claim: what was fetched is kept only where its start still stands."""

from __future__ import annotations

import concurrent.futures
import threading
from types import SimpleNamespace
from typing import Any

from confluent_kafka import Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._commits import Committer
from client_balance.consumer._shelf import Shelf
from client_balance.consumer._starts import Starter, StartRules
from client_balance.keys import RESUME_OFFSET, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
LOW, HIGH = 0, 100
NO_OFFSET = -1001


class _Client:
    """A Consumer whose log spans 0..100 and whose group commits are set by the test."""

    def __init__(self) -> None:
        self.committed_offsets: dict[int, int] = {}
        self.assigned: list[tuple[int, int]] = []
        self.unassigned: list[int] = []
        self.commits: list[tuple[int, int]] = []
        self.unwaited: list[tuple[int, int]] = []
        """Of ``commits``, those sent asynchronously."""
        self.watermark_queries = 0
        self.highs: dict[int, int] = {}
        """Log ends other than HIGH, by partition."""

    def offsets_for_times(self, partitions: list[Any], timeout: float) -> list[Any]:
        """The log start for OFFSET_BEGINNING (-2), the end for OFFSET_END (-1)."""
        self.watermark_queries += 1
        return [
            KafkaTopicPartition(
                tp.topic,
                tp.partition,
                LOW if tp.offset == -2 else self.highs.get(tp.partition, HIGH),
            )
            for tp in partitions
        ]

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        """What the test says the group committed."""
        return [
            KafkaTopicPartition(
                tp.topic, tp.partition, self.committed_offsets.get(tp.partition, NO_OFFSET)
            )
            for tp in partitions
        ]

    def incremental_assign(self, partitions: list[Any]) -> None:
        """Noted."""
        self.assigned += [(tp.partition, tp.offset) for tp in partitions]

    def incremental_unassign(self, partitions: list[Any]) -> None:
        """Noted."""
        self.unassigned += [tp.partition for tp in partitions]

    def resume(self, partitions: list[Any]) -> None:
        """Nothing to do."""

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        """Noted, and taken as the group's committed offsets."""
        for tp in offsets:
            self.commits.append((tp.partition, tp.offset))
            if asynchronous:
                self.unwaited.append((tp.partition, tp.offset))
            self.committed_offsets[tp.partition] = tp.offset
        return []


def _starter() -> tuple[Starter, _Client, dict[TopicPartition, HeldPartition]]:
    client = _Client()
    held: dict[TopicPartition, HeldPartition] = {}
    lock = threading.Condition()
    shelf = Shelf(held, 10, 1 << 20, "type")
    commits = Committer(client, "g", 5.0, lock)  # type: ignore[arg-type]  # a fake client
    starter = Starter(
        client, held=held, lock=lock, shelf=shelf, commits=commits, timeout_s=1.0,  # type: ignore[arg-type]
    )  # fmt: skip
    return starter, client, held


def _rules(*partitions: TopicPartition, earliest: bool = True) -> StartRules:
    return StartRules(dict.fromkeys(partitions, RESUME_OFFSET), frozenset(), lambda tp: earliest)


def _run(partition: int, offsets: range) -> list[Any]:
    return [Message(topic="t", partition=partition, offset=o, value=b"v") for o in offsets]


def test_a_partition_fetched_ahead_is_adopted_with_what_it_fetched() -> None:
    """Committed offset unchanged at the claim: no second start, and the buffer stays."""
    starter, client, held = _starter()
    client.committed_offsets[0] = 30
    starter.ahead({T0: None}, _rules(T0))
    assert held[T0].fetched_ahead == (LOW, HIGH)
    assert not held[T0].announced
    held[T0].add_run(_run(0, range(30, 40)), 10, 10, 1000)
    starts = starter.hold({T0: None}, _rules(T0))
    assert starts == {T0: 30}
    assert held[T0].fetched_ahead is None
    assert held[T0].buffered == 10
    assert client.assigned == [(0, 30)]
    assert client.watermark_queries == 2  # the ahead start's two ListOffsets, no more
    assert client.unassigned == []
    assert client.commits == []  # resumed from the group's offset: nothing to commit


def test_a_start_committed_at_the_claim_is_committed_then_not_before() -> None:
    """With nothing committed, the start is committed by hold, never while fetched ahead."""
    starter, client, held = _starter()
    starter.ahead({T0: None}, _rules(T0, earliest=False))
    assert client.commits == []
    starter.hold({T0: None}, _rules(T0, earliest=False))
    assert client.commits == [(0, HIGH)]
    assert client.unwaited == []  # "latest": the first batch waits for it
    assert held[T0].committed == HIGH


def test_an_earliest_start_is_committed_without_waiting() -> None:
    """Nothing committed, start_position "earliest": the commit is sent, not waited for.

    Any next holder would start at the log start too, so the first batch need not wait; the
    state stays uncommitted, so the interval's commit makes sure of it.
    """
    starter, client, held = _starter()
    starter.ahead({T0: None}, _rules(T0))
    starter.hold({T0: None}, _rules(T0))
    assert client.unwaited == [(0, LOW)]
    assert held[T0].committed is None


def test_a_commit_made_while_fetching_ahead_restarts_the_partition_there() -> None:
    """Another member committed 40 meanwhile: the fetched messages go, and it starts at 40."""
    starter, client, held = _starter()
    client.committed_offsets[0] = 30
    starter.ahead({T0: None}, _rules(T0))
    ahead = held[T0]
    ahead.add_run(_run(0, range(30, 40)), 10, 10, 1000)
    client.committed_offsets[0] = 40
    starts = starter.hold({T0: None}, _rules(T0))
    assert starts == {T0: 40}
    assert client.unassigned == [0]
    assert client.assigned == [(0, 30), (0, 40)]
    assert held[T0] is not ahead
    assert held[T0].buffered == 0
    assert held[T0].fetched_ahead is None


def test_a_partition_fetched_ahead_but_not_held_is_forgotten() -> None:
    """Only the claimed partition is held; the other is unassigned and its buffer dropped."""
    starter, client, held = _starter()
    client.highs[0] = 50  # T1 has more to read: it is the one assigned ahead
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    assert client.assigned == [(1, LOW)]
    held[T1].add_run(_run(1, range(5)), 5, 5, 1000)
    starter.hold({T0: None}, _rules(T0, T1))
    leftover = [state for state in held.values() if state.fetched_ahead is not None]
    assert [state.partition for state in leftover] == [T1]
    starter.forget(leftover)
    assert list(held) == [T0]
    assert client.unassigned == [1]


def test_only_the_partition_with_most_to_read_is_assigned_ahead() -> None:
    """The rest of the share is read ahead and assigned at the claim, without reading again."""
    starter, client, held = _starter()
    client.highs[1] = 60
    client.committed_offsets[1] = 20
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    assert client.assigned == [(0, LOW)]
    assert list(held) == [T0]
    starts = starter.hold({T0: None, T1: None}, _rules(T0, T1))
    assert starts == {T0: LOW, T1: 20}
    assert client.assigned == [(0, LOW), (1, 20)]
    assert client.watermark_queries == 2  # read once, ahead
    assert client.commits == [(0, LOW)]  # T0 had nothing committed; T1 resumes at 20
    assert all(state.fetched_ahead is None for state in held.values())


def test_a_partition_read_ahead_whose_commit_moved_starts_where_it_now_should() -> None:
    """Another member committed meanwhile: the start read ahead is not used, nor unassigned."""
    starter, client, _held = _starter()
    client.highs[1] = 60
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    client.committed_offsets[1] = 45
    starts = starter.hold({T0: None, T1: None}, _rules(T0, T1))
    assert starts == {T0: LOW, T1: 45}
    assert client.assigned == [(0, LOW), (1, 45)]
    assert client.unassigned == []


def test_a_share_with_nothing_to_read_is_assigned_whole_ahead() -> None:
    """No backlog anywhere: every partition's fetch waits for its first new message."""
    starter, client, _held = _starter()
    client.committed_offsets.update({0: HIGH, 1: HIGH})
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    assert sorted(client.assigned) == [(0, HIGH), (1, HIGH)]


def test_partitions_read_ahead_are_forgotten_when_their_claim_is_over() -> None:
    """Read ahead, then not claimed: a later hold reads them afresh."""
    starter, client, _held = _starter()
    client.highs[1] = 60
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    starter.drop_read_ahead()
    client.committed_offsets[1] = 10
    starts = starter.hold({T1: None}, _rules(T0, T1))
    assert starts == {T1: 10}
    assert client.watermark_queries == 4  # read again


def test_only_the_fetch_thread_fetches_ahead_and_only_until_a_batch_waits() -> None:
    """A caller never fetches for unannounced partitions; the fetch thread stops at one run."""
    held = {
        tp: HeldPartition(tp, None, 0, None, announced=False, fetched_ahead=(0, 9))
        for tp in (T0, T1)
    }
    shelf = Shelf(held, 10, 1 << 20, "type")
    assert shelf.may_fetch()
    assert not shelf.may_fetch(for_caller=True)
    held[T1].add_run(_run(1, range(5)), 5, 5, 1000)
    assert not shelf.may_fetch()
    held[T0].announced = True
    assert shelf.may_fetch(for_caller=True)


class _Admin:
    """An AdminClient whose ListOffsets answers the same log as ``_Client``."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def list_offsets(self, specs: dict[Any, Any], **options: Any) -> dict[Any, Any]:
        """Each partition's log start or end, as a future already answered."""
        self.asked.append(sorted(tp.partition for tp in specs))
        answers = {}
        for tp, spec in specs.items():
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.set_result(
                SimpleNamespace(offset=LOW if "Earliest" in type(spec).__name__ else HIGH)
            )
            answers[tp] = future
        return answers


def test_starts_are_asked_through_the_admin_client_once_the_consumer_fetches() -> None:
    """The first hold asks the consumer; a hold while it fetches asks the admin client.

    A broker answers a connection's requests in turn: on the consumer's own connection the
    watermarks would wait behind its fetch (tests/integration/test_register_while_fetching.py).
    """
    starter, client, held = _starter()
    admin = _Admin()
    starter.admin = admin  # type: ignore[assignment]  # a fake admin client
    assert starter.hold({T0: None}, _rules(T0)) == {T0: LOW}
    assert (client.watermark_queries, admin.asked) == (2, [])
    assert starter.hold({T1: None}, _rules(T1)) == {T1: LOW}
    assert (client.watermark_queries, admin.asked) == (2, [[1], [1]])
    assert held[T1].high == HIGH
