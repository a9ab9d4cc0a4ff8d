"""Assignment strategies: pure functions from partitions and members to an assignment.

``get_strategy(name)`` returns an object with ``name`` and ``assign(partitions, members, *,
partition_racks=None) -> dict[member id, list[TopicPartition]]``. This package knows nothing of
Kafka's client: it is plain data in, plain data out, and every member computes the same answer.

A rule of your own becomes a strategy by name with :func:`register_strategy`, as a
``"module:attr"`` reference, or as an entry point of the group ``client_balance.strategies``;
:func:`check_strategy` tells whether it keeps the contract (docs/strategies.md).
"""

from __future__ import annotations

from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    Strategy,
    java_string_hash,
)
from client_balance.strategies._check import check_strategy
from client_balance.strategies._registry import (
    get_strategy,
    register_strategy,
    strategy_names,
    unregister_strategy,
)
from client_balance.strategies._user import Rule

__all__ = [
    "DEFAULT_STRATEGY",
    "Assignment",
    "Member",
    "PartitionRacks",
    "Rule",
    "Strategy",
    "TopicPartition",
    "check_strategy",
    "get_strategy",
    "java_string_hash",
    "register_strategy",
    "strategy_names",
    "unregister_strategy",
]

DEFAULT_STRATEGY = "modulo"
