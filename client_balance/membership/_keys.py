"""The keys of the status topic's records: whose record it is, and of what kind.

A key is a JSON array, so group ids and consumer ids may contain any character:
``["member", group, consumer_id]`` for a member's reports, ``["claim", group, topic, partition,
consumer_id]`` for its claim on a partition (``_records`` has what each record means).
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache

from client_balance.keys import TopicPartition

__all__ = ["CLAIM", "MEMBER", "claim_key", "member_key", "parse_key", "quoted_group"]

MEMBER, CLAIM = "member", "claim"
"""The first element of a key: a member's report, or a claim."""


@cache
def quoted_group(group: str) -> bytes:
    """``group`` as every key of it spells it: records without it are another group's."""
    return json.dumps(group).encode()


def member_key(group: str, consumer_id: str) -> bytes:
    """The key of a member's reports."""
    return json.dumps([MEMBER, group, consumer_id]).encode()


def claim_key(group: str, partition: TopicPartition, consumer_id: str) -> bytes:
    """The key of a member's claim on a partition."""
    return json.dumps([CLAIM, group, partition.topic, partition.partition, consumer_id]).encode()


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""What JSON may encode (``"\\ud800"``) but no UTF-8 output takes: a forged record with one
crashed every command and scrape that printed it."""


def parse_key(raw: bytes | None) -> tuple[str, str, str, TopicPartition | None] | None:
    """(kind, group, consumer id, partition or None) of a status key; None if foreign.

    A group's keys come back with every report (a member's, every ``report_interval_s``), and
    a start replays all of them: short keys are parsed once each (``_KEYS_CACHED`` of them).
    """
    if raw is not None and len(raw) <= _KEY_CACHED_MAX_BYTES:
        return _parse_key_cached(raw)
    return _parse_key(raw)


_KEY_CACHED_MAX_BYTES = 256
"""Longer keys are parsed each time: a hostile log must not fill the cache with megabytes."""
_KEYS_CACHED = 16_384
"""The group's member keys, and its claims' for a few thousand partitions."""


def _parse_key(raw: bytes | None) -> tuple[str, str, str, TopicPartition | None] | None:
    try:
        parts = json.loads(raw or b"")
    except (ValueError, RecursionError):  # a hostile key may nest deeper than json recurses
        return None
    if not isinstance(parts, list) or not parts:
        return None
    if any(isinstance(part, str) and not part.isascii() and LONE_SURROGATE.search(part)
           for part in parts):  # fmt: skip
        return None  # no id or topic of ours: it could not be written out
    kind = parts[0]
    if kind == MEMBER and len(parts) == 3 and all(isinstance(p, str) for p in parts):  # noqa: PLR2004 - the key's shape
        return MEMBER, parts[1], parts[2], None
    if (
        kind == CLAIM
        and len(parts) == 5  # noqa: PLR2004 - the key's shape
        and isinstance(parts[1], str)
        and isinstance(parts[2], str)
        and type(parts[3]) is int
        and parts[3] >= 0
        and isinstance(parts[4], str)
    ):
        return CLAIM, parts[1], parts[4], TopicPartition(parts[2], parts[3])
    return None


_parse_key_cached = lru_cache(maxsize=_KEYS_CACHED)(_parse_key)
