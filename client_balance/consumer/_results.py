"""What the consumer hands out: partition meta, offset snapshots, batches and confirm results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from client_balance.keys import TopicPartition

if TYPE_CHECKING:
    from client_balance._kafka import Message
    from client_balance.consumer._consumer import ClientBalanceConsumer
else:
    Message = Any

__all__ = [
    "Batch",
    "ConfirmResult",
    "ConsumeResult",
    "Message",
    "NodeContext",
    "OffsetInfo",
    "PartitionMeta",
]


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    """One partition of the configured set, as the last metadata query saw it.

    ``subscribable`` is False when the partition has no leader or reports an error; ``leader``
    is -1 then. ``low`` and ``high`` are the watermarks (None where the partition did not
    answer), ``holder`` the consumer id of the live member holding it (None: nobody).
    """

    key: str
    topic: str
    partition: int
    leader: int
    subscribable: bool
    low: int | None = None
    high: int | None = None
    holder: str | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition's identity."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class OffsetInfo:
    """Where a registered partition stands; offsets are "next message to read"."""

    key: str
    current: int
    """The confirmed position: everything before it was consumed and confirmed."""
    committed: int | None
    """The position last committed to the group (None before the first commit)."""
    high: int | None
    """The high watermark last seen (None until the first fetch or query)."""
    lag: int | None
    """``high - current`` when the high watermark is known."""
    updated_s: float
    """``time.time()`` of the last change."""
    lost_to_retention: int = 0
    """Offsets that retention deleted before they were delivered, while this member held it."""


@dataclass(frozen=True, slots=True)
class ConsumeResult:
    """One partition's batch. The partition stays locked until ``confirm`` of this context.

    ``messages`` are confluent-kafka ``Message`` objects (no copy is made); a batch whose
    messages were all filtered out is empty and must still be confirmed.
    """

    key: str
    topic: str
    partition: int
    messages: list[Message]
    confirm_context: str
    start_offset: int
    """The offset the batch starts at (the partition's confirmed position)."""
    end_offset: int
    """The position after the batch: what ``confirm(..., True)`` confirms."""
    high: int | None


@dataclass(frozen=True, slots=True)
class ConfirmResult:
    """The outcome of a confirm: ``current`` is the partition's confirmed position now."""

    key: str
    consumed: bool
    current: int
    committed: bool
    """Whether ``current`` is already committed to the group (``commit="sync"``)."""


@dataclass(frozen=True, slots=True)
class NodeContext:
    """What an assignment callback knows about the node asking."""

    group_id: str
    source_count: int
    node_id: int
    topics: tuple[str, ...]
    registered: frozenset[str]
    mode: str = "node"
    """The group mode: ``"node"``, ``"manual"`` or ``"elastic"``."""


class Batch:
    """A batch from :meth:`ClientBalanceConsumer.batches`: the result plus ``confirm()``."""

    __slots__ = ("_consumer", "result")

    def __init__(self, consumer: ClientBalanceConsumer, result: ConsumeResult) -> None:
        self._consumer = consumer
        self.result = result

    @property
    def messages(self) -> list[Message]:
        """The batch's messages (confluent-kafka ``Message`` objects)."""
        return self.result.messages

    @property
    def key(self) -> str:
        """The partition's key."""
        return self.result.key

    def confirm(self, consumed: bool = True) -> ConfirmResult:
        """Confirm the batch (``consumed=False`` has it delivered again)."""
        return self._consumer.confirm(self.result.confirm_context, consumed)
