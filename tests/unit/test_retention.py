"""Restarting a partition that retention overtook: where, what is counted, and its pause."""

from __future__ import annotations

from typing import Any, cast

import pytest
from confluent_kafka import Message

from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._retention import restart_at_log_start, restart_out_of_range
from client_balance.consumer._shelf import Shelf
from client_balance.keys import TopicPartition

T0 = TopicPartition("t", 0)


class _Client:
    """Log 40..100; records assigns and resumes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return 40, 100

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self.calls.append(("unassign", partitions[0].partition))

    def incremental_assign(self, partitions: list[Any]) -> None:
        self.calls.append(("assign", partitions[0].offset))

    def resume(self, partitions: list[Any]) -> None:
        self.calls.append(("resume", partitions[0].partition))


def test_a_paused_partition_restarted_at_its_log_start_is_no_longer_marked_paused() -> None:
    """Resumed in the client and in its state too: a full buffer can pause it again.

    The flag stayed set after the resume, so the partition was never paused again for a full
    buffer: its count bound lapsed until a batch was taken.
    """
    client = _Client()
    state = HeldPartition(T0, None, 10, 10, paused=True)
    restart_at_log_start(client, state, 10, timeout_s=1.0)  # type: ignore[arg-type]
    assert client.calls == [("unassign", 0), ("assign", 40), ("resume", 0)]
    assert state.lost_to_retention == 30
    assert state.paused is False


class _Truncated(_Client):
    """The new leader's log: 0..11, below the 12 fetched from the old one."""

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return 0, 11


def test_a_truncated_log_restarts_where_the_application_stands_without_the_old_buffer() -> None:
    """Truncated under it (an unclean election): restarted where the application stands.

    The old leader's buffered messages are dropped: the new log may not have them.

    confluent-kafka gives such an event's offset as None, and the partition was skipped: it
    stayed held and claimed, and delivered nothing ever again (the review of 2026-11-29).
    """
    client = _Truncated()
    state = HeldPartition(T0, None, 10, 10)
    state.buffer.append(cast(Any, [_Fetched(10), _Fetched(11)]))
    cuts: list[tuple[HeldPartition, int]] = []
    restart_out_of_range(
        cast(Any, client), {T0: state}, [("t", 0, None)], timeout_s=1.0,
        cut=lambda held, restart: cuts.append((held, restart)),
    )  # fmt: skip
    assert cuts == [(state, 10)]
    assert client.calls == [("unassign", 0), ("assign", 10), ("resume", 0)]
    assert state.lost_to_retention == 0


def test_a_log_truncated_below_the_confirmed_position_reads_on_from_its_new_end() -> None:
    """The new log (0..11) ends below the confirmed 12: restarted at 11, not at its log start.

    Taken for a topic made anew, it restarted at 0 and delivered the whole log again (the
    review of 2026-11-29, third round).
    """
    client = _Truncated()
    state = HeldPartition(T0, None, 12, 12)
    cuts: list[int] = []
    restart_out_of_range(
        cast(Any, client), {T0: state}, [("t", 0, None)], timeout_s=1.0,
        cut=lambda _held, restart: cuts.append(restart),
    )  # fmt: skip
    assert cuts == [11]
    assert client.calls == [("unassign", 0), ("assign", 11), ("resume", 0)]
    assert state.lost_to_retention == 0


def test_offsets_counted_lost_are_not_counted_again_after_a_rollback() -> None:
    """Retention took 10..39; a rollback to 5 finds it again and counts nothing twice."""
    client = _Client()
    state = HeldPartition(T0, None, 5, 5)
    restart_at_log_start(client, state, 10, timeout_s=1.0)  # type: ignore[arg-type]
    restart_at_log_start(client, state, 5, timeout_s=1.0)  # type: ignore[arg-type]
    assert state.lost_to_retention == 30
    assert [call for call in client.calls if call[0] == "assign"] == [("assign", 40)] * 2


class _Fetched:
    """A fetched message: its offset."""

    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


@pytest.mark.parametrize(("consumed", "rewind_to"), [(True, None), (False, 11)])
def test_a_batch_out_beyond_a_cut_log_settles_at_the_new_logs_end(
    consumed: bool, rewind_to: int | None
) -> None:
    """Batch 12..14 out, the new log ends at 11: it settles at 11, confirmed or rolled back.

    Past it, the next batch started at 15 with messages from 11, and a rollback to 12, beyond
    the log's end, restarted the partition at its log start.
    """
    state = HeldPartition(T0, None, 12, 12)
    shelf = Shelf({T0: state}, 10, 1 << 20, "type")
    run = [Message(topic="t", partition=0, offset=at, value=b"x") for at in range(12, 15)]
    state.add_run(run, len(run), len(run), 100)
    batch, _ = state.hand_out(10, 1, "type")
    assert (batch.start, batch.end) == (12, 15)
    shelf.cut(state, 11)
    _, rewound = shelf.settle(state, consumed, None)
    assert (rewound, state.confirmed) == (rewind_to, 11)


class _Log:
    """A log of ``low``..``high``; records assigns."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high
        self.assigned: list[int] = []

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return self.low, self.high

    def incremental_unassign(self, partitions: list[Any]) -> None:
        """Noted by the assign that follows."""

    def incremental_assign(self, partitions: list[Any]) -> None:
        self.assigned.append(partitions[0].offset)

    def resume(self, partitions: list[Any]) -> None:
        """Nothing to resume."""


def test_losses_of_a_log_made_anew_are_counted_from_nothing() -> None:
    """Retention counted to 40 on the old log; on the new one it takes 20..59: all 40 count."""
    state = HeldPartition(T0, None, 10, 10)
    restart_at_log_start(cast(Any, _Log(40, 100)), state, 10, timeout_s=1.0)
    restart_at_log_start(cast(Any, _Log(0, 5)), state, 120, timeout_s=1.0)  # made anew
    state.confirmed = 20
    restart_at_log_start(cast(Any, _Log(60, 100)), state, 20, timeout_s=1.0)
    assert state.lost_to_retention == 30 + 40


def test_a_second_truncation_under_one_batch_restarts_where_the_first_left_it() -> None:
    """Batch 12..14 out; cut at 11, then at 12: the second restarts at 11, stays at 11.

    It restarted from the batch's end, past the first new log's offset 11, and the batch's
    confirm skipped it (the review of 2026-11-29, third round).
    """
    state = HeldPartition(T0, None, 12, 12)
    shelf = Shelf({T0: state}, 10, 1 << 20, "type")
    run = [Message(topic="t", partition=0, offset=at, value=b"x") for at in range(12, 15)]
    state.add_run(run, len(run), len(run), 100)
    state.hand_out(10, 1, "type")
    for new_log in (_Log(0, 11), _Log(0, 12)):
        restart_out_of_range(
            cast(Any, new_log), {T0: state}, [("t", 0, None)], timeout_s=1.0, cut=shelf.cut
        )
        assert new_log.assigned == [11]
    shelf.settle(state, True, None)
    assert state.confirmed == 11
