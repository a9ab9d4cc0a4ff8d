"""Assignment strategies: pure functions from partitions and members to an assignment.

``get_strategy(name)`` returns an object with ``name`` and ``assign(partitions, members, *,
partition_racks=None) -> dict[member id, list[TopicPartition]]``. This package knows nothing of
Kafka's client: it is plain data in, plain data out, and every member computes the same answer.
"""

from __future__ import annotations

from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    Strategy,
    java_string_hash,
)
from client_balance.strategies._modulo import HashStrategy, ModuloStrategy
from client_balance.strategies._range import RangeStrategy
from client_balance.strategies._roundrobin import RoundRobinStrategy
from client_balance.strategies._sticky import CooperativeStickyStrategy, StickyStrategy

__all__ = [
    "DEFAULT_STRATEGY",
    "Assignment",
    "Member",
    "PartitionRacks",
    "Strategy",
    "TopicPartition",
    "get_strategy",
    "java_string_hash",
    "strategy_names",
]

DEFAULT_STRATEGY = "modulo"

_REGISTRY: dict[str, Strategy] = {
    strategy.name: strategy
    for strategy in (
        CooperativeStickyStrategy(),
        HashStrategy(),
        ModuloStrategy(),
        RangeStrategy(),
        RoundRobinStrategy(),
        StickyStrategy(),
    )
}


def strategy_names() -> tuple[str, ...]:
    """The registered strategy names, sorted."""
    return tuple(sorted(_REGISTRY))


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; unknown names raise ConfigError listing valid ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"unknown strategy {name!r}; valid names: {', '.join(strategy_names())}"
        ) from None
