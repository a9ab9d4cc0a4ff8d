"""What a member holds: the reconcile round, and the register/release paths it shares.

Every path that starts or stops holding a partition runs through here, so the lifecycle hooks
see every change: ``on_assigned`` after a registration, ``on_revoked`` after the partitions'
batches settled and before their final commit, ``on_lost`` when they were taken away with
nothing committed. ``connect()``, ``disconnect()`` and the round take one lock, so they never
race; fencing (from the report thread) only stops fetching and leaves its ``on_lost`` to the
next round, so that hooks run from the reconcile thread or the application's own calls.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterable, Mapping

from client_balance._logging import get_logger
from client_balance.consumer import _reconcile
from client_balance.consumer._arrivals import Arrivals
from client_balance.consumer._claiming import claim
from client_balance.consumer._fetch import Fetcher
from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._meta import MetaCache
from client_balance.consumer._setup import MemberSetup
from client_balance.consumer._starts import StartRules
from client_balance.consumer._targets import TargetPlanner, check_pin_topics
from client_balance.consumer._throttle import RefusedConnects
from client_balance.errors import (
    ClientBalanceError,
    GroupConflictError,
    NotStartedError,
    PartitionNotFoundError,
    PartitionOccupiedError,
    PinConflictError,
)
from client_balance.keys import RESUME_OFFSET, TopicPartition
from client_balance.membership import StatusMember

__all__ = ["PartitionKeeper", "check_pins"]

_log = get_logger("reconcile")


class PartitionKeeper:
    """What this member holds: the reconcile round, and the register/release it shares."""

    def __init__(
        self,
        member: MemberSetup,
        fetcher: Fetcher,
        meta: MetaCache,
        hooks: PartitionHooks,
        planner: TargetPlanner,
    ) -> None:
        self._member = member
        self._settings = member.settings
        self._fetcher = fetcher
        self._meta = meta
        self.hooks = hooks
        self.planner = planner
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
        self._lost_lock = threading.Lock()
        self._lost_pending: dict[str, int] = {}  # fenced: on_lost waits for the next round
        self._arrivals = Arrivals(member.consumer_id)

    # ------------------------------------------------------------------ register / release
    def connect(self, partition: TopicPartition, offset: int, shown_key: str) -> None:
        """Register one partition for the application (410 if a live member holds it).

        Asked again within ``refused_connect_wait_s`` of a 410 for it, while the same member
        still holds it: 421, as TubeMQ does (freed meanwhile, it is simply registered). A
        partition another live member pinned: :class:`PinConflictError`.
        """
        with self._lock:
            if self.status is not None:
                owner = self.status.pins().get(partition)
                if owner not in (None, self._member.consumer_id):
                    raise PinConflictError(
                        f"partition {self._meta.key(partition)} is pinned by the live member "
                        f"{owner}; it cannot be registered here while that pin stands",
                        key=shown_key,
                        holder=owner,
                    )
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
                self._release({partition})
            else:  # fetched ahead at most: never claimed, so nothing of it is ours to commit
                self._fetcher.release([partition], _reconcile.RELEASE_WAIT_S, commit=False)

    def _release(
        self,
        partitions: Iterable[TopicPartition],
        *,
        commit: bool = True,
        wait_s: float | None = None,
        withdraw: bool = True,
    ) -> None:
        """Settle the partitions' batches, run ``on_revoked`` (or ``on_lost``), commit, unassign.

        Each is withdrawn even when its final commit fails: it is no longer fetched, and a
        claim left behind would refuse every other member with 410 until this one stops. What
        was confirmed but not committed comes again to the next holder (``withdraw=False``:
        the caller's ``leave()`` does).
        """
        chosen = sorted(set(partitions) & self._fetcher.held())
        if not chosen:
            return
        wait = _reconcile.RELEASE_WAIT_S if wait_s is None else wait_s
        written = False  # a flush that failed: committing would pass a state not written
        try:
            confirmed = self._fetcher.quiesce(chosen, wait)
            positions = {self._meta.holding_key(tp): at for tp, at in confirmed.items()}
            if commit:
                written = self.hooks.revoked(positions)
            else:
                self.hooks.lost(positions)
        finally:  # a Ctrl-C in the hook too: released, without the commit, then raised on
            try:
                self._fetcher.release(chosen, 0.0, commit=written)
            finally:
                self._meta.drop_keys(chosen)
                if withdraw:
                    self._withdraw(set(chosen))

    def _register(self, wanted: Mapping[TopicPartition, int], shown_key: str | None = None) -> None:
        self._report_lost()  # a fence's on_lost still owed: before a new holding's on_assigned
        if self.stopping:  # that hook, say, called shutdown()
            if shown_key is not None:
                raise NotStartedError(f"{shown_key} is not registered: the consumer stops")
            return
        for partition in wanted:
            self._meta.check_registrable(partition, shown_key or str(partition))
        claimed = self._claim(wanted, shown_key)
        try:
            starts = self._fetcher.hold(
                {tp: self._member.topics[tp.topic] for tp in claimed},
                StartRules(wanted, frozenset(self._from_log_start), self._from_earliest),
                skip_unreadable=shown_key is None,  # what the application asks starts, or raises
            )
            if starts:
                _log.info("partitions registered", starts={str(tp): o for tp, o in starts.items()})
        finally:
            self._withdraw(claimed.keys() - self._fetcher.held())
            if self.status is not None:
                self.status.report_soon()
        # Only what started: a partition left out as unreadable keeps its offset for next round.
        self._bootstrapped.update(
            tp for tp, offset in claimed.items() if offset >= 0 and tp in starts
        )
        self._from_log_start.difference_update(self._fetcher.held())
        self._meta.hold_keys(starts)
        try:
            self.hooks.assigned({self._meta.holding_key(tp): at for tp, at in starts.items()})
        finally:
            self._fetcher.announce(starts)

    def fetch_ahead(self, expected: Mapping[TopicPartition, int]) -> None:
        """Fetch the share a node expects while it still joins (``_starts``); best effort."""
        topics = self._member.topics
        rules = StartRules(expected, frozenset(), self._from_earliest)
        self._fetcher.fetch_ahead({tp: topics[tp.topic] for tp in sorted(expected)}, rules)

    def _claim(
        self, wanted: Mapping[TopicPartition, int], shown_key: str | None
    ) -> dict[TopicPartition, int]:
        """The partitions of ``wanted`` this member may hold: claimed now, or held already."""
        return claim(self.status, self._fetcher.held(), wanted, shown_key, self._key)

    def _key(self, partition: TopicPartition) -> str:
        return self._meta.key(partition)

    def _withdraw_strays(self) -> None:
        # A claim made with the join on what the round did not register (a partition another
        # live member pinned, say) would keep every other member from it all along.
        if self.status is not None:
            self._withdraw(self.status.claimed() - self._fetcher.held())

    def _withdraw(self, partitions: set[TopicPartition]) -> None:
        # A commit of theirs given up may land yet, after a new owner's: the claims wait.
        if self.status is not None and partitions and self._fetcher.commits.settled(partitions):
            self.status.withdraw(partitions)
            self.status.report_soon()

    def _from_earliest(self, partition: TopicPartition) -> bool:
        # Partitions that appear while we run start at their beginning, as Flink does:
        # "latest" would skip what was written before this node noticed them.
        return self._settings.start_position == "earliest" or self._meta.appeared_later(
            partition, self._settings.reconcile_interval_s / 2
        )

    def pin(self, wanted: Mapping[TopicPartition, int]) -> None:
        """Pin partitions of the meta set, publish the pins (see ``TargetPlanner.pin``)."""
        check_pin_topics(self._member.topics, wanted)  # before asking the cluster: a 400
        check_pins(self._meta, self._member.topics, wanted)
        status = self.status
        with self._lock:  # not while a round registers them: their offset would be lost
            held = self._fetcher.held()
            self._bootstrapped.difference_update(set(wanted) - held)  # a new start
            # One held already keeps its position, now and when it is registered again.
            self._bootstrapped.update(tp for tp in wanted if tp in held)
            self.planner.pin(wanted, status.pins() if status is not None else {})
        if status is not None:
            status.report_soon()

    def unpin(self, partitions: Iterable[TopicPartition]) -> None:
        """Remove pins and publish that."""
        self.planner.unpin(partitions)
        if self.status is not None:
            self.status.report_soon()

    def lose_all(self) -> None:
        """Stop fetching everything at once, committing nothing (fenced): no batch waited for.

        Called from the report thread, which must not wait on the application: ``on_lost``
        runs in the next round.
        """
        dropped = _drop(self._fetcher, self._meta, self._fetcher.held(), at_once=True)
        with self._lost_lock:
            self._lost_pending.update(dropped)

    def _report_lost(self) -> None:
        with self._lost_lock:
            lost, self._lost_pending = self._lost_pending, {}
        self.hooks.lost(lost)

    def release_for_shutdown(self) -> None:
        """Release everything (hooks, then final commits), then leave in one write (``leave``)."""
        with self._lock:
            self._report_lost()
            held = self._fetcher.held()
            try:
                self._release(held, withdraw=self.status is None)
            finally:
                if self.status is not None:
                    _leave(self.status, self._fetcher, held)

    # ------------------------------------------------------------------ the round
    def round(self, full: bool = True) -> None:
        """One reconcile round (module docstring of ``_reconcile``); light unless ``full``."""
        with self._lock, self._fetcher.dropping_ahead():
            self.hooks.round_number += 1
            self._report_lost()
            if self.stopping or self.halted is not None:
                return
            if self._fetcher.failures.fatal is not None:
                self._halt(self._fetcher.failures.fatal, commit=False)
                return
            if self.status is not None and not self._keep_status(self.status):
                return
            # A light round trusts the last full round's metadata (at most an interval old).
            self._meta.refresh(max_age_s=0.0 if full else self._settings.reconcile_interval_s)
            meta = self._meta.snapshot()
            held = self._fetcher.held()
            target = self.planner.target(meta, held, self.status)
            # An offset for one held already is not used now, nor when it comes back later.
            self._bootstrapped.update(tp for tp in held & target.keys() if target[tp] >= 0)
            unusable = {tp for tp in held if tp not in meta or not meta[tp].subscribable}
            released = (held - target.keys()) | unusable
            self._release(released)
            for partition in sorted(released):
                _log.info("partition released", partition=str(partition))
            wanted = {
                tp: RESUME_OFFSET if tp in self._bootstrapped else target[tp]
                for tp in sorted(target.keys() - held)
                if tp in meta and meta[tp].subscribable
            }
            if wanted and not self.stopping:
                self._register(wanted)
            self._withdraw_strays()
            # After registering, so that the first round (on the way to the first message)
            # pays no extra round trip; a topic recreated in between is caught next round.
            # Light rounds leave it to the full ones: it is another query of the cluster.
            for topic in sorted(self._meta.recreated_topics() if full else ()):
                self._restart_recreated(topic)

    def _restart_recreated(self, topic: str) -> None:
        _log.warning("topic deleted and created again; reading it from its start", topic=topic)
        held = sorted(tp for tp in self._fetcher.held() if tp.topic == topic)
        self._release(held, commit=False)  # its positions belong to the old topic
        self._from_log_start.update(held)  # not all: others restart theirs; pins stay applied
        if held and not self.stopping:
            self._register(dict.fromkeys(held, RESUME_OFFSET))

    def _halt(self, error: ClientBalanceError, *, commit: bool) -> None:
        """Stop for good: release everything, leave the group; every call raises ``error``."""
        self.halted = error
        held = self._fetcher.held()
        with contextlib.suppress(ClientBalanceError):  # the rest must go all the same
            self._release(held, commit=commit, wait_s=None if commit else 0.0)
        if self.status is not None:  # its claims and report withdrawn: the group sees it gone
            _leave(self.status, self._fetcher, held)

    def _keep_status(self, status: StatusMember) -> bool:
        """Group checks and lapsed claims before a round; False if the round must not go on."""
        member = self._member
        try:
            status.check_group(member.report((), self.planner.pinned_keys()))
        except GroupConflictError as error:
            _log.error("stopping: the group already has a member like this", error=str(error))
            self._halt(error, commit=True)
            return False
        held = self._fetcher.held()
        # The clock too, not only the report thread's flag: after a process pause this round
        # may wake first, and must not revoke as its own what the others took meanwhile.
        if not status.lease_ok():
            if status.lease_in_doubt():  # one answer may be off: the report thread asks again
                return False
            self.lose_all()
            self._report_lost()  # its claims stay listed: withdrawn once reports land again
            return False
        holders = status.holders()
        # Our claims lapsed while we could not report, and someone else took over.
        taken = {tp for tp in held if holders.get(tp) != member.consumer_id}
        dropped = _drop(self._fetcher, self._meta, taken)  # before the log, which may be slow
        for partition in sorted(taken):
            _log.warning("partition taken over by another member", partition=str(partition))
        self.hooks.lost(dropped)
        status.forget(taken)
        if self._arrivals.returned(status.live_reports(), status.known_members()) and held:
            self._fetcher.commits.recommit_soon()  # over a late commit of theirs: see _arrivals
        return True


def _leave(status: StatusMember, fetcher: Fetcher, released: Iterable[TopicPartition]) -> None:
    """Leave the group once the commits of its claims had their answer, or in time.

    Its claims go with the leave: those of ``released``, and those an earlier release kept
    because their final commit waited for its answer. Such a commit answered only after the
    leave could land over the next holder's commits, its position going back (the review of
    2026-11-29). ``settled`` waits for the one in flight (``request_timeout_s`` at most).
    """
    claims = {*released, *status.claimed()}
    if not fetcher.commits.settled(claims):
        _log.warning(
            "leaving with a final commit unanswered: should it land later, it may set the "
            "group's offsets behind the next holder's",
            partitions=sorted(str(tp) for tp in claims),
        )
    status.leave()


def _drop(
    fetcher: Fetcher,
    meta: MetaCache,
    partitions: Iterable[TopicPartition],
    *,
    at_once: bool = False,
) -> dict[str, int]:
    """Release ``partitions`` at once, committing nothing: key -> last confirmed position.

    ``at_once`` (fenced): without waiting for the client lock, which a commit in flight from
    before the fence may hold; otherwise a commit in flight ends first, and none comes after.
    """
    chosen = sorted(partitions)
    confirmed = fetcher.quiesce(chosen, 0.0)
    if at_once:
        fetcher.let_go(chosen)
    else:
        fetcher.release(chosen, 0.0, commit=False)
    dropped = {meta.holding_key(tp): at for tp, at in confirmed.items()}
    meta.drop_keys(chosen)
    return dropped


def check_pins(meta: MetaCache, topics: Iterable[str], wanted: Collection[TopicPartition]) -> None:
    """Raise ``PartitionNotFoundError`` (404) for a pin outside the partition meta set."""
    if any(meta.get(tp) is None for tp in wanted):
        meta.refresh(max_age_s=0.0)  # right after start() the first round may not have
    for partition in sorted(wanted):
        if meta.get(partition) is None:
            raise PartitionNotFoundError(
                f"cannot pin {partition}: it is not in the partition meta set of topics "
                f"{sorted(topics)}",
                key=str(partition),
            )
