"""The partition meta set: every configured partition with its leader, refreshed on demand."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from client_balance._gc import paused_gc
from client_balance._kafka import (
    AdminClient,
    PartitionLayout,
    TopicIds,
    TopicIdsAnswer,
    Watermarks,
    topic_layouts,
    topics_metadata,
)
from client_balance._logging import get_logger
from client_balance.consumer._results import PartitionMeta
from client_balance.errors import (
    ClientBalanceError,
    PartitionNotFoundError,
    PartitionUnsubscribableError,
)
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["MetaCache"]

_log = get_logger("reconcile")
_CHECK_SHARE = 9
"""The topic-id check waits this many times its own duration before the next one."""


class MetaCache:
    """The configured partitions of the subscribed topics, as the last metadata query saw them.

    Also remembers when each partition was first seen, so that partitions appearing while the
    consumer runs can start at their beginning (see ``appeared_later``), and each topic's id,
    so that a topic deleted and created again under the same name is told apart.
    """

    def __init__(
        self,
        topics: Mapping[str, object],
        query: Callable[[], Any],
        topic_ids: Callable[[Iterable[str], Callable[[], float]], TopicIdsAnswer],
        watermarks: Callable[[Iterable[TopicPartition]], dict[TopicPartition, tuple[int, int]]],
        *,
        clock: Callable[[], float] = time.monotonic,
        warm: Callable[[], object] | None = None,
        ids_timeout_s: float = 10.0,
    ) -> None:
        self._watermarks = watermarks
        self._marks: dict[TopicPartition, tuple[int, int]] = {}
        self._marks_s: float | None = None
        self._topics = tuple(topics)
        self._query = query
        self._topic_ids = topic_ids
        self._ids: dict[str, str] = {}
        self._ids_due_s = 0.0
        self._ids_asked: tuple[float, TopicIdsAnswer] | None = None
        self._ids_timeout_s = ids_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._meta: dict[TopicPartition, PartitionMeta] = {}
        self._layouts: dict[str, PartitionLayout] = {}
        self._refreshed_s: float | None = None
        self._first_seen_s: dict[TopicPartition, float] = {}
        self._prefetched = False
        self._warm = warm
        self.prefetch_query = query
        self._unanswered: set[str] = set()  # topics the last answer lacked, kept once
        self._holding_keys: dict[TopicPartition, str] = {}
        """The key each held partition was registered under (:meth:`holding_key`)."""
        self.started_s = clock()

    def refresh(self, max_age_s: float) -> None:
        """Query metadata unless the set is younger than ``max_age_s``.

        The first call after :meth:`prefetch` takes the prefetched set instead.
        """
        if self._prefetched:
            self._prefetched = False
            return
        if self._refreshed_s is not None and self._clock() - self._refreshed_s < max_age_s:
            return
        # confluent-kafka's answer is three tracked objects per partition, dropped right after:
        # collected meanwhile, they brought on a full collection every few rounds (``_gc``).
        with paused_gc(len(self._meta)):
            self._update(self._query())

    def prefetch(self) -> None:
        """Fill the set now (through ``prefetch_query``), for the next :meth:`refresh` to take.

        ``start()`` asks while it joins the group, through its admin client: not holding the
        fetching client's lock, which a failed join would wait for. The first round follows
        within milliseconds; asking again would only put a round trip before the first message.
        """
        self._update(self.prefetch_query())
        self._prefetched = True

    def _update(self, metadata: Any) -> None:
        layouts = topic_layouts(metadata, self._topics)
        # One answer without a topic held before (a broker whose metadata lags) is not taken
        # at its word: the round would release all of it, to take it back a round later.
        for topic, layout in layouts.items():
            before = self._layouts.get(topic)
            if layout.leaders or before is None or not before.leaders:
                self._unanswered.discard(topic)
            elif topic not in self._unanswered:
                self._unanswered.add(topic)
                layouts[topic] = before
        if self._refreshed_s is not None and layouts == self._layouts:
            # Nothing moved: the set stands as it is. Building it again made a steady round at
            # 15,000 partitions spend a third of its CPU on 15,000 objects equal to the old.
            with self._lock:
                self._refreshed_s = self._clock()
            return
        meta = _meta_of(layouts)
        with self._lock:
            moved = self._refreshed_s is not None
            self._meta, self._layouts = meta, layouts
            self._refreshed_s = now = self._clock()
            for partition in meta:
                self._first_seen_s.setdefault(partition, now)
        if moved:
            self.warm()

    def warm(self) -> None:
        """Have the fetching client ask for metadata too: its cache learns what changed.

        Only on a change: the fetching client answers after the fetch long poll in flight on
        the same connection (up to ``fetch.wait.max.ms``), holding the client lock that the
        application's fetch waits for.
        """
        if self._warm is not None:
            self._warm()

    def recreated_topics(self) -> set[str]:
        """Topics whose id changed since the last check: deleted and created again.

        Their partitions count as first seen now. The first check only records the ids. The
        question is sent by one call and its answer read by a later one, so a round never
        waits for it: describing 100,000 partitions took over 10 s, the whole round's time. A
        check takes at most a tenth of the time: one answered in ``t`` seconds is not asked
        again for ``9 t``. One not answered within ``ids_timeout_s`` is logged and asked again
        later; a topic created again also shows as a position beyond the end of its log
        (``_retention``).
        """
        now = self._clock()
        recreated: set[str] = set()
        if self._ids_asked is not None:
            began, answer = self._ids_asked
            answered_s = answer.answered_s
            if answered_s is None:
                if now - began < self._ids_timeout_s:
                    return set()
                _log.warning(
                    "could not check the topics' ids",
                    error=f"no answer within {self._ids_timeout_s:g} s",
                )
                self._ids_asked = None
                self._ids_due_s = now + _CHECK_SHARE * (now - began)
                return set()
            self._ids_asked = None
            self._ids_due_s = answered_s + _CHECK_SHARE * max(answered_s - began, 0.0)
            recreated = self._compare_ids(answer.ids())
        if now >= self._ids_due_s:
            try:
                self._ids_asked = (now, self._topic_ids(self._topics, self._clock))
            except ClientBalanceError as error:
                _log.warning("could not check the topics' ids", error=str(error))
        return recreated

    def _compare_ids(self, ids: Mapping[str, str]) -> set[str]:
        recreated = {t for t, topic_id in ids.items() if self._ids.get(t, topic_id) != topic_id}
        self._ids.update(ids)
        if recreated:
            self.warm()
            now = self._clock()
            with self._lock:
                for partition in self._meta:
                    if partition.topic in recreated:
                        self._first_seen_s[partition] = now
        return recreated

    @classmethod
    def of(
        cls,
        settings: ClientBalanceSettings,
        topics: Mapping[str, object],
        query: Callable[[Sequence[str]], Any],
        admin: AdminClient,
    ) -> MetaCache:
        """The meta cache of a consumer: its ``admin`` client asks, ``query`` warms (see ``warm``).

        ``query(topics)`` asks through the fetching client, whose metadata cache must learn of
        partitions added to a topic before it can fetch them: it is asked when the partitions
        or their leaders changed, or a topic was created again, never in a steady round.
        """
        timeout_s = settings.request_timeout_s
        cluster = settings.bootstrap_servers, settings.admin_config(), timeout_s, admin
        names = sorted(topics)
        return cls(
            topics, lambda: topics_metadata(admin, names, timeout_s), TopicIds(*cluster),
            Watermarks(*cluster), warm=lambda: query(names), ids_timeout_s=timeout_s,
        )  # fmt: skip

    def with_watermarks(
        self, max_age_s: float, holders: Mapping[TopicPartition, str]
    ) -> dict[TopicPartition, PartitionMeta]:
        """The meta set with watermarks (asked at most every ``max_age_s``) and ``holders``."""
        meta = self.snapshot()
        if self._marks_s is None or self._clock() - self._marks_s >= max_age_s:
            self._marks, self._marks_s = self._watermarks(meta), self._clock()
        full = {}
        for tp, partition in meta.items():
            low, high = self._marks.get(tp, (None, None))
            full[tp] = replace(partition, low=low, high=high, holder=holders.get(tp))
        return full

    def snapshot(self) -> dict[TopicPartition, PartitionMeta]:
        """The meta set as it stands."""
        with self._lock:
            return dict(self._meta)

    def get(self, partition: TopicPartition) -> PartitionMeta | None:
        """The partition's meta, or None if the set does not have it."""
        return self._meta.get(partition)

    def key(self, partition: TopicPartition) -> str:
        """``"<leader>:<topic>:<partition>"``, with the leader last seen (-1 if unknown)."""
        meta = self._meta.get(partition)
        leader = meta.leader if meta is not None else -1
        return f"{leader}:{partition.topic}:{partition.partition}"

    def hold_keys(self, partitions: Iterable[TopicPartition]) -> None:
        """Fix the keys of partitions registered now, for as long as they are held."""
        for partition in partitions:
            self._holding_keys[partition] = self.key(partition)

    def holding_key(self, partition: TopicPartition) -> str:
        """The key ``partition`` was registered under while it is held, else :meth:`key`.

        Keys name the leader, which may move while a partition is held: a holding's hooks,
        batches and positions show one key all along, so that state kept by key is found.
        """
        return self._holding_keys.get(partition) or self.key(partition)

    def drop_keys(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget the keys of partitions released: a next holding gets the key of its time."""
        for partition in partitions:
            self._holding_keys.pop(partition, None)

    def check_registrable(self, partition: TopicPartition, shown_key: str) -> None:
        """Raise 404 if the partition is not in the meta set (asked again), 422 if no leader."""
        meta = self.get(partition)
        if meta is None:
            self.refresh(max_age_s=0.0)
            meta = self.get(partition)
        if meta is None:
            raise PartitionNotFoundError(
                f"partition {partition} is not in the partition meta set of topics "
                f"{sorted(self._topics)}",
                key=shown_key,
            )
        if not meta.subscribable:
            raise PartitionUnsubscribableError(
                f"partition {meta.key} cannot be consumed now (no leader, or its topic "
                "reports an error)",
                key=meta.key,
            )

    def appeared_later(self, partition: TopicPartition, grace_s: float) -> bool:
        """Whether ``partition`` was first seen more than ``grace_s`` after the start."""
        seen = self._first_seen_s.get(partition, self.started_s)
        return seen - self.started_s > grace_s


def _meta_of(layouts: Mapping[str, PartitionLayout]) -> dict[TopicPartition, PartitionMeta]:
    meta = {}
    for topic in sorted(layouts):
        for number, leader in enumerate(layouts[topic].leaders):
            meta[TopicPartition(topic, number)] = PartitionMeta(
                key=f"{leader}:{topic}:{number}",
                topic=topic,
                partition=number,
                leader=leader,
                subscribable=leader >= 0,
            )
    return meta
