"""Topics as the cluster describes them: partition leaders, topic ids, watermarks."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    OffsetSpec,
)

from client_balance._kafka._answers import answer_of
from client_balance._kafka._clients import admin_client, kafka_tp
from client_balance._kafka._errors import timed_out
from client_balance._kafka._retry import wait_until
from client_balance.keys import TopicPartition
from client_balance.settings import KafkaValue

__all__ = [
    "PartitionLayout",
    "TopicIds",
    "TopicIdsAnswer",
    "Watermarks",
    "ask_watermarks",
    "described",
    "topic_layouts",
]


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    """A topic's partitions as metadata reports them: leader per partition (-1 = none)."""

    leaders: tuple[int, ...]


def topic_layouts(metadata: Any, topics: Iterable[str]) -> dict[str, PartitionLayout]:
    """Partition leaders per topic from a metadata answer; an unknown topic has no partitions."""
    layouts = {}
    for topic in topics:
        found = metadata.topics.get(topic)
        if found is None or (found.error is not None and not found.partitions):
            layouts[topic] = PartitionLayout(())
            continue
        count = max(found.partitions) + 1 if found.partitions else 0
        leaders = [-1] * count
        for number, partition in found.partitions.items():
            leaders[number] = -1 if partition.error is not None else partition.leader
        layouts[topic] = PartitionLayout(tuple(leaders))
    return layouts


class _LazyAdmin:
    """An admin client made on the first question.

    A consumer that never asks (or asks only after its first registration) pays nothing for it
    on its way to the first message.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        kafka: Mapping[str, KafkaValue],
        timeout_s: float,
        client: AdminClient | None = None,
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._kafka = kafka
        self._timeout_s = timeout_s
        self._client = client  # a consumer's own admin client, connected already

    @property
    def _admin(self) -> AdminClient:
        if self._client is None:
            self._client = admin_client(self._bootstrap_servers, self._kafka)
        return self._client


class TopicIds(_LazyAdmin):
    """Kafka's topic ids (a topic deleted and created again gets a new one), asked lazily."""

    def __call__(self, topics: Iterable[str], clock: Callable[[], float]) -> TopicIdsAnswer:
        """Ask for the id of each of ``topics`` now; the answer is read once it is in.

        Describing a topic lists every partition of it: 100,000 partitions did not come back
        within 10 s on a loaded machine, so nobody should wait for this answer.
        """
        names = sorted(topics)
        if not names:
            return TopicIdsAnswer({}, clock)
        futures = self._admin.describe_topics(
            TopicCollection(names), request_timeout=self._timeout_s
        )
        return TopicIdsAnswer(futures, clock)


class TopicIdsAnswer:
    """The answer to a topic-id question: ``answered_s`` (by ``clock``) once every topic's is in."""

    def __init__(
        self, futures: Mapping[str, concurrent.futures.Future[Any]], clock: Callable[[], float]
    ) -> None:
        self._futures = dict(futures)
        self._clock = clock
        self._lock = threading.Lock()
        self._left = len(self._futures)
        self.answered_s: float | None = clock() if not self._futures else None
        """When the last topic's answer came (librdkafka's thread stamps it); None until then."""
        for future in self._futures.values():
            future.add_done_callback(self._one_done)

    def _one_done(self, _: object) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self.answered_s = self._clock()

    def ids(self) -> dict[str, str]:
        """Topic -> id of each topic that exists (read once ``answered_s`` is set)."""
        ids = {}
        for name, future in sorted(self._futures.items()):
            try:
                ids[name] = str(answer_of(future, 0).topic_id)
            except (KafkaException, concurrent.futures.TimeoutError):
                continue  # gone (or not authorized, or not answered): nothing to compare
        return ids


class Watermarks(_LazyAdmin):
    """Low and high watermarks of many partitions in two requests (ListOffsets), lazily."""

    def __call__(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Partition -> (low, high) for each of ``partitions`` that answers."""
        return ask_watermarks(self._admin, sorted(partitions), self._timeout_s)()


def ask_watermarks(
    admin: AdminClient,
    partitions: Sequence[TopicPartition],
    timeout_s: float,
    *,
    read_committed_only: bool = False,
) -> Callable[[], dict[TopicPartition, tuple[int, int]]]:
    """Send both ListOffsets (log start, log end) of ``partitions`` now; a call that waits.

    The call returns partition -> (low, high) for each partition that answered: one with no
    leader now, say, has no watermarks to give. ``read_committed_only``: the high watermark is
    the last stable offset, as a ``read_committed`` consumer sees the log's end.
    """
    if not partitions:
        return dict
    level = (
        IsolationLevel.READ_COMMITTED if read_committed_only else IsolationLevel.READ_UNCOMMITTED
    )
    # confluent-kafka ships these constructors without annotations.
    specs = (OffsetSpec.earliest(), OffsetSpec.latest())  # type: ignore[no-untyped-call]
    asked = [
        admin.list_offsets(
            {kafka_tp(tp): spec for tp in partitions},
            isolation_level=level,
            request_timeout=timeout_s,
        )
        for spec in specs
    ]

    def answers() -> dict[TopicPartition, tuple[int, int]]:
        low, high = (_offsets_answered(futures, timeout_s) for futures in asked)
        return {tp: (low[tp], high[tp]) for tp in partitions if tp in low and tp in high}

    return answers


def _offsets_answered(
    futures: Mapping[Any, concurrent.futures.Future[Any]], timeout_s: float
) -> dict[TopicPartition, int]:
    answered = {}
    for asked, future in futures.items():
        try:
            offset = answer_of(future, timeout_s).offset
        except KafkaException:
            continue
        except concurrent.futures.TimeoutError:
            raise timed_out("listing offsets", timeout_s) from None
        answered[TopicPartition(asked.topic, asked.partition)] = int(offset)
    return answered


def described(client: Any, wanted: Callable[[str], bool], timeout_s: float) -> Any:
    """The cluster's metadata once every topic ``wanted`` names is described (or ``timeout_s``).

    A topic that exists but cannot be described now (no leader yet) is asked again, within
    ``timeout_s``: skipped as missing, a stream would take it for deleted (data loss).
    """
    last: list[Any] = []

    def answer() -> Any:
        metadata = client.list_topics(timeout=timeout_s)
        last[:] = [metadata]
        for name, topic in metadata.topics.items():
            error = topic.error
            absent = error is None or error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            if not absent and wanted(name):
                return None
        return metadata

    return wait_until(answer, timeout_s=timeout_s) or last[0]  # at the timeout: the last answer
