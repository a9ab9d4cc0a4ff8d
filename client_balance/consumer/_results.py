"""What the consumer hands out: partition meta, offset snapshots, batches and confirm results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from client_balance.keys import TopicPartition

if TYPE_CHECKING:
    from client_balance._kafka import Message
    from client_balance.consumer._consumer import ClientBalanceConsumer
    from client_balance.consumer._decode import DecodedMessage
else:
    Message = DecodedMessage = Any

__all__ = [
    "AssignmentContext",
    "Batch",
    "BatchView",
    "ConfirmResult",
    "ConsumeResult",
    "MemberView",
    "Message",
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

    ``messages`` are confluent-kafka ``Message`` objects (no copy is made), or
    ``DecodedMessage`` objects when a key or value deserializer is set (docs/deserializers.md);
    a batch whose messages were all filtered out is empty and must still be confirmed.
    """

    key: str
    topic: str
    partition: int
    messages: list[Message] | list[DecodedMessage]
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
    """Whether ``current`` is already committed to the group (in either commit mode)."""


@dataclass(frozen=True, slots=True)
class MemberView:
    """A live member of the group as its last report shows it (for an ``assigner``)."""

    consumer_id: str
    node_id: int
    """Its node id in node mode (-1 or -2 in the other modes)."""
    mode: str
    """``"node"``, ``"manual"`` or ``"elastic"``."""
    pinned: frozenset[str]
    """Keys of the partitions it pinned: no other member may hold them."""
    held: Mapping[str, int | None]
    """Key -> lag (None: its high watermark is unknown yet) of each partition it holds."""
    fenced: bool = False

    @property
    def lag(self) -> int:
        """The sum of the known lags of what it holds."""
        return sum(lag for lag in self.held.values() if lag is not None)


@dataclass(frozen=True, slots=True)
class AssignmentContext:
    """What an ``assigner`` callback decides from; read-only, made afresh every round.

    ``partitions`` is the full configured set (subscribable or not) with watermarks and each
    partition's live holder; ``members`` every live member, this one included, sorted by id.
    The callback returns the keys (or ``TopicPartition``s, or keys -> bootstrap offsets) this
    member should hold; partitions pinned by other live members are left out of it.
    """

    group_id: str
    consumer_id: str
    mode: str
    source_count: int
    node_id: int
    topics: tuple[str, ...]
    partitions: Mapping[str, PartitionMeta]
    members: tuple[MemberView, ...]
    held: frozenset[str]
    """Keys this member holds now."""
    pinned: frozenset[str]
    """Keys this member pinned (held whatever the callback answers)."""
    previous_target: frozenset[str]
    """The keys of the target the previous round settled on (empty in the first round)."""
    round_number: int

    @property
    def me(self) -> MemberView | None:
        """The asking member's own entry in ``members`` (None before its first report is read)."""
        return next((m for m in self.members if m.consumer_id == self.consumer_id), None)


class BatchView:
    """What every batch shows: its result, messages and key (subclasses add the settling)."""

    __slots__ = ("result",)

    def __init__(self, result: ConsumeResult) -> None:
        self.result = result

    @property
    def messages(self) -> list[Message] | list[DecodedMessage]:
        """The batch's messages (confluent-kafka ``Message`` objects, or ``DecodedMessage``)."""
        return self.result.messages

    @property
    def key(self) -> str:
        """The partition's key."""
        return self.result.key


class Batch(BatchView):
    """A batch from :meth:`ClientBalanceConsumer.batches`: the result plus ``confirm()``."""

    __slots__ = ("_consumer",)

    def __init__(self, consumer: ClientBalanceConsumer, result: ConsumeResult) -> None:
        super().__init__(result)
        self._consumer = consumer

    def confirm(self, consumed: bool = True) -> ConfirmResult:
        """Confirm the batch (``consumed=False`` has it delivered again)."""
        return self._consumer.confirm(self.result.confirm_context, consumed)
