"""What a member says about itself (:class:`MemberReport`) and the checks of every record read.

Anyone who can write the status topic can write anything to it, so nothing read from it is
trusted until it validates: a report is parsed by a strict pydantic model (no coercion, bounds
on the lease and offsets, ``topic:partition`` keys that parse), and a claim's value must be a
JSON object. A record that fails is skipped by :class:`~client_balance.membership.GroupState`,
never raised: one bad record must not stop every member's reader.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from client_balance.keys import TopicPartition

__all__ = [
    "MAX_LEASE_S",
    "HeldPartition",
    "MemberReport",
    "is_claim_value",
]

MAX_LEASE_S = 600.0
"""The longest lease a report may carry: a report claiming more is malformed (a forged 1e300
would otherwise hold its partitions for good), and a member with a longer one refuses to start."""

_TOPIC = r"[A-Za-z0-9._-]{1,249}"  # what Kafka accepts as a topic name
_PARTITION_KEY = rf"^{_TOPIC}:(0|[1-9][0-9]{{0,9}})$"  # "topic:partition", as _identity parses it

Topic = Annotated[str, Field(pattern=rf"^{_TOPIC}$")]
PartitionKey = Annotated[str, Field(pattern=_PARTITION_KEY)]


@dataclass(frozen=True)
class HeldPartition:
    """A partition in a member report: where the member stands in it."""

    confirmed: int
    committed: int | None
    high: int | None

    @property
    def lag(self) -> int | None:
        """Messages between the confirmed position and the high watermark."""
        return None if self.high is None else max(self.high - self.confirmed, 0)


@dataclass(frozen=True)
class MemberReport:
    """What a member says about itself: who and where it is, its settings, what it holds."""

    consumer_id: str
    host: str
    pid: int
    node_id: int
    source_count: int
    topics: tuple[str, ...]
    strategy: str
    version: str
    lease_timeout_s: float
    held: dict[str, HeldPartition] = field(default_factory=dict)
    """``"topic:partition"`` -> position."""
    join_offset: int | None = None
    """Offset of the member's first report (None in that report itself): who came first."""
    fenced: bool = False
    mode: str = "node"
    """The member's group mode (``node``, ``manual``, ``elastic``; ``spark``: a streaming query)."""
    status_partitions: int = 0
    """Its ``status_topic_partitions`` (0: a report from before the setting existed)."""
    filters: dict[str, list[str]] = field(default_factory=dict)
    """Topic -> its filter values, sorted, for the topics started with a filter set."""
    pinned: list[str] = field(default_factory=list)
    """``"topic:partition"`` of the partitions it pinned, sorted: no other member takes them."""

    def encode(self) -> bytes:
        """The record value."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> MemberReport:
        """Parse and validate a record value (ValueError, with the reason, if it is no report)."""
        try:
            record = _ReportRecord.model_validate_json(raw)
        except ValidationError as error:
            raise ValueError(_reason(error)) from None
        data = record.model_dump()
        data["topics"] = tuple(data["topics"])
        data["held"] = {key: HeldPartition(**value) for key, value in data["held"].items()}
        if data["mode"] is None:
            # Reports written before modes were explicit: a positive source_count was a node,
            # -1 an elastic member, 0 the application's own.
            count = data["source_count"]
            data["mode"] = "node" if count > 0 else "elastic" if count < 0 else "manual"
        return cls(**data)

    def held_partitions(self) -> set[TopicPartition]:
        """The held partitions as (topic, partition)."""
        return {_identity(key) for key in self.held}

    def pinned_partitions(self) -> set[TopicPartition]:
        """The pinned partitions as (topic, partition)."""
        return {_identity(key) for key in self.pinned}


def _identity(key: str) -> TopicPartition:
    topic, _, number = key.rpartition(":")
    return TopicPartition(topic, int(number))


# Strict: JSON's types as written, nothing coerced ("3" is no int, 1.0 no pid, 0 no bool).
# Unknown fields are dropped: a newer member's report still counts as a member.
_STRICT = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)


class _HeldRecord(BaseModel):
    model_config = _STRICT

    confirmed: int
    committed: int | None
    high: int | None


class _ReportRecord(BaseModel):
    """The shape a report must have: :class:`MemberReport`'s fields, typed and bounded."""

    model_config = _STRICT

    consumer_id: Annotated[str, Field(min_length=1)]
    host: str
    pid: Annotated[int, Field(ge=0)]
    node_id: int
    source_count: int
    topics: list[Topic]
    strategy: str
    version: str
    lease_timeout_s: Annotated[float, Field(gt=0, le=MAX_LEASE_S)]
    held: dict[PartitionKey, _HeldRecord] = Field(default_factory=dict)
    join_offset: Annotated[int, Field(ge=0)] | None = None
    fenced: bool = False
    mode: Annotated[str, Field(min_length=1)] | None = None
    status_partitions: Annotated[int, Field(ge=0)] = 0
    filters: dict[Topic, list[str]] = Field(default_factory=dict)
    pinned: list[PartitionKey] = Field(default_factory=list)


def _reason(error: ValidationError) -> str:
    """The first problem, short and without the value (a record may be large or hostile)."""
    first: dict[str, Any] = dict(error.errors(include_url=False, include_input=False)[0])
    where = ".".join(str(part) for part in first.get("loc", ())) or "value"
    return f"{where}: {first.get('msg', 'invalid')}"[:200]


def is_claim_value(raw: bytes) -> bool:
    """Whether ``raw`` is a claim's value: a JSON object (``{}``; fields are for later versions)."""
    try:
        return isinstance(json.loads(raw), dict)
    except (ValueError, RecursionError):
        return False
