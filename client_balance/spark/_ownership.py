"""A Spark read and the group's live members: what a live SDK member holds is not read.

A batch read with a ``group.id`` reads that group's partitions (from its committed offsets by
default); it never commits to the group. If live workers of the same group hold some of them,
both would read the same messages, each as the group's. So the driver reads the group's status
view first and refuses, naming the members, unless ``readHeldPartitions`` asks to read them
anyway. (A streaming query commits, and takes part through ``_registration`` instead.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from client_balance.admin._view import read_group
from client_balance.errors import PartitionOccupiedError
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["held_by_live_members", "named_holders", "refuse_held"]

_SHOWN = 5  # partitions named in the error; the count says how many more


def held_by_live_members(
    partitions: Iterable[TopicPartition],
    *,
    bootstrap_servers: str,
    group_id: str,
    kafka: Mapping[str, Any],
    status_topic: str,
    timeout_s: float,
) -> dict[TopicPartition, str]:
    """Which of ``partitions`` a live member of ``group_id`` holds now (partition -> member)."""
    settings = ClientBalanceSettings(
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        kafka=dict(kafka),
        status_topic=status_topic,
    )
    state, _ = read_group(settings, group_id, timeout_s)
    holders = state.live_holders()
    return {tp: holders[tp] for tp in sorted(set(partitions)) if tp in holders}


def named_holders(held: Mapping[TopicPartition, str]) -> str:
    """``held`` for an error message: the first few ``partition by member``, and how many more."""
    shown = ", ".join(f"{tp} by {member}" for tp, member in sorted(held.items())[:_SHOWN])
    return shown + (f" and {len(held) - _SHOWN} more" if len(held) > _SHOWN else "")


def refuse_held(held: Mapping[TopicPartition, str], group_id: str) -> None:
    """Raise :class:`PartitionOccupiedError` (410) naming the members if ``held`` is not empty."""
    if not held:
        return
    shown = named_holders(held)
    first, holder = sorted(held.items())[0]
    raise PartitionOccupiedError(
        f"live members of group {group_id!r} hold partitions this read would read: {shown}; "
        "stop them first, or set the option readHeldPartitions=true to read them anyway "
        "(read-only: nothing is committed to the group)",
        key=str(first),
        holder=holder,
    )
