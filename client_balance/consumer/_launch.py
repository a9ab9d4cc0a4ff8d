"""What ``start()`` builds (fetcher, meta cache, keeper, its place in the group), and batches."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from client_balance._deserializers import Deserializer
from client_balance._kafka import AdminOwner, admin_client, group_client, wait_until
from client_balance._logging import get_logger
from client_balance._metrics import Recorder, recorder_for
from client_balance._timing import Deadline
from client_balance.consumer import _reconcile
from client_balance.consumer._buffers import Batch
from client_balance.consumer._decode import Decoder
from client_balance.consumer._fetch import Fetcher
from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._join import join_group
from client_balance.consumer._keeper import PartitionKeeper, check_pins
from client_balance.consumer._meta import MetaCache
from client_balance.consumer._reconcile import Reconciler
from client_balance.consumer._redelivery import Redeliveries
from client_balance.consumer._results import (
    ConfirmResult,
    ConsumeResult,
    OffsetInfo,
    PartitionMeta,
)
from client_balance.consumer._setup import MemberSetup
from client_balance.consumer._starts import AHEAD_WAIT_S
from client_balance.consumer._targets import TargetPlanner
from client_balance.errors import (
    ClientBalanceError,
    DeserializationError,
    InvalidConfirmContextError,
    NoMessageError,
    RedeliveryLimitError,
)
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["Running", "launch"]

_log = get_logger("consumer")
_READY_POLL_S = 0.02
"""How often ``is_partitions_ready()`` looks."""

_NO_BATCH_REASONS = {
    NoMessageError.NO_PARTITION: "no partition is registered",
    NoMessageError.ALL_IN_USE: "every partition has a batch out, unconfirmed",
    NoMessageError.ALL_WAITING: "every partition is waiting for data",
}


@dataclass(frozen=True)
class Running:
    """Everything ``start()`` made; present exactly while the consumer runs or stops."""

    setup: MemberSetup
    fetcher: Fetcher
    meta: MetaCache
    keeper: PartitionKeeper
    reconciler: Reconciler
    redeliveries: Redeliveries
    recorder: Recorder
    admin: AdminOwner
    """The member's admin client: every part holds a proxy of it, closed by :meth:`close`."""
    decoder: Decoder | None = None
    """None when both deserializers are ``"bytes"``: batches go out as fetched."""

    def next_batch(self, timeout_s: float) -> ConsumeResult:
        """The next batch for ``get_message``, past batches set aside for redelivering too often.

        :class:`NoMessageError` after ``timeout_s``: 406, 407 or 408 (``why_nothing``).
        :class:`DeserializationError` for a batch that does not decode (rolled back, counted).
        """
        messages: list[Any]
        deadline = Deadline(timeout_s)  # one for the call: a batch set aside takes from it
        while True:
            batch = self.fetcher.take_batch(deadline.left_s())
            if isinstance(batch, int):
                self.fetcher.failures.raise_once()
                reason = _NO_BATCH_REASONS[batch]
                raise NoMessageError(f"no batch within {timeout_s} s: {reason}", code=batch)
            key = self.meta.holding_key(batch.partition)
            skip_until = self.redeliveries.skip_until(batch.partition, batch.start, batch.holding)
            if skip_until is not None:
                self._set_aside(batch, key, skip_until)
                continue
            if self.decoder is None:  # nothing configured: the messages as fetched
                messages = batch.messages
                break
            try:
                messages = self.decoder.decode(batch.messages)
                break
            except DeserializationError as error:
                self._failed_to_decode(batch, key, error)  # raises, unless the policy skips it
        self.recorder.delivered(batch.partition, len(batch.messages), batch.start)
        return ConsumeResult(
            key=key,
            topic=batch.partition.topic,
            partition=batch.partition.partition,
            messages=messages,
            confirm_context=f"{key}:{batch.token}",
            start_offset=batch.start,
            end_offset=batch.end,
            high=batch.high,
        )

    def _set_aside(self, batch: Batch, key: str, until: int) -> None:
        """Set aside (log, or dead-letter) and skip the batch's messages before ``until``.

        What follows ``until`` was never rolled back (it arrived since): it comes again.
        """
        whole = batch.end <= until
        fetched = batch.messages  # a fetched message always has its offset
        head = fetched if whole else [m for m in fetched if (m.offset() or 0) < until]
        try:
            self.redeliveries.set_aside(
                batch.partition, key, batch.start, min(until, batch.end), head
            )
        except BaseException:
            self.fetcher.settle(batch.partition, batch.token, consumed=False)  # comes again
            raise
        self.fetcher.settle(batch.partition, batch.token, True, until=None if whole else until)
        self.redeliveries.confirmed(batch.partition)
        self.recorder.set_aside(batch.partition)

    def _failed_to_decode(self, batch: Batch, key: str, error: DeserializationError) -> None:
        """A batch that does not decode is a rollback: counted, and past the limit the policy.

        The count going over ``max_redeliveries`` skips (or dead-letters) the raw batch now,
        as its next delivery would; else the batch is rolled back and ``error`` raised
        (:class:`RedeliveryLimitError` over the limit under ``"raise"``). A Schema Registry
        that did not answer is not the data's fault: rolled back, not counted.
        """
        if not error.retriable:
            try:
                self.redeliveries.rolled_back(
                    batch.partition, batch.start, batch.end, key, batch.holding
                )
            except RedeliveryLimitError as limit:
                self.fetcher.settle(batch.partition, batch.token, consumed=False)
                raise limit from error
            skip_until = self.redeliveries.skip_until(batch.partition, batch.start, batch.holding)
            if skip_until is not None:
                _log.warning("batch does not decode", partition=key, error=str(error))
                self._set_aside(batch, key, skip_until)
                return
        self.fetcher.settle(batch.partition, batch.token, consumed=False)
        raise error

    def offset_infos(self) -> dict[str, OffsetInfo]:
        """Where each held partition stands, by key (``offset_infos()``)."""
        self.fetcher.refresh_highs()
        infos = {}
        for at in self.fetcher.offsets():
            key = self.meta.holding_key(at.partition)
            lag = None if at.high is None else max(at.high - at.confirmed, 0)
            infos[key] = OffsetInfo(
                key, at.confirmed, at.committed, at.high, lag, at.updated_s, at.lost_to_retention
            )
        return infos

    def partition_meta(self) -> dict[str, PartitionMeta]:
        """Every configured partition, by key, with watermarks and holders (at most 1 s old)."""
        self.meta.refresh(max_age_s=1.0)
        status = self.keeper.status
        holders = status.holders() if status is not None else {}
        full = self.meta.with_watermarks(max_age_s=1.0, holders=holders)
        return {meta.key: meta for meta in full.values()}

    def wait_held(self, timeout_s: float, running: Callable[[], bool]) -> bool:
        """Wait up to ``timeout_s`` (while ``running()``) until a partition is held."""
        return wait_until(
            lambda: bool(self.fetcher.held()),
            timeout_s=timeout_s, interval_s=_READY_POLL_S, keep_waiting=running,
        )  # fmt: skip

    def in_callback(self) -> bool:
        """Whether this thread runs a hook, or a round (an ``assigner`` or strategy, say)."""
        in_round = threading.current_thread() is self.reconciler.thread
        return in_round or self.keeper.hooks.running_here()

    def stop(self) -> None:
        """Stop reconciling, release every partition (on_revoked, final commits), stop fetching."""
        self.keeper.stopping = True
        self.reconciler.stop()
        try:
            self.keeper.release_for_shutdown()  # on_revoked, then the final commits
        finally:
            self.fetcher.close(_reconcile.RELEASE_WAIT_S)  # read now: tests shorten it

    def close(self) -> None:
        """After the fetcher: leave the group, close the dead-letter producer and the metrics.

        A stopped consumer that the application keeps holds no client of Kafka after this.
        """
        try:
            if self.keeper.status is not None:
                self.keeper.status.leave()
            self.redeliveries.close()
        finally:
            self.admin.close()
            self.recorder.close()

    def confirm(
        self, context: str, partition: TopicPartition, token: int, consumed: bool,
        *, counted: bool = True,
    ) -> ConfirmResult:  # fmt: skip
        """Confirm or roll back the batch ``token`` (the redelivery limit may raise).

        A rollback not ``counted`` is no redelivery: the application never received the batch
        (the async wait for it was cancelled), so ``max_redeliveries`` must not skip it.
        """
        at = self.fetcher.settle(partition, token, consumed)
        if at is None:
            raise InvalidConfirmContextError(
                f"confirm context {context!r} names no batch that is out: it was "
                "confirmed already, or its partition was released and the batch rolled back",
                context=context,
            )
        key = self.meta.holding_key(partition)
        self.recorder.settled(partition, consumed, at.position)
        if consumed:
            self.redeliveries.confirmed(partition)
        elif counted:  # may raise: the batch is rolled back all the same
            self.redeliveries.rolled_back(partition, at.position, at.batch_end, key, at.holding)
        return ConfirmResult(key, consumed, at.position, at.committed)


def launch(
    setup: MemberSetup,
    hooks: PartitionHooks,
    pins: Mapping[TopicPartition, int],
    deserializers: tuple[Deserializer | None, Deserializer | None] = (None, None),
    metrics_registry: Any = None,
) -> Running:
    """Build the member and join its group; the reconcile thread is not started yet.

    Raises what joining raises (429/430/425/426, a group with ``subscribe()`` members) and
    :class:`PinConflictError` when a live member pinned one of ``pins`` first; nothing is
    left running then. Metrics go to ``metrics_registry`` (see ``_metrics``).
    """
    settings = setup.settings
    decoder = Decoder.of(settings, *deserializers)  # a bad one fails before anything is made
    recorder = recorder_for(settings, setup.consumer_id, metrics_registry)
    try:  # its client finds the group coordinator from now on
        fetcher = Fetcher(settings, recorder.statistics if recorder.enabled else None)
    except BaseException:
        recorder.close()
        raise
    admin_owner: AdminOwner | None = None
    gave_up = threading.Event()  # the prefetch thread may still run when start() fails
    try:
        admin_owner = _member_admin(settings)
        admin = admin_owner.lend()  # the parts hold proxies: closing the owner frees it
        fetcher.starter.admin = admin  # its queries wait behind no fetch (read_starts)
        # A closure, not a partial over the config: that would carry revealed secrets in its repr.
        fetcher.starter.second_reader = lambda: group_client(
            settings.bootstrap_servers, settings.group_id, settings.consumer_config()
        )
        meta = MetaCache.of(settings, setup.topics, fetcher.metadata, admin)
        planner = TargetPlanner(setup, meta, hooks, {})
        planner.pin(pins, {})  # their topics, before anything is written
        keeper = PartitionKeeper(setup, fetcher, meta, hooks, planner)
        reconciler = Reconciler(recorder.timed(keeper.round), settings.reconcile_interval_s)
        fetcher.on_fatal = reconciler.wake

        def fenced(is_fenced: bool) -> None:
            # From the report thread: stop fetching at once, before the lease runs out.
            if is_fenced:
                recorder.fenced()
                keeper.lose_all()
            reconciler.wake()

        # The first meta set while the group is joined, and a node's share fetched ahead. A
        # daemon thread, waited for only if joining succeeds: a refused login must fail
        # start() at once, not after the query's timeout.
        share: list[TopicPartition] = []  # a node's share, once the metadata is in
        expects = planner.expects_share
        share_known = threading.Event()
        prefetch = threading.Thread(
            target=_prefetch, args=(meta, keeper, share, share_known, gave_up),
            name="client-balance-prefetch", daemon=True,
        )  # fmt: skip
        prefetch.start()
        status = join_group(
            setup,
            lambda: setup.report(fetcher.offsets(), planner.pinned_keys()),
            on_change=reconciler.wake,
            on_fenced=fenced,
            admin=admin,
            commits_settled=fetcher.commits.settled,
            on_failure=fetcher.failures.store,  # raised by the next get_message
            # A node claims its share with its join: worth waiting for the metadata, if it
            # comes later, since claiming later costs a write and its read-back.
            claims=lambda: share if expects and share_known.wait(AHEAD_WAIT_S) else [],
        )
    except BaseException:
        gave_up.set()
        _close_all(fetcher, admin_owner, recorder)
        raise
    keeper.status = status
    status.recorder = recorder
    prefetch.join()
    try:
        check_pins(
            meta, setup.topics, pins
        )  # as pin() does: a typo must not wait for the topic to grow
        planner.pin(pins, status.pins())  # a live member that pinned one first wins
    except BaseException:
        status.leave()
        _close_all(fetcher, admin_owner, recorder)
        raise
    # No report now: the join report carries the pins already, and one written beside the first
    # round's claims would delay them; the round reports once it registered.
    fetcher.shelf.lease_ok = status.lease_ok
    if recorder.enabled:
        recorder.watch(lambda: _held_lags(fetcher))
    return Running(
        setup,
        fetcher,
        meta,
        keeper,
        reconciler,
        Redeliveries(settings),
        recorder,
        admin_owner,
        decoder,
    )


def _member_admin(settings: ClientBalanceSettings) -> AdminOwner:
    """The member's one admin client, for every question (group, status topic, metadata).

    Each new client opens its own connections, round trips before the first message. This one
    connects to every broker at once: with sparse connections librdkafka drops the bootstrap
    connection after the first metadata and holds the next one back for 10 ms, which every
    question of start() waited out (docs/design-decisions.md).
    """
    config = {"enable.sparse.connections": False, **settings.admin_config()}
    return AdminOwner(admin_client(settings.bootstrap_servers, config))


def _close_all(fetcher: Fetcher, admin: AdminOwner | None, recorder: Recorder) -> None:
    """What a start() that failed made: nothing of it outlives the call (no cycle waits)."""
    fetcher.close(0.0)
    if admin is not None:
        admin.close()
    recorder.close()


def _held_lags(fetcher: Fetcher) -> Iterable[tuple[TopicPartition, int | None, int | None]]:
    """Each held partition, its lag and committed position (for a metrics scrape).

    The high watermarks are refreshed first.
    """
    fetcher.refresh_highs()
    return [
        (at.partition, None if at.high is None else max(at.high - at.confirmed, 0), at.committed)
        for at in fetcher.offsets()
    ]


def _prefetch(
    meta: MetaCache, keeper: PartitionKeeper, share: list[TopicPartition],
    known: threading.Event, gave_up: threading.Event,
) -> None:  # fmt: skip
    try:
        _prefetch_share(meta, keeper, share, known)
    except Exception:
        if not gave_up.is_set():
            raise
        # start() failed meanwhile and closed the clients under this thread: nothing to do.


def _prefetch_share(
    meta: MetaCache, keeper: PartitionKeeper, share: list[TopicPartition], known: threading.Event
) -> None:
    try:
        try:
            meta.prefetch()
        except ClientBalanceError as error:  # the first round asks again, and reports it
            _log.info("metadata not ready at start", error=str(error))
            return
        expected = keeper.planner.expected(meta.snapshot())
        share.extend(sorted(expected))
    finally:
        known.set()  # the join waits for it, metadata or not
    try:  # a node's share is known now: fetch it while the member joins (``_starts``)
        keeper.fetch_ahead(expected)
    except ClientBalanceError as error:  # the first round starts them as it would anyway
        _log.info("could not fetch ahead", error=str(error))
