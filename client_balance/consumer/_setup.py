"""What a member was started as: who it is, its topics, its group mode and its rule."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from client_balance._version import __version__
from client_balance.consumer._buffers import Positions
from client_balance.consumer._results import AssignmentContext
from client_balance.errors import ConfigError, InvalidOffsetError
from client_balance.keys import (
    RESUME_OFFSET,
    TopicPartition,
    check_bootstrap_offset,
    to_topic_partition,
)
from client_balance.membership import HeldPartition, MemberReport, pid_space
from client_balance.settings import ClientBalanceSettings, GroupMode

__all__ = ["CLIENT_VERSION", "Assigner", "MemberSetup", "UserTarget", "user_target"]

CLIENT_VERSION = f"client-balance-{__version__}"

UserTarget = Iterable[str | TopicPartition] | Mapping[str | TopicPartition, int]
"""A callback's answer: keys, or keys -> bootstrap offsets."""

Assigner = Callable[[AssignmentContext], UserTarget]
"""A user's assignment: what the round knows -> keys (or keys -> bootstrap offsets)."""


@dataclass(frozen=True)
class MemberSetup:
    """The member as ``start()`` made it: fixed until ``shutdown()``."""

    settings: ClientBalanceSettings
    consumer_id: str
    topics: Mapping[str, frozenset[str] | None]
    mode: GroupMode
    source_count: int
    node_id: int
    assigner: Assigner | None

    @property
    def strategy_name(self) -> str:
        """The strategy; elastic groups move partitions on every join and leave: sticky."""
        if self.mode is GroupMode.ELASTIC and "strategy" not in self.settings.model_fields_set:
            return "sticky"
        return self.settings.strategy

    def report(self, offsets: Iterable[Positions], pinned: list[str]) -> MemberReport:
        """The member's status report, holding the partitions of ``offsets``."""
        held = {
            f"{at.partition.topic}:{at.partition.partition}": HeldPartition(
                at.confirmed, at.committed, at.high
            )
            for at in offsets
        }
        return MemberReport(
            consumer_id=self.consumer_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            node_id=self.node_id,
            source_count=self.source_count,
            topics=tuple(sorted(self.topics)),
            strategy=self.strategy_name,
            version=CLIENT_VERSION,
            lease_timeout_s=self.settings.lease_timeout_s,
            held=held,
            mode=self.mode.value,
            filters={t: sorted(f) for t, f in sorted(self.topics.items()) if f is not None},
            pinned=pinned,
            pid_space=pid_space(),
        )


def user_target(answer: UserTarget) -> dict[TopicPartition, int]:
    """A callback's answer (keys, or keys -> bootstrap offsets) as partitions -> offsets."""
    allowed = "return a collection of partition keys or a mapping of keys to bootstrap offsets"
    if isinstance(answer, str | bytes):
        raise ConfigError(f"the assignment callback returned the string {answer!r}; {allowed}")
    if not isinstance(answer, Iterable):
        raise ConfigError(f"the assignment callback returned {answer!r}; {allowed}")
    if not isinstance(answer, Mapping):
        return {to_topic_partition(key): RESUME_OFFSET for key in answer}
    target: dict[TopicPartition, int] = {}
    named_by: dict[TopicPartition, object] = {}
    for key, offset in answer.items():
        partition = to_topic_partition(key)
        try:  # None resumes, as for pin(); the partition is named with a bad offset
            start = RESUME_OFFSET if offset is None else check_bootstrap_offset(offset)
        except InvalidOffsetError as error:
            raise InvalidOffsetError(f"for {key!r}: {error}", offset=error.offset) from None
        if target.get(partition, start) != start:  # which would win is the dict's order
            raise ConfigError(
                f"the assignment callback's keys {named_by[partition]!r} and {key!r} name "
                f"{partition} with two offsets, {target[partition]} and {start}; give each "
                "partition once"
            )
        target[partition], named_by[partition] = start, key
    return target
