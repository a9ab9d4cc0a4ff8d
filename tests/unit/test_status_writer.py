"""The status writer produces nothing before the topic's metadata is in (one write, one batch)."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import pytest

from client_balance import ClientBalanceError
from client_balance.membership import _writer
from client_balance.membership._writer import StatusWriter


class _Message:
    def offset(self) -> int:
        return 0

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


class _SlowMetadataProducer:
    """A producer whose metadata answer is held back; records what was produced meanwhile."""

    def __init__(self) -> None:
        self.metadata_in = threading.Event()
        self.answered = threading.Event()
        self.produced_before_metadata = 0
        self.pending: list[Any] = []

    def list_topics(self, topic: str, timeout_s: float) -> None:
        self.metadata_in.wait(timeout_s)
        self.answered.set()

    def produce(self, topic: str, value: Any, key: Any, **kwargs: Any) -> None:
        if not self.answered.is_set():
            self.produced_before_metadata += 1
        self.pending.append(kwargs["on_delivery"])

    def flush(self, timeout_s: float) -> int:
        for report in self.pending:
            report(None, _Message())
        self.pending.clear()
        return 0


def test_the_first_write_waits_for_the_topics_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the fix the first write produced while the metadata was still being asked."""
    producer = _SlowMetadataProducer()
    monkeypatch.setattr(_writer, "producer_client", lambda *args: producer)
    writer = StatusWriter("127.0.0.1:1", "status", 0, kafka={}, timeout_s=5.0)
    threading.Timer(0.2, producer.metadata_in.set).start()
    written = writer.write([(b"k", b"{}")] * 3)
    assert len(written) == 3
    assert producer.produced_before_metadata == 0


def test_status_writes_use_lz4_and_keep_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """lz4, not zstd: reading a zstd batch sets up a context each time, and a start reads them all.

    2,000 one-record batches took a fresh consumer 55 ms with zstd and 8 ms with lz4
    (docs/design-decisions.md, "Status writes use lz4, not zstd").
    """
    made: list[dict[str, Any]] = []

    def producer(bootstrap: str, kafka: Any, overrides: dict[str, Any]) -> _SlowMetadataProducer:
        made.append(overrides)
        fake = _SlowMetadataProducer()
        fake.metadata_in.set()
        return fake

    monkeypatch.setattr(_writer, "producer_client", producer)
    StatusWriter("127.0.0.1:1", "status", 0, kafka={}, timeout_s=5.0)
    assert made[0]["compression.type"] == "lz4"
    # One request in flight: a retry never lands a later batch first (readers rely on order).
    assert made[0]["max.in.flight.requests.per.connection"] == 1


def test_a_full_producer_queue_is_delivered_and_the_write_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full producer queue (BufferError) mid-write is flushed, then the rest goes; nothing raw.

    It came out of the write as a raw BufferError and ended the report thread for good.
    """

    class _FullQueueProducer(_SlowMetadataProducer):
        def produce(self, topic: str, value: Any, key: Any, **kwargs: Any) -> None:
            if len(self.pending) >= 2:
                raise BufferError("Local: Queue full")
            super().produce(topic, value, key, **kwargs)

    producer = _FullQueueProducer()
    producer.metadata_in.set()
    monkeypatch.setattr(_writer, "producer_client", lambda *args: producer)
    writer = StatusWriter("127.0.0.1:1", "status", 0, kafka={}, timeout_s=5.0)
    assert len(writer.write([(b"k", b"{}")] * 5)) == 5


def test_a_write_given_up_leaves_nothing_queued_to_land_later() -> None:
    """A broker that takes the connection and never answers: the failed record is dropped."""
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept_and_say_nothing() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(silent.accept()[0])

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    port = silent.getsockname()[1]
    writer = StatusWriter(f"127.0.0.1:{port}", "status", 0, kafka={}, timeout_s=3.0)
    try:
        with pytest.raises(ClientBalanceError, match="no answer within 1"):
            writer.write([(b'["member","g","c1"]', b"{}")], within_s=1.0)
        assert len(writer._producer) == 0  # nothing left to land after its member fenced
    finally:
        writer.close()
        silent.close()
        for connection in accepted:
            connection.close()
