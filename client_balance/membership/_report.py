"""What a member says about itself (:class:`MemberReport`) and the checks of every record read.

Anyone who can write the status topic can write anything to it, so nothing read from it is
trusted until it validates: a report is parsed strictly (JSON's types as written, nothing
coerced; bounds on the lease and offsets; ``topic:partition`` keys that parse), and a claim's
value must be a JSON object. A record that fails is skipped by
:class:`~client_balance.membership.GroupState`, never raised: one bad record must not stop every
member's reader.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from client_balance.keys import TopicPartition
from client_balance.membership._keys import LONE_SURROGATE

__all__ = [
    "MAX_LEASE_S",
    "HeldPartition",
    "MemberReport",
    "is_claim_value",
]

MAX_LEASE_S = 600.0
"""The longest lease a report may carry: a report claiming more is malformed (a forged 1e300
would otherwise hold its partitions for good), and a member with a longer one refuses to start."""

_TOPIC = r"(?!\.\.?(?![A-Za-z0-9._-]))[A-Za-z0-9._-]{1,249}"  # Kafka's topic names: not . or ..
_MAX_PID = 2**31 - 1
"""A pid is a C int: a larger one made ``os.kill`` raise OverflowError in the group checks."""
_TOPIC_NAME = re.compile(_TOPIC)
_PARTITION_KEY = re.compile(rf"{_TOPIC}:(0|[1-9][0-9]{{0,9}})")  # as _identity parses it


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
    pid_space: str = ""
    """Where ``pid`` can be looked up: boot id and PID namespace ("" where unknown)."""

    def encode(self) -> bytes:
        """The record value."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> MemberReport:
        """Parse and validate a record value (ValueError, with the reason, if it is no report)."""
        try:
            data = _checked(json.loads(raw))
        except (ValueError, RecursionError) as error:
            raise ValueError(str(error)[:200]) from None
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


def _malformed(where: str, problem: str) -> ValueError:
    return ValueError(f"{where}: {problem}")


def _int(
    value: Any, where: str, *, at_least: int | None = None, at_most: int | None = None,
    none: bool = False,
) -> Any:  # fmt: skip
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _malformed(where, "should be an integer")
    if at_least is not None and value < at_least:
        raise _malformed(where, f"should be at least {at_least}")
    if at_most is not None and value > at_most:
        raise _malformed(where, f"should be at most {at_most}")
    return value


def _str(
    value: Any, where: str, *, pattern: re.Pattern[str] | None = None, min_length: int = 0
) -> str:
    if not isinstance(value, str):
        raise _malformed(where, "should be a string")
    if not value.isascii() and LONE_SURROGATE.search(value):  # JSON's "\ud800" decodes to one
        raise _malformed(where, "is no text: it holds a lone surrogate, which cannot be written")
    if len(value) < min_length:
        raise _malformed(where, f"should have at least {min_length} character(s)")
    if pattern is not None and pattern.fullmatch(value) is None:
        raise _malformed(where, "does not name a topic or partition")
    return value


def _list(value: Any, where: str, item: Callable[[Any, str], Any]) -> list[Any]:
    if not isinstance(value, list):
        raise _malformed(where, "should be a list")
    return [item(one, f"{where}.{i}") for i, one in enumerate(value)]


def _dict(value: Any, where: str, key: re.Pattern[str], item: Callable[[Any, str], Any]) -> Any:
    if not isinstance(value, dict):
        raise _malformed(where, "should be an object")
    return {_str(k, f"{where}.{k}", pattern=key): item(v, f"{where}.{k}") for k, v in value.items()}


def _lease(value: Any, where: str) -> float:
    # isfinite() of an int past a float's range raises OverflowError: ints are finite anyway.
    finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if isinstance(value, bool) or not finite:
        raise _malformed(where, "should be a finite number")
    if not 0 < value <= MAX_LEASE_S:
        raise _malformed(where, f"should be greater than 0 and at most {MAX_LEASE_S:g}")
    return float(value)


def _held(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(where, "should be an object")
    return {
        "confirmed": _int(_field(value, "confirmed", where), f"{where}.confirmed"),
        "committed": _int(_field(value, "committed", where), f"{where}.committed", none=True),
        "high": _int(_field(value, "high", where), f"{where}.high", none=True),
    }


def _field(record: dict[str, Any], name: str, where: str = "") -> Any:
    if name not in record:
        raise _malformed(f"{where}.{name}" if where else name, "is missing")
    return record[name]


def _checked(record: Any) -> dict[str, Any]:
    """A report record's fields, each of its type and in its bounds (else ValueError)."""
    if not isinstance(record, dict):
        raise _malformed("value", "should be a JSON object")
    get = record.get
    mode = get("mode")
    return {
        "consumer_id": _str(_field(record, "consumer_id"), "consumer_id", min_length=1),
        "host": _str(_field(record, "host"), "host"),
        "pid": _int(_field(record, "pid"), "pid", at_least=0, at_most=_MAX_PID),
        "node_id": _int(_field(record, "node_id"), "node_id"),
        "source_count": _int(_field(record, "source_count"), "source_count"),
        "topics": _list(_field(record, "topics"), "topics", _topic),
        "strategy": _str(_field(record, "strategy"), "strategy"),
        "version": _str(_field(record, "version"), "version"),
        "lease_timeout_s": _lease(_field(record, "lease_timeout_s"), "lease_timeout_s"),
        "held": _dict(get("held", {}), "held", _PARTITION_KEY, _held),
        "join_offset": _int(get("join_offset"), "join_offset", at_least=0, none=True),
        "fenced": _bool(get("fenced", False), "fenced"),
        "mode": None if mode is None else _str(mode, "mode", min_length=1),
        "status_partitions": _int(get("status_partitions", 0), "status_partitions", at_least=0),
        "filters": _dict(get("filters", {}), "filters", _TOPIC_NAME, _strings),
        "pinned": _list(get("pinned", []), "pinned", _partition_key),
        "pid_space": _str(get("pid_space", ""), "pid_space"),
    }


def _topic(value: Any, where: str) -> str:
    return _str(value, where, pattern=_TOPIC_NAME)


def _partition_key(value: Any, where: str) -> str:
    return _str(value, where, pattern=_PARTITION_KEY)


def _strings(value: Any, where: str) -> list[str]:
    return _list(value, where, _str)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _malformed(where, "should be true or false")
    return value


def is_claim_value(raw: bytes) -> bool:
    """Whether ``raw`` is a claim's value: a JSON object (``{}``; fields are for later versions)."""
    try:
        return isinstance(json.loads(raw), dict)
    except (ValueError, RecursionError):
        return False
