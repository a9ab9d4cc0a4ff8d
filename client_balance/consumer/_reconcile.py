"""The reconcile thread and the round it runs: targets, group checks, release, register.

Every ``reconcile_interval_s``, at once on start, and whenever woken, the round refreshes
metadata, computes the partitions this member should hold, releases what it holds beyond them
(and what became unsubscribable), then registers what it lacks, in that order. The target comes
from, in this order of precedence, the ``pinned`` partitions (always held), the ``assigner``
callback, or the group mode: node mode's strategy over the nodes ``0 .. source_count - 1`` and
the **full configured** partition set (so a partition without a leader does not reshuffle
anyone else's), elastic mode's strategy over the live elastic members, or, in manual mode,
whatever the application connected.

A failure of one round is logged and kept for the next user call; the thread goes on. A Kafka
error that only says the cluster is out of reach for now (a broker down, a timeout, a
coordinator moving) is logged and not raised: the next round tries again, which is how workers
ride out a broker restart without the application doing anything.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping

from client_balance._failure import FailureSlot
from client_balance._kafka import is_transient
from client_balance._logging import get_logger
from client_balance.consumer._fetch import Fetcher
from client_balance.consumer._meta import MetaCache
from client_balance.consumer._results import NodeContext, PartitionMeta
from client_balance.consumer._setup import MemberSetup, user_target
from client_balance.consumer._throttle import RefusedConnects
from client_balance.errors import (
    ClientBalanceError,
    GroupConflictError,
    PartitionNotFoundError,
    PartitionOccupiedError,
    PartitionUnsubscribableError,
)
from client_balance.keys import (
    RESUME_OFFSET,
    TopicPartition,
    to_topic_partition,
)
from client_balance.membership import StatusMember
from client_balance.settings import GroupMode
from client_balance.strategies import Member, get_strategy
from client_balance.strategies._nodes import node_share, partition_counts

__all__ = ["RELEASE_WAIT_S", "PartitionKeeper", "Reconciler"]

_log = get_logger("reconcile")

RELEASE_WAIT_S = 3.0
"""How long a release waits for a batch that is out (TubeMQ's pullRebConfirmWaitPeriodMs)."""


class Reconciler:
    """Runs ``round_once`` now, every ``interval_s``, and whenever woken, until stopped."""

    def __init__(self, round_once: Callable[[], None], interval_s: float) -> None:
        self._round_once = round_once
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._finished = 0  # rounds finished
        self._running_round = False
        self._failures = FailureSlot()
        self._thread = threading.Thread(
            target=self._run, name="client-balance-reconcile", daemon=True
        )

    def start(self) -> None:
        """Start the thread; its first round runs at once."""
        self._thread.start()

    def run_round(self, timeout_s: float) -> bool:
        """Have a round start after this call and wait for it: True if it ended in time."""
        with self._lock:
            # A round already running began before this call: wait for the one after it.
            needed = self._finished + (2 if self._running_round else 1)
            self._wake.set()
            return self._lock.wait_for(lambda: self._finished >= needed, timeout_s)

    def wake(self) -> None:
        """Have a round start soon, without waiting for it."""
        self._wake.set()

    def stop(self) -> None:
        """Stop after the current round."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def raise_failure(self) -> None:
        """Raise (once) the failure of a round since the last call."""
        self._failures.raise_once()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._wake.clear()
                self._running_round = True
            try:
                self._round_once()
            except ClientBalanceError as error:
                _log.warning("reconcile round failed", error=str(error), kind=type(error).__name__)
                if not is_transient(error):
                    self._failures.store(error)
            except Exception as error:
                _log.exception("reconcile round failed unexpectedly")
                self._failures.store(ClientBalanceError(f"reconcile round failed: {error!r}"))
            with self._lock:
                self._running_round = False
                self._finished += 1
                self._lock.notify_all()
            self._wake.wait(self._interval_s)


class PartitionKeeper:
    """What this member holds: the reconcile round, and the register/release it shares.

    ``connect()`` and ``disconnect()`` take the same lock as a round, so they never race.
    """

    def __init__(self, member: MemberSetup, fetcher: Fetcher, meta: MetaCache) -> None:
        self._member = member
        self._settings = member.settings
        self._fetcher = fetcher
        self._meta = meta
        self.status: StatusMember | None = None
        self.halted: ClientBalanceError | None = None
        """Set when a group check stopped this member: every call raises it from then on."""
        self.stopping = False
        """Set by ``shutdown()``: a round that runs on registers nothing more."""
        self._lock = threading.RLock()
        # Partitions already started at a pinned or callback offset: re-registering them (after
        # a leader came back, say) resumes the group's position instead of going back there.
        self._bootstrapped: set[TopicPartition] = set()
        # Partitions of topics deleted and created again: registered from their log start,
        # whatever was committed (positions of the old topic mean nothing in the new one).
        self._from_log_start: set[TopicPartition] = set()
        self._refused = RefusedConnects(self._settings.refused_connect_wait_s)

    # ------------------------------------------------------------------ register / release
    def connect(self, partition: TopicPartition, offset: int, shown_key: str) -> None:
        """Register one partition for the application (410 if a live member holds it).

        Asked again within ``refused_connect_wait_s`` of a 410 for it, while the same member
        still holds it: 421, as TubeMQ does (freed meanwhile, it is simply registered).
        """
        with self._lock:
            if self.status is not None:
                self._refused.check(partition, shown_key, self.status.holders)
            try:
                self._register({partition: offset}, shown_key)
            except PartitionOccupiedError as occupied:
                self._refused.refused(partition, occupied.holder)
                raise
            self._refused.registered(partition)

    def disconnect(self, partition: TopicPartition) -> None:
        """Release one partition: commit confirmed progress, roll back a batch that is out."""
        with self._lock:
            if partition in self._fetcher.held():
                self._release(partition)
            else:
                self._fetcher.release(partition, RELEASE_WAIT_S)

    def _release(self, partition: TopicPartition, *, commit: bool = True) -> None:
        # Withdrawn even when the final commit fails: the partition is no longer fetched, and a
        # claim left behind would refuse every other member with 410 until this one stops.
        # What was confirmed but not committed comes again to the next holder.
        try:
            self._fetcher.release(partition, RELEASE_WAIT_S, commit=commit)
        finally:
            self._withdraw({partition})

    def _register(self, wanted: Mapping[TopicPartition, int], shown_key: str | None = None) -> None:
        for partition in wanted:
            self._check_registrable(partition, shown_key or str(partition))

        def choose_start(
            partition: TopicPartition, committed: int | None, low: int, high: int
        ) -> tuple[int, bool]:
            offset = wanted[partition]
            if partition in self._from_log_start:
                return low, True
            if offset >= 0:
                return min(max(offset, low), high), True
            if committed is None:
                # Committed at once: a crash before the first confirm must not let the next
                # holder resolve "latest" again, later, and skip what arrived meanwhile.
                return (low if self._from_earliest(partition) else high), True
            return min(max(committed, low), high), False

        claimed = self._claim(wanted, shown_key)
        topics = self._member.topics
        try:
            starts = self._fetcher.hold({tp: topics[tp.topic] for tp in claimed}, choose_start)
            if starts:
                _log.info("partitions registered", starts={str(tp): o for tp, o in starts.items()})
        finally:
            self._withdraw(claimed.keys() - self._fetcher.held())
            if self.status is not None:
                self.status.report_soon()
        self._bootstrapped.update(tp for tp, offset in claimed.items() if offset >= 0)
        self._from_log_start.difference_update(self._fetcher.held())

    def _check_registrable(self, partition: TopicPartition, shown_key: str) -> None:
        meta = self._meta.get(partition)
        if meta is None:
            self._meta.refresh(max_age_s=0.0)
            meta = self._meta.get(partition)
        if meta is None:
            raise PartitionNotFoundError(
                f"partition {partition} is not in the partition meta set of topics "
                f"{sorted(self._member.topics)}",
                key=shown_key,
            )
        if not meta.subscribable:
            raise PartitionUnsubscribableError(
                f"partition {meta.key} cannot be consumed now (no leader, or its topic "
                "reports an error)",
                key=meta.key,
            )

    def _claim(
        self, wanted: Mapping[TopicPartition, int], shown_key: str | None
    ) -> dict[TopicPartition, int]:
        """The partitions of ``wanted`` this member may hold: claimed now, or held already."""
        held = self._fetcher.held()
        fresh = {tp: offset for tp, offset in wanted.items() if tp not in held}
        if self.status is None or not fresh:
            return fresh
        verdicts = self.status.claim(fresh)
        lost = {tp: holder for tp, holder in verdicts.items() if holder is not None}
        if lost and shown_key is not None:
            partition, holder = next(iter(lost.items()))
            raise PartitionOccupiedError(
                f"partition {self._meta.key(partition)} is held by the live member {holder}; "
                "it can be registered once that member releases it or its lease lapses",
                key=shown_key,
                holder=holder,
            )
        return {tp: offset for tp, offset in fresh.items() if tp not in lost}

    def _withdraw(self, partitions: set[TopicPartition]) -> None:
        if self.status is not None and partitions:
            self.status.withdraw(partitions)
            self.status.report_soon()

    def _from_earliest(self, partition: TopicPartition) -> bool:
        # Partitions that appear while we run start at their beginning, as Flink does:
        # "latest" would skip what was written before this node noticed them.
        if self._settings.start_position == "earliest":
            return True
        return self._meta.appeared_later(partition, self._settings.reconcile_interval_s / 2)

    def release_all(self, *, commit: bool) -> None:
        """Stop fetching everything at once (fenced, or taken over): no batch is waited for."""
        for partition in sorted(self._fetcher.held()):
            self._fetcher.release(partition, 0.0, commit=commit)

    # ------------------------------------------------------------------ the round
    def round(self) -> None:
        """One reconcile round (module docstring)."""
        with self._lock:
            if self.stopping or self.halted is not None:
                return
            if self._fetcher.failures.fatal is not None:
                self._halt(self._fetcher.failures.fatal, commit=False)
                return
            if self.status is not None and not self._keep_status(self.status):
                return
            self._meta.refresh(max_age_s=0.0)
            meta = self._meta.snapshot()
            target = self._target(meta)
            held = self._fetcher.held()
            unusable = {tp for tp in held if tp not in meta or not meta[tp].subscribable}
            for partition in sorted((held - target.keys()) | unusable):
                self._release(partition)
                _log.info("partition released", partition=str(partition))
            wanted = {
                tp: RESUME_OFFSET if tp in self._bootstrapped else target[tp]
                for tp in sorted(target.keys() - held)
                if tp in meta and meta[tp].subscribable
            }
            if wanted and not self.stopping:
                self._register(wanted)
            # After registering, so that the first round (on the way to the first message)
            # pays no extra round trip; a topic recreated in between is caught next round.
            for topic in sorted(self._meta.recreated_topics()):
                self._restart_recreated(topic)

    def _restart_recreated(self, topic: str) -> None:
        _log.warning("topic deleted and created again; reading it from its start", topic=topic)
        held = sorted(tp for tp in self._fetcher.held() if tp.topic == topic)
        for partition in held:  # its positions belong to the old topic: nothing to commit
            self._release(partition, commit=False)
        self._bootstrapped = {tp for tp in self._bootstrapped if tp.topic != topic}
        self._from_log_start.update(tp for tp in self._meta.snapshot() if tp.topic == topic)
        if held and not self.stopping:
            self._register(dict.fromkeys(held, RESUME_OFFSET))

    def _halt(self, error: ClientBalanceError, *, commit: bool) -> None:
        """Stop for good: release everything, leave the group; every call raises ``error``."""
        self.halted = error
        for partition in sorted(self._fetcher.held()):
            with contextlib.suppress(ClientBalanceError):  # the rest must go all the same
                self._fetcher.release(partition, RELEASE_WAIT_S if commit else 0.0, commit=commit)
        if self.status is not None:
            self.status.leave()  # withdraws its claims and its report: the group sees it gone

    def _keep_status(self, status: StatusMember) -> bool:
        """Group checks and lapsed claims before a round; False if the round must not go on."""
        member = self._member
        try:
            status.check_group(member.report(()))
        except GroupConflictError as error:
            _log.error("stopping: the group already has a member like this", error=str(error))
            self._halt(error, commit=True)
            return False
        held = self._fetcher.held()
        if status.fenced:
            self.release_all(commit=False)
            status.forget(held)
            return False
        holders = status.holders()
        # Our claims lapsed while we could not report, and someone else took over.
        taken = {tp for tp in held if holders.get(tp) != member.consumer_id}
        for partition in sorted(taken):
            _log.warning("partition taken over by another member", partition=str(partition))
            self._fetcher.release(partition, 0.0, commit=False)
        status.forget(taken)
        return True

    def _target(self, meta: Mapping[TopicPartition, PartitionMeta]) -> dict[TopicPartition, int]:
        member = self._member
        target: dict[TopicPartition, int] = {}
        if member.assigner is not None:
            context = NodeContext(
                self._settings.group_id,
                member.source_count,
                member.node_id,
                tuple(sorted(member.topics)),
                frozenset(self._meta.key(tp) for tp in self._fetcher.held()),
                mode=member.mode.value,
            )
            answer = member.assigner({m.key: m for m in meta.values()}, context)
            target.update(user_target(answer))
        elif member.mode is GroupMode.ELASTIC and self.status is not None:
            target.update(self._elastic_target(self.status, meta))
        elif member.mode is GroupMode.NODE:
            strategy = get_strategy(self._settings.strategy)
            counts = partition_counts(meta)
            share = node_share(strategy, counts, member.source_count, member.node_id)
            target.update(dict.fromkeys(share, RESUME_OFFSET))
        else:
            kept = (tp for tp in self._fetcher.held() if tp in meta)
            target.update(dict.fromkeys(kept, RESUME_OFFSET))
        for key, offset in self._settings.pinned.items():
            partition = to_topic_partition(key)
            if partition.topic in member.topics:
                target[partition] = offset
        return target

    def _elastic_target(
        self, status: StatusMember, meta: Mapping[TopicPartition, PartitionMeta]
    ) -> dict[TopicPartition, int]:
        """The share of this member when the members are the live elastic reporters."""
        members = status.elastic_members()
        if self._member.consumer_id not in members:
            return {}
        counts = partition_counts(meta)
        group = [
            Member(member_id, topics & counts.keys(), sorted(owned), generation=1)
            for member_id, (topics, owned) in sorted(members.items())
        ]
        assignment = get_strategy(self._member.strategy_name).assign(counts, group)
        return dict.fromkeys(assignment.get(self._member.consumer_id, ()), RESUME_OFFSET)
