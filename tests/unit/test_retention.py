"""Restarting a partition that retention overtook: where, what is counted, and its pause."""

from __future__ import annotations

from typing import Any, cast

from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._retention import restart_at_log_start, restart_out_of_range
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
    dropped: list[HeldPartition] = []
    restart_out_of_range(
        cast(Any, client), {T0: state}, [("t", 0, None)], timeout_s=1.0,
        drop_buffer=dropped.append,
    )  # fmt: skip
    assert dropped == [state]
    assert client.calls == [("unassign", 0), ("assign", 10), ("resume", 0)]
    assert state.lost_to_retention == 0


class _Fetched:
    """A fetched message: its offset."""

    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset
