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


def test_a_truncated_log_without_a_position_is_restarted_from_what_was_fetched() -> None:
    """The reset librdkafka makes after an unclean election has no offset: restarted all the same.

    confluent-kafka gives such an event's offset as None, and the partition was skipped: it
    stayed held and claimed, and delivered nothing ever again (the review of 2026-11-29).
    """
    client = _Client()
    state = HeldPartition(T0, None, 10, 10)
    state.buffer.append(cast(Any, [_Fetched(10), _Fetched(11)]))
    restart_out_of_range(client, {T0: state}, [("t", 0, None)], timeout_s=1.0)  # type: ignore[arg-type]
    assert client.calls == [("unassign", 0), ("assign", 40), ("resume", 0)]


class _Fetched:
    """A fetched message: its offset."""

    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset
