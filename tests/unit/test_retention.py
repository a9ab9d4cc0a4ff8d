"""Restarting a partition that retention overtook: where, what is counted, and its pause."""

from __future__ import annotations

from typing import Any

from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._retention import restart_at_log_start
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
