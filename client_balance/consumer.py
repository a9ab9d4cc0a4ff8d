"""``ClientBalanceConsumer``: TubeMQ's client-balanced consumer, over Kafka.

A worker says which topics it reads, how many nodes the group has and which one it is::

    with ClientBalanceConsumer(settings) as consumer:
        consumer.start(["orders"], source_count=4, node_id=1)
        for batch in consumer.batches():
            handle(batch.messages)
            batch.confirm()

From then on it holds exactly its partitions of the group (the reconcile thread sees to it),
hands out one partition's batch at a time, and commits only confirmed positions to the
Kafka group ``group_id``: delivery is at least once, and a crash loses nothing. No Kafka group
rebalance ever runs; the group id must never be used with ``subscribe()``.

Lifecycle (TubeMQ's status machine): created -> ``start()`` -> running -> ``shutdown()``.
The calls that need a running consumer raise :class:`NotStartedError` (420) outside
"running" (``confirm`` also works while ``shutdown()`` waits for batches that are out).
See ``docs/consumer.md`` for the offset rules and the error table.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Self

import structlog

from client_balance._fetch import Fetcher, PartitionLayout
from client_balance._reconcile import Reconciler, UserTarget, strategy_target, user_target
from client_balance._results import (
    ConfirmResult,
    ConsumeResult,
    Message,
    NodeContext,
    OffsetInfo,
    PartitionMeta,
)
from client_balance.admin import group_members
from client_balance.errors import (
    ClientBalanceError,
    ConfigError,
    DuplicateNodeIdError,
    GroupInUseError,
    InconsistentSourceCountError,
    InvalidConfirmContextError,
    NoMessageError,
    NotStartedError,
    PartitionNotFoundError,
    PartitionOccupiedError,
    PartitionUnsubscribableError,
)
from client_balance.keys import (
    RESUME_OFFSET,
    TopicPartition,
    check_bootstrap_offset,
    check_topic_name,
    to_topic_partition,
)
from client_balance.settings import ClientBalanceSettings
from client_balance.status import HeldPartition, MemberReport, StatusMember
from client_balance.strategies import Member, get_strategy

__all__ = ["Assigner", "Batch", "ClientBalanceConsumer"]

_log = structlog.get_logger("client_balance.consumer")

CLIENT_VERSION = "client-balance-0.1.0"
MAX_FILTERS_PER_TOPIC = 500  # TubeMQ's limits on filter items
MAX_FILTER_LENGTH = 256
RELEASE_WAIT_S = 3.0
"""How long a release waits for a batch that is out (TubeMQ's pullRebConfirmWaitPeriodMs)."""

Assigner = Callable[[Mapping[str, PartitionMeta], NodeContext], UserTarget]
"""A user's assignment: the meta set and this node -> keys (or keys -> bootstrap offsets)."""

_CONTEXT_PARTS = 4  # <leader>:<topic>:<partition>:<token>
# ASCII digits only: str.isdigit() also takes "²", on which int() raises a bare ValueError.
_DECIMAL = re.compile(r"[0-9]+")
_LEADER = re.compile(r"-1|[0-9]+")  # a broker id, or -1 for "no leader"
_CREATED, _RUNNING, _STOPPING, _STOPPED = "created", "running", "stopping", "stopped"


class Batch:
    """A batch from :meth:`ClientBalanceConsumer.batches`: the result plus ``confirm()``."""

    __slots__ = ("_consumer", "result")

    def __init__(self, consumer: ClientBalanceConsumer, result: ConsumeResult) -> None:
        self._consumer = consumer
        self.result = result

    @property
    def messages(self) -> list[Message]:
        """The batch's messages (confluent-kafka ``Message`` objects)."""
        return self.result.messages

    @property
    def key(self) -> str:
        """The partition's key."""
        return self.result.key

    def confirm(self, consumed: bool = True) -> ConfirmResult:
        """Confirm the batch (``consumed=False`` has it delivered again)."""
        return self._consumer.confirm(self.result.confirm_context, consumed)


class ClientBalanceConsumer:
    """Consume a Kafka group's partitions with the assignment decided by the clients."""

    def __init__(
        self, settings: ClientBalanceSettings, *, assigner: Assigner | None = None
    ) -> None:
        if not isinstance(settings, ClientBalanceSettings):
            raise ConfigError(
                f"settings must be a ClientBalanceSettings, not {type(settings).__name__}"
            )
        self._settings = settings
        self._assigner = assigner
        self._consumer_id = (
            f"{settings.group_id}_{socket.gethostname()}-{os.getpid()}-"
            f"{uuid.uuid4().hex[:12]}-Balance-{CLIENT_VERSION}"
        )
        self._state = _CREATED
        self._state_lock = threading.Lock()
        self._topics: dict[str, frozenset[str] | None] = {}
        self._source_count = -1
        self._node_id = -1
        self._fetcher: Fetcher | None = None
        self._reconciler: Reconciler | None = None
        self._status: StatusMember | None = None
        self._holding = threading.RLock()
        """Serializes registering and releasing: connect() and a reconcile round may race."""
        self._halted: ClientBalanceError | None = None
        """Set when a group check stopped this member: every call raises it from then on."""
        self._meta: dict[TopicPartition, PartitionMeta] = {}
        self._meta_lock = threading.Lock()
        self._meta_at = 0.0
        self._started_at_s = 0.0
        self._first_seen: dict[TopicPartition, float] = {}
        # Partitions already started at a pinned or callback offset: re-registering them (after
        # a leader came back, say) resumes the group's position instead of going back there.
        self._bootstrapped: set[TopicPartition] = set()

    # ------------------------------------------------------------------ properties
    @property
    def settings(self) -> ClientBalanceSettings:
        """The settings given at construction."""
        return self._settings

    @property
    def consumer_id(self) -> str:
        """Unique per object: ``<group>_<host>-<pid>-<random>-Balance-<version>``."""
        return self._consumer_id

    @property
    def client_version(self) -> str:
        """The version string of this library."""
        return CLIENT_VERSION

    @property
    def source_count(self) -> int:
        """The group size given to ``start()`` (-2 before start or when not positive)."""
        return self._source_count if self._source_count > 0 else -2

    @property
    def node_id(self) -> int:
        """The node index given to ``start()`` (-2 when ``source_count`` is not positive)."""
        return self._node_id if self._source_count > 0 else -2

    def is_shutdown(self) -> bool:
        """True before ``start()`` and after ``shutdown()``."""
        return self._state != _RUNNING

    def is_filter_consume(self, topic: str) -> bool:
        """Whether ``topic`` was started with a filter set."""
        return self._topics.get(topic) is not None

    # ------------------------------------------------------------------ lifecycle
    def start(
        self,
        topics: list[str] | tuple[str, ...] | Mapping[str, set[str] | frozenset[str] | None],
        source_count: int = -1,
        node_id: int = -1,
    ) -> None:
        """Subscribe to ``topics`` as node ``node_id`` of ``source_count`` and start consuming.

        ``topics`` is a list of names, or a mapping of name -> set of filter values (messages
        whose ``filter_header`` header is not in the set are skipped; ``None`` = no filter).
        """
        parsed = _parse_topics(topics)
        if type(source_count) is not int or type(node_id) is not int:
            raise ConfigError(f"source_count={source_count!r} and node_id={node_id!r} must be ints")
        if source_count > 0 and not 0 <= node_id < source_count:
            raise ConfigError(
                f"node_id={node_id} is not allowed with source_count={source_count}; "
                f"use a node id in [0, {source_count - 1}]"
            )
        with self._state_lock:
            if self._state == _RUNNING:
                raise ConfigError("the consumer is running already; shut it down first")
            if self._state == _STOPPED:
                raise NotStartedError("the consumer has been shut down; create a new one")
            self._topics = parsed
            self._source_count, self._node_id = source_count, node_id
            self._fetcher = Fetcher(self._settings)
            try:
                self._status = self._join_group()
            except BaseException:
                self._fetcher.close(0.0)
                self._fetcher = None
                raise
            self._started_at_s = time.monotonic()
            self._state = _RUNNING
            self._reconciler = Reconciler(
                self._reconcile_round, self._settings.reconcile_interval_s
            )
        self._reconciler.start()

    def shutdown(self) -> None:
        """Release every partition (committing confirmed positions) and stop. Idempotent."""
        with self._state_lock:
            if self._state != _RUNNING:
                if self._state == _CREATED:
                    self._state = _STOPPED
                return
            self._state = _STOPPING
        assert self._reconciler is not None  # noqa: S101 - set when it started running
        assert self._fetcher is not None  # noqa: S101 - set when it started running
        try:
            self._reconciler.stop()
            self._fetcher.close(RELEASE_WAIT_S)
        finally:
            self._state = _STOPPED
            if self._status is not None:
                self._status.leave()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.shutdown()

    def _running(self, *, raise_failures: bool = True, stopping_ok: bool = False) -> Fetcher:
        allowed = (_RUNNING, _STOPPING) if stopping_ok else (_RUNNING,)
        if self._state not in allowed or self._fetcher is None:
            raise NotStartedError("the consumer is not started or has been shut down")
        if self._halted is not None and raise_failures:
            raise self._halted
        assert self._reconciler is not None  # noqa: S101 - set together with the fetcher
        if raise_failures:
            self._reconciler.raise_failure()
            self._fetcher.raise_failure()
        return self._fetcher

    # ------------------------------------------------------------------ meta
    def get_partition_meta(self) -> dict[str, PartitionMeta]:
        """Every configured partition of the subscribed topics, by key (refreshed, at most 1/s)."""
        self._running()
        self._refresh_meta(max_age_s=1.0)
        with self._meta_lock:
            return {meta.key: meta for meta in self._meta.values()}

    def is_partitions_ready(self, max_wait_s: float) -> bool:
        """Wait up to ``max_wait_s`` until at least one partition is registered."""
        fetcher = self._running()
        deadline = time.monotonic() + max_wait_s
        while not fetcher.held():
            if time.monotonic() >= deadline or self._state != _RUNNING:
                return False
            time.sleep(0.02)
        return True

    def registered_partitions(self) -> set[str]:
        """The keys of the partitions this consumer holds now."""
        fetcher = self._running()
        return {self._key(tp) for tp in fetcher.held()}

    def _key(self, partition: TopicPartition) -> str:
        meta = self._meta.get(partition)
        leader = meta.leader if meta is not None else -1
        return f"{leader}:{partition.topic}:{partition.partition}"

    def _refresh_meta(self, max_age_s: float) -> None:
        if time.monotonic() - self._meta_at < max_age_s:
            return
        assert self._fetcher is not None  # noqa: S101 - callers checked _running
        layouts = self._fetcher.layouts(self._topics)
        with self._meta_lock:
            self._meta = _meta_of(layouts)
            self._meta_at = now = time.monotonic()
            for partition in self._meta:
                self._first_seen.setdefault(partition, now)

    # ------------------------------------------------------------------ connect / disconnect
    def connect(self, key: str | TopicPartition, bootstrap_offset: int = RESUME_OFFSET) -> None:
        """Register a partition: -1 resumes the group's position, >= 0 starts (and commits) there.

        A held partition is left as it is (the offset is ignored), as in TubeMQ.
        """
        self._running()
        partition = to_topic_partition(key)
        offset = check_bootstrap_offset(bootstrap_offset)
        with self._holding:
            self._register({partition: offset}, str(key))

    def _register(self, wanted: Mapping[TopicPartition, int], shown_key: str | None = None) -> None:
        fetcher = self._running()
        for partition in wanted:
            meta = self._meta.get(partition)
            if meta is None:
                self._refresh_meta(max_age_s=0.0)
                meta = self._meta.get(partition)
            if meta is None:
                raise PartitionNotFoundError(
                    f"partition {partition} is not in the partition meta set of topics "
                    f"{sorted(self._topics)}",
                    key=shown_key or str(partition),
                )
            if not meta.subscribable:
                raise PartitionUnsubscribableError(
                    f"partition {meta.key} cannot be consumed now (no leader, or its topic "
                    "reports an error)",
                    key=meta.key,
                )

        def choose_start(
            partition: TopicPartition, committed: int | None, low: int, high: int
        ) -> tuple[int, bool]:
            offset = wanted[partition]
            if offset >= 0:
                return min(max(offset, low), high), True
            if committed is None:
                return (low if self._from_earliest(partition) else high), False
            return min(max(committed, low), high), False

        wanted = self._claim(wanted, shown_key)
        try:
            fetcher.hold({tp: self._topics[tp.topic] for tp in wanted}, choose_start)
        finally:
            self._withdraw(wanted.keys() - fetcher.held())
            if self._status is not None:
                self._status.report_soon()
        self._bootstrapped.update(tp for tp, offset in wanted.items() if offset >= 0)

    def _claim(
        self, wanted: Mapping[TopicPartition, int], shown_key: str | None
    ) -> dict[TopicPartition, int]:
        """The partitions of ``wanted`` this member may hold: claimed now, or held already."""
        assert self._fetcher is not None  # noqa: S101 - callers checked _running
        held = self._fetcher.held()
        fresh = {tp: offset for tp, offset in wanted.items() if tp not in held}
        if self._status is None or not fresh:
            return fresh
        verdicts = self._status.claim(fresh)
        lost = {tp: holder for tp, holder in verdicts.items() if holder is not None}
        if lost and shown_key is not None:
            partition, holder = next(iter(lost.items()))
            raise PartitionOccupiedError(
                f"partition {self._key(partition)} is held by the live member {holder}; it "
                "can be registered once that member releases it or its lease lapses",
                key=shown_key,
                holder=holder,
            )
        return {tp: offset for tp, offset in fresh.items() if tp not in lost}

    def _withdraw(self, partitions: set[TopicPartition]) -> None:
        if self._status is not None and partitions:
            self._status.withdraw(partitions)
            self._status.report_soon()

    def _from_earliest(self, partition: TopicPartition) -> bool:
        # Partitions that appear while we run start at their beginning, as Flink does:
        # "latest" would skip what was written before this node noticed them.
        if self._settings.start_position == "earliest":
            return True
        seen = self._first_seen.get(partition, self._started_at_s)
        return seen - self._started_at_s > self._settings.reconcile_interval_s / 2

    def disconnect(self, key: str | TopicPartition) -> None:
        """Release a partition: commit confirmed progress, roll back a batch that is out."""
        fetcher = self._running()
        partition = to_topic_partition(key)
        with self._holding:
            was_held = partition in fetcher.held()
            fetcher.release(partition, RELEASE_WAIT_S)
            if was_held:
                self._withdraw({partition})

    # ------------------------------------------------------------------ consume / confirm
    def get_message(self, timeout_s: float = 10.0) -> ConsumeResult:
        """One partition's batch; its partition stays locked until the batch is confirmed.

        Raises :class:`NoMessageError` after ``timeout_s`` with code 406 (nothing registered),
        407 (every partition waiting for data) or 408 (every partition has a batch out).
        """
        fetcher = self._running()
        batch = fetcher.take_batch(timeout_s)
        if isinstance(batch, int):
            fetcher.raise_failure()
            reason = {
                NoMessageError.NO_PARTITION: "no partition is registered",
                NoMessageError.ALL_IN_USE: "every partition has a batch out, unconfirmed",
                NoMessageError.ALL_WAITING: "every partition is waiting for data",
            }[batch]
            raise NoMessageError(f"no batch within {timeout_s} s: {reason}", code=batch)
        key = self._key(batch.partition)
        return ConsumeResult(
            key=key,
            topic=batch.partition.topic,
            partition=batch.partition.partition,
            messages=batch.messages,
            confirm_context=f"{key}:{batch.token}",
            start_offset=batch.start,
            end_offset=batch.end,
            high=batch.high,
        )

    def confirm(self, confirm_context: str, consumed: bool = True) -> ConfirmResult:
        """Confirm a batch; ``consumed=False`` rewinds to its start, so it comes again."""
        # Background failures wait for the next get_message: raising one here would leave the
        # caller unsure whether its batch was settled.
        fetcher = self._running(raise_failures=False, stopping_ok=True)
        partition, token = _parse_context(confirm_context)
        settled = fetcher.settle(partition, token, consumed)
        if settled is None:
            raise InvalidConfirmContextError(
                f"confirm context {confirm_context!r} names no batch that is out: it was "
                "confirmed already, or its partition was released and the batch rolled back",
                context=confirm_context,
            )
        current, committed = settled
        return ConfirmResult(self._key(partition), consumed, current, committed)

    def batches(self, timeout_s: float = 1.0) -> Iterator[Batch]:
        """Batches until shutdown, for ``for batch in consumer.batches(): ...; batch.confirm()``."""
        while self._state == _RUNNING:
            try:
                yield Batch(self, self.get_message(timeout_s))
            except NoMessageError:
                continue
            except NotStartedError:
                return

    def offset_infos(self) -> dict[str, OffsetInfo]:
        """Where each registered partition stands, by key."""
        fetcher = self._running()
        fetcher.refresh_highs()
        infos = {}
        for partition, confirmed, committed, high, updated in fetcher.offsets():
            key = self._key(partition)
            lag = None if high is None else max(high - confirmed, 0)
            infos[key] = OffsetInfo(key, confirmed, committed, high, lag, updated)
        return infos

    def commit(self) -> None:
        """Commit every confirmed position now (``commit="interval"`` does it periodically)."""
        self._running().flush()

    def reconcile_now(self, timeout_s: float = 30.0) -> bool:
        """Run a reconcile round now; True once it has finished within ``timeout_s``."""
        self._running()
        assert self._reconciler is not None  # noqa: S101 - set with the fetcher
        return self._reconciler.run_round(timeout_s)

    # ------------------------------------------------------------------ the status topic
    def _join_group(self) -> StatusMember:
        """Check the Kafka group for subscribe() members and join the status topic, at once.

        The two are independent round trips, so they run side by side: ``start()`` is on the
        path to the first message.
        """
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            described = pool.submit(
                group_members,
                self._settings.bootstrap_servers,
                self._settings.group_id,
                timeout_s=self._settings.request_timeout_s,
                kafka=self._settings.admin_config(),
            )
            status = self._join_status()
            try:
                members = described.result()
            except BaseException:
                status.leave()
                raise
        if members:
            status.leave()
            raise GroupInUseError(
                f"group {self._settings.group_id!r} has subscribe() members {members}; "
                "client-balanced consumers need a group id that nobody subscribes with",
                group_id=self._settings.group_id,
            )
        return status

    def _join_status(self) -> StatusMember:
        """Join the group on the status topic; 429/430 if a live member contradicts us."""
        status = StatusMember(
            self._settings,
            self._consumer_id,
            self._describe,
            on_change=self._status_changed,
            on_fenced=self._fenced_changed,
        )
        try:
            status.join()
            status.check_group(self._source_count, self._node_id)
        except BaseException:
            status.leave()
            raise
        return status

    def _describe(self) -> MemberReport:
        fetcher = self._fetcher
        held = {
            f"{tp.topic}:{tp.partition}": HeldPartition(confirmed, committed, high)
            for tp, confirmed, committed, high, _ in (fetcher.offsets() if fetcher else [])
        }
        return MemberReport(
            consumer_id=self._consumer_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            node_id=self._node_id,
            source_count=self._source_count,
            topics=tuple(sorted(self._topics)),
            strategy=self._strategy_name(),
            version=CLIENT_VERSION,
            lease_timeout_s=self._settings.lease_timeout_s,
            held=held,
        )

    def _strategy_name(self) -> str:
        # Elastic groups move partitions on every join and leave: sticky unless chosen.
        if self._source_count < 0 and "strategy" not in self._settings.model_fields_set:
            return "sticky"
        return self._settings.strategy

    def _status_changed(self) -> None:
        if self._reconciler is not None:
            self._reconciler.wake()

    def _fenced_changed(self, fenced: bool) -> None:
        # Called from the report thread: release at once, before the lease runs out.
        if fenced and self._fetcher is not None:
            for partition in sorted(self._fetcher.held()):
                self._fetcher.release(partition, 0.0, commit=False)
        self._status_changed()

    def _keep_status(self, status: StatusMember, fetcher: Fetcher) -> bool:
        """Group checks and lapsed claims before a round; False if the round must not go on."""
        try:
            status.check_group(self._source_count, self._node_id)
        except (InconsistentSourceCountError, DuplicateNodeIdError) as error:
            _log.error("stopping: the group already has a member like this", error=str(error))
            self._halted = error
            for partition in sorted(fetcher.held()):
                fetcher.release(partition, RELEASE_WAIT_S)
            status.leave()  # withdraws its claims and its report: the group sees it gone
            return False
        held = fetcher.held()
        if status.fenced:
            for partition in sorted(held):
                fetcher.release(partition, 0.0, commit=False)
            status.forget(held)
            return False
        holders = status.holders()
        # Our claims lapsed while we could not report, and someone else took over.
        taken = {tp for tp in held if holders.get(tp) != self._consumer_id}
        for partition in sorted(taken):
            _log.warning("partition taken over by another member", partition=str(partition))
            fetcher.release(partition, 0.0, commit=False)
        status.forget(taken)
        return True

    def _elastic_target(
        self, status: StatusMember, meta: Mapping[TopicPartition, PartitionMeta]
    ) -> dict[TopicPartition, int]:
        """The share of this member when the members are the live elastic reporters."""
        members = status.elastic_members()
        if self._consumer_id not in members:
            return {}
        counts: dict[str, int] = {}
        for partition in meta:
            counts[partition.topic] = max(counts.get(partition.topic, 0), partition.partition + 1)
        group = [
            Member(member_id, topics & counts.keys(), sorted(owned), generation=1)
            for member_id, (topics, owned) in sorted(members.items())
        ]
        assignment = get_strategy(self._strategy_name()).assign(counts, group)
        return dict.fromkeys(assignment.get(self._consumer_id, ()), RESUME_OFFSET)

    # ------------------------------------------------------------------ reconcile
    def _reconcile_round(self) -> None:
        with self._holding:
            self._reconcile_locked()

    def _reconcile_locked(self) -> None:
        if self._state != _RUNNING or self._fetcher is None or self._halted is not None:
            return
        fetcher = self._fetcher
        if self._status is not None and not self._keep_status(self._status, fetcher):
            return
        self._refresh_meta(max_age_s=0.0)
        with self._meta_lock:
            meta = dict(self._meta)
        target = self._target(meta, fetcher)
        held = fetcher.held()
        unusable = {tp for tp in held if tp not in meta or not meta[tp].subscribable}
        for partition in sorted((held - target.keys()) | unusable):
            fetcher.release(partition, RELEASE_WAIT_S)
            self._withdraw({partition})
        wanted = {
            tp: RESUME_OFFSET if tp in self._bootstrapped else target[tp]
            for tp in sorted(target.keys() - held)
            if tp in meta and meta[tp].subscribable
        }
        if wanted and self._state == _RUNNING:
            self._register(wanted)

    def _target(
        self, meta: Mapping[TopicPartition, PartitionMeta], fetcher: Fetcher
    ) -> dict[TopicPartition, int]:
        target: dict[TopicPartition, int] = {}
        if self._assigner is not None:
            context = NodeContext(
                self._settings.group_id,
                self._source_count,
                self._node_id,
                tuple(sorted(self._topics)),
                frozenset(self._key(tp) for tp in fetcher.held()),
            )
            answer = self._assigner({m.key: m for m in meta.values()}, context)
            target.update(user_target(answer))
        elif self._source_count < 0 and self._status is not None:
            target.update(self._elastic_target(self._status, meta))
        elif self._source_count > 0:
            counts: dict[str, int] = {}
            for partition in meta:
                counts[partition.topic] = max(
                    counts.get(partition.topic, 0), partition.partition + 1
                )
            for partition in strategy_target(
                self._settings.strategy, counts, self._source_count, self._node_id
            ):
                target[partition] = RESUME_OFFSET
        else:
            target.update({tp: RESUME_OFFSET for tp in fetcher.held() if tp in meta})
        for key, offset in self._settings.pinned.items():
            partition = to_topic_partition(key)
            if partition.topic in self._topics:
                target[partition] = offset
        return target


def _parse_topics(
    topics: object,
) -> dict[str, frozenset[str] | None]:
    if isinstance(topics, str) or not isinstance(topics, (list, tuple, Mapping)):
        raise ConfigError(
            f"topics={topics!r} is not allowed; give a list of topic names or a mapping of "
            "topic -> set of filter values"
        )
    if not topics:
        raise ConfigError("topics is empty; subscribe to at least one topic")
    parsed: dict[str, frozenset[str] | None] = {}
    items = topics.items() if isinstance(topics, Mapping) else ((t, None) for t in topics)
    for topic, filters in items:
        name = check_topic_name(topic.strip() if isinstance(topic, str) else topic)
        if filters is None or (not isinstance(filters, str) and len(filters) == 0):
            parsed[name] = None
            continue
        if isinstance(filters, str):
            raise ConfigError(
                f"filters of topic {name!r} must be a set of values, not the string {filters!r}"
            )
        values = frozenset(str(value).strip() for value in filters)
        if len(values) > MAX_FILTERS_PER_TOPIC:
            raise ConfigError(
                f"topic {name!r} has {len(values)} filter values; at most "
                f"{MAX_FILTERS_PER_TOPIC} are allowed"
            )
        for value in values:
            if not value or len(value) > MAX_FILTER_LENGTH:
                raise ConfigError(
                    f"filter value {value!r} of topic {name!r} is not allowed; use 1 to "
                    f"{MAX_FILTER_LENGTH} characters"
                )
        parsed[name] = values
    return parsed


def _parse_context(context: object) -> tuple[TopicPartition, int]:
    """``"<leader>:<topic>:<partition>:<token>"`` -> (partition, token)."""
    parts = context.split(":") if isinstance(context, str) else []
    if len(parts) == _CONTEXT_PARTS and all(parts[1:]):
        leader, topic, number, token = parts
        if _LEADER.fullmatch(leader) and _DECIMAL.fullmatch(number) and _DECIMAL.fullmatch(token):
            return TopicPartition(topic, int(number)), int(token)
    raise InvalidConfirmContextError(
        f"confirm context {context!r} is malformed; pass the confirm_context of a "
        "ConsumeResult (<leader>:<topic>:<partition>:<token>)",
        context=context,
    )


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
