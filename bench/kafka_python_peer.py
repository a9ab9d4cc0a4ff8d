"""kafka-python's assignors as the Python peer of ``bench/strategies.py``, timed in their process.

``time_kafka_python`` runs in the process ``measure.PeerProcess`` keeps for the peer, so that
kafka-python's allocations never share a heap with the assignors of ours timed after them. Its
inputs and answer are plain (topic counts, subscriptions, (topic, partition) pairs): they
travel pickled between the two processes.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from measure import timed  # bench/measure.py

Pairs = Sequence[tuple[str, int]]
COOPERATIVE = "cooperative-sticky"


class KafkaPythonCluster:
    """What kafka-python's assignors read of ``ClusterMetadata``: topics and partition ids."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self._partitions = {topic: dict.fromkeys(range(count)) for topic, count in topics.items()}

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        """All topic names (none is internal here)."""
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """A new set of the topic's partition ids, as ``ClusterMetadata`` returns."""
        partitions = self._partitions.get(topic)
        return None if partitions is None else set(partitions.keys())


@dataclass(frozen=True)
class KafkaPythonMember:
    """A JoinGroup response member as its coordinator hands it to ``assign()``."""

    member_id: str
    group_instance_id: str | None
    metadata: Any  # ConsumerProtocolSubscription, decoded from the wire


class KafkaPython:
    """kafka-python's assignors, called as its ``ConsumerCoordinator`` calls them."""

    def __init__(self) -> None:
        assignors = "kafka.coordinator.assignors"
        self._classes: dict[str, Any] = {
            "range": importlib.import_module(f"{assignors}.range").RangePartitionAssignor,
            "roundrobin": importlib.import_module(
                f"{assignors}.roundrobin"
            ).RoundRobinPartitionAssignor,
            "sticky": importlib.import_module(
                f"{assignors}.sticky.sticky_assignor"
            ).StickyPartitionAssignor,
            COOPERATIVE: importlib.import_module(
                f"{assignors}.cooperative_sticky"
            ).CooperativeStickyAssignor,
        }
        protocol = importlib.import_module("kafka.protocol.consumer.metadata")
        self._subscription: Any = protocol.ConsumerProtocolSubscription
        self._assignment: Any = protocol.ConsumerProtocolAssignment

    def assignor(self, strategy: str) -> Any:
        """A new assignor instance (the sticky ones keep state between rounds)."""
        return self._classes[strategy]()

    def members(
        self,
        strategy: str,
        subscriptions: Mapping[str, Sequence[str]],
        owned: Mapping[str, Pairs],
        *,
        generation: int,
    ) -> list[KafkaPythonMember]:
        """Each member's subscription as its own assignor writes it and the leader decodes it."""
        members = []
        for member, topics in subscriptions.items():
            own = self.assignor(strategy)
            if member in owned:
                by_topic: dict[str, list[int]] = {}
                for topic, partition in owned[member]:
                    by_topic.setdefault(topic, []).append(partition)
                own.on_assignment(self._assignment(0, sorted(by_topic.items()), b""), generation)
            subscription = own.metadata(sorted(topics))
            if strategy == COOPERATIVE:
                # Its own metadata() writes subscription v1, which has no generation field;
                # v2 (KIP-792) carries it, as the Java consumer's does.
                subscription = self._subscription(
                    version=2,
                    topics=subscription.topics,
                    user_data=subscription.user_data,
                    owned_partitions=subscription.owned_partitions,
                    generation_id=generation if member in owned else -1,
                )
            wire = subscription.encode()
            members.append(KafkaPythonMember(member, None, self._subscription.decode(wire)))
        return members

    @staticmethod
    def answer(result: Mapping[str, Any]) -> dict[str, list[tuple[str, int]]]:
        """``{member_id: ConsumerProtocolAssignment}`` as (topic, partition) pairs."""
        return {
            member: [(tp.topic, tp.partition) for tp in assignment.partitions()]
            for member, assignment in result.items()
        }


def kafka_python_version() -> str:
    """kafka-python's version; ``PackageNotFoundError`` when it is not installed."""
    return importlib.metadata.version("kafka-python")


@functools.cache
def _kafka_python() -> KafkaPython:
    """The assignor classes, imported once per peer process."""
    return KafkaPython()


def time_kafka_python(
    strategy: str,
    topics: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    owned: Mapping[str, Pairs],
    *,
    generation: int,
    runs: int,
    budget_s: float,
) -> tuple[list[float], dict[str, list[tuple[str, int]]]]:
    """kafka-python's times of one case (``measure.timed``) and its last answer as pairs.

    Meant to run in the peer's own process (``measure.PeerProcess``).
    """
    kafka_python = _kafka_python()
    cluster = KafkaPythonCluster(topics)
    members = kafka_python.members(strategy, subscriptions, owned, generation=generation)

    def prepare() -> Any:
        assignor = kafka_python.assignor(strategy)
        return lambda: assignor.assign(cluster, members)

    times, result = timed(prepare, runs, budget_s)
    return times, KafkaPython.answer(result)
