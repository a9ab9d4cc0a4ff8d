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
See ``docs/consumer.md`` for the group modes, the offset rules and the error table.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from threading import current_thread
from types import TracebackType
from typing import Any, Self

from client_balance._deserializers import Deserializer
from client_balance._logging import get_logger
from client_balance._metrics import check_metrics
from client_balance.consumer._handoff import HandOff
from client_balance.consumer._hooks import PartitionHook, PartitionHooks, check_callback
from client_balance.consumer._launch import Running, launch
from client_balance.consumer._parse import (
    check_flag,
    check_wait,
    parse_context,
    parse_pins,
    parse_topics,
    resolve_mode,
)
from client_balance.consumer._results import (
    Batch,
    ConfirmResult,
    ConsumeResult,
    OffsetInfo,
    PartitionMeta,
)
from client_balance.consumer._setup import CLIENT_VERSION, Assigner, MemberSetup
from client_balance.errors import (
    CallbackError,
    ConfigError,
    NoMessageError,
    NotStartedError,
)
from client_balance.keys import (
    RESUME_OFFSET,
    TopicPartition,
    check_bootstrap_offset,
    to_topic_partition,
)
from client_balance.settings import ClientBalanceSettings, GroupMode

__all__ = ["ClientBalanceConsumer"]

_log = get_logger("consumer")

_CREATED, _RUNNING, _STOPPING, _STOPPED = "created", "running", "stopping", "stopped"
PartitionKeys = str | TopicPartition | Iterable[str | TopicPartition]
"""One partition key, or several."""


class ClientBalanceConsumer:
    """Consume a Kafka group's partitions with the assignment decided by the clients."""

    def __init__(
        self,
        settings: ClientBalanceSettings,
        *,
        assigner: Assigner | None = None,
        on_assigned: PartitionHook | None = None,
        on_revoked: PartitionHook | None = None,
        on_lost: PartitionHook | None = None,
        metrics_registry: Any = None,
    ) -> None:
        """``assigner`` decides this member's partitions; the hooks see them come and go.

        See ``docs/consumer.md`` ("Assignment callbacks", "Lifecycle hooks"), docs/metrics.md.
        """
        if not isinstance(settings, ClientBalanceSettings):
            given_type = type(settings).__name__
            raise ConfigError(f"settings must be ClientBalanceSettings, not {given_type}")
        for name, given in (("assigner", assigner), ("on_assigned", on_assigned),
                            ("on_revoked", on_revoked), ("on_lost", on_lost)):  # fmt: skip
            check_callback(name, given)
        self._metrics_registry = check_metrics(settings, metrics_registry)
        self._settings = settings
        self._assigner = assigner
        self._consumer_id = (
            f"{settings.group_id}_{socket.gethostname()}-{os.getpid()}-"
            f"{uuid.uuid4().hex[:12]}-Balance-{CLIENT_VERSION}"
        )
        self._hooks = PartitionHooks(
            self._consumer_id, on_assigned=on_assigned, on_revoked=on_revoked, on_lost=on_lost
        )
        self._state = _CREATED
        self._state_lock = threading.Lock()
        self._setup: MemberSetup | None = None
        self._run: Running | None = None
        # The first shutdown() done; the threads it may wait for, which must not wait for it.
        self._stopped, self._stoppers = threading.Event(), set[threading.Thread]()
        self._hand_off = HandOff(self._hooks.failures)  # shutdown() from a callback

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
    def mode(self) -> GroupMode | None:
        """The group mode ``start()`` resolved (None before start)."""
        return self._setup.mode if self._setup is not None else None

    @property
    def source_count(self) -> int:
        """The group size given to ``start()`` (-2 before start or outside node mode)."""
        setup = self._setup
        return setup.source_count if setup and setup.mode is GroupMode.NODE else -2

    @property
    def node_id(self) -> int:
        """The node index given to ``start()`` (-2 before start or outside node mode)."""
        setup = self._setup
        return setup.node_id if setup and setup.mode is GroupMode.NODE else -2

    def is_shutdown(self) -> bool:
        """True before ``start()`` and after ``shutdown()``."""
        return self._state != _RUNNING

    def is_filter_consume(self, topic: str) -> bool:
        """Whether ``topic`` was started with a filter set."""
        return self._setup is not None and self._setup.topics.get(topic) is not None

    # ------------------------------------------------------------------ lifecycle
    def start(
        self,
        topics: list[str] | tuple[str, ...] | Mapping[str, set[str] | frozenset[str] | None],
        source_count: int = -1,
        node_id: int = -1,
        *,
        mode: GroupMode | str | None = None,
        pinned: Mapping[str, int] | Iterable[str] | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
    ) -> None:
        """Subscribe to ``topics`` as node ``node_id`` of ``source_count`` and start consuming.

        ``topics``: names, or name -> set of filter values (messages whose ``filter_header`` header
        is not in the set are skipped; ``None`` = no filter). ``source_count > 0`` is node mode;
        ``<= 0`` leaves the assignment to the application (the ``assigner`` callback, or
        ``connect``); ``mode="elastic"`` asks for an elastic group. ``mode`` (or ``settings.mode``)
        names the mode outright. ``pinned`` (keys, or keys -> offsets) adds to ``settings.pinned``:
        held always, taken by no other member (:class:`PinConflictError` if a live one pinned
        one). Deserializers: docs/deserializers.md.
        """
        parsed = parse_topics(topics)
        resolved = resolve_mode(source_count, node_id, mode, self._settings.mode)
        pins = parse_pins(self._settings.pinned) | parse_pins(pinned or {})
        decoders = key_deserializer, value_deserializer
        setup = MemberSetup(
            self._settings, self._consumer_id, parsed, resolved,
            source_count, node_id, self._assigner,
        )  # fmt: skip
        with self._state_lock:
            if self._state == _RUNNING:
                raise ConfigError("the consumer is running already; shut it down first")
            if self._state in (_STOPPING, _STOPPED):
                raise NotStartedError("the consumer has been shut down; create a new one")
            run = self._run = launch(setup, self._hooks, pins, decoders, self._metrics_registry)
            self._setup, self._state = setup, _RUNNING
        run.reconciler.start()  # not self._run: a shutdown() may have come in between
        _log.info("consumer started", consumer_id=self._consumer_id, group=self._settings.group_id,
                  mode=resolved.value, source_count=source_count, node_id=node_id,
                  topics=sorted(parsed), pinned=sorted(str(tp) for tp in pins))  # fmt: skip

    def shutdown(self) -> None:
        """Release every partition (committing confirmed positions) and stop. Idempotent.

        Then raises a callback failure not raised yet (the final ``on_revoked``'s, say). Called
        from a hook or an ``assigner``, it returns at once and the shutdown goes on, on a thread
        of its own, once the call that runs the callback has returned: that call holds what the
        shutdown needs, and a release under way would be released again.
        """
        with self._state_lock:
            run = self._run if self._state == _RUNNING else None
            if run is None:
                self._state = _STOPPED if self._state == _CREATED else self._state
                # A hook's thread holds what the stopping thread needs: it must not wait.
                waits = self._state == _STOPPING and not (
                    current_thread() in self._stoppers or self._hooks.running_here()
                )
            else:
                stopper = current_thread()
                if run.in_callback():
                    stopper = self._hand_off.thread(lambda: self._stop(run))
                self._state, self._stoppers = _STOPPING, {stopper, run.reconciler.thread}
        if run is None:
            if waits:  # a second call returns once the first has released everything
                self._stopped.wait()
                self._hand_off.raise_once()
            return
        if stopper is not current_thread():
            stopper.start()
            return
        self._stop(run)
        run.keeper.hooks.failures.raise_once()

    def _stop(self, run: Running) -> None:
        try:
            run.stop()
        finally:
            # Dropped: its admin client (it has no close()) goes with the last reference.
            self._state, self._run = _STOPPED, None
            try:
                run.close()
            finally:
                self._stopped.set()
            _log.info("consumer stopped", consumer_id=self._consumer_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # A callback's failure (logged when it failed) must not hide the block's own error.
        with contextlib.suppress(*(() if exc is None else (CallbackError,))):
            self.shutdown()

    def _running(self, *, raise_failures: bool = True, stopping_ok: bool = False) -> Running:
        allowed = (_RUNNING, _STOPPING) if stopping_ok else (_RUNNING,)
        run = self._run
        if self._state not in allowed or run is None:
            raise NotStartedError("the consumer is not started or has been shut down")
        if raise_failures:
            if run.keeper.halted is not None:  # each call's frames only, not every call's so far
                raise run.keeper.halted.with_traceback(None)
            run.reconciler.raise_failure()
            run.keeper.hooks.failures.raise_once()
            run.fetcher.failures.raise_once()
        return run

    # ------------------------------------------------------------------ meta
    def get_partition_meta(self) -> dict[str, PartitionMeta]:
        """Every configured partition of the subscribed topics, by key (refreshed, at most 1/s).

        With leaders, low and high watermarks, and the live member holding each one.
        """
        return self._running().partition_meta()

    def is_partitions_ready(self, max_wait_s: float) -> bool:
        """Wait up to ``max_wait_s`` until at least one partition is registered."""
        timeout_s = check_wait("max_wait_s", max_wait_s)
        return self._running().wait_held(timeout_s, lambda: self._state == _RUNNING)

    def registered_partitions(self) -> set[str]:
        """The keys of the partitions this consumer holds now."""
        run = self._running()
        return {run.meta.holding_key(tp) for tp in run.fetcher.held()}

    # ------------------------------------------------------------------ connect / disconnect
    def connect(self, key: str | TopicPartition, bootstrap_offset: int = RESUME_OFFSET) -> None:
        """Register a partition: -1 resumes the group's position, >= 0 starts (and commits) there.

        A held partition is left as it is (the offset is ignored), as in TubeMQ.
        """
        run = self._running()
        partition = to_topic_partition(key)
        run.keeper.connect(partition, check_bootstrap_offset(bootstrap_offset), str(key))

    def disconnect(self, key: str | TopicPartition) -> None:
        """Release a partition: commit confirmed progress, roll back a batch that is out."""
        self._running().keeper.disconnect(to_topic_partition(key))

    def pin(self, keys: PartitionKeys, offset: int | None = None) -> None:
        """Hold these partitions from now on, whatever the strategy says; no other member will.

        ``offset`` (None: resume the group's position) is where a partition not held yet
        starts. Published in this member's report: the other members release them and leave
        them out of their targets. :class:`PinConflictError` at once if a live member pinned
        one already. Registration follows in the next round (woken now).
        """
        run = self._running()
        start = RESUME_OFFSET if offset is None else check_bootstrap_offset(offset)
        run.keeper.pin(dict.fromkeys(_partitions(keys), start))
        run.reconciler.wake()

    def unpin(self, keys: PartitionKeys) -> None:
        """Stop pinning these partitions: the strategy decides them again (from next round)."""
        run = self._running()
        run.keeper.unpin(_partitions(keys))
        run.reconciler.wake()

    # ------------------------------------------------------------------ consume / confirm
    def get_message(self, timeout_s: float = 10.0) -> ConsumeResult:
        """One partition's batch; its partition stays locked until the batch is confirmed.

        Raises :class:`NoMessageError` after ``timeout_s`` with code 406 (nothing registered),
        407 (every partition waiting for data) or 408 (every partition has a batch out).
        """
        timeout_s = check_wait("timeout_s", timeout_s)
        return self._running().next_batch(timeout_s)

    def confirm(self, confirm_context: str, consumed: bool = True) -> ConfirmResult:
        """Confirm a batch; ``consumed=False`` rewinds to its start, so it comes again."""
        # Background failures wait for the next get_message: raising one here would leave the
        # caller unsure whether its batch was settled.
        partition, token = parse_context(confirm_context)
        consumed = check_flag("consumed", consumed)
        run = self._running(raise_failures=False, stopping_ok=True)
        return run.confirm(confirm_context, partition, token, consumed)

    def _give_back(self, confirm_context: str) -> None:
        """Roll back a batch the application never received: no redelivery (``_lanes``)."""
        partition, token = parse_context(confirm_context)
        run = self._running(raise_failures=False, stopping_ok=True)
        run.confirm(confirm_context, partition, token, consumed=False, counted=False)

    def batches(self, timeout_s: float = 1.0) -> Iterator[Batch]:
        """Batches until shutdown, for ``for batch in consumer.batches(): ...; batch.confirm()``."""
        check_wait("timeout_s", timeout_s)
        while self._state == _RUNNING:
            try:
                yield Batch(self, self.get_message(timeout_s))
            except NoMessageError:
                continue
            except NotStartedError:
                return

    def offset_infos(self) -> dict[str, OffsetInfo]:
        """Where each registered partition stands, by key."""
        return self._running().offset_infos()

    def commit(self) -> None:
        """Commit every confirmed position now (``commit="interval"`` does it periodically)."""
        self._running().fetcher.flush()

    def reconcile_now(self, timeout_s: float = 30.0) -> bool:
        """Run a reconcile round now; True once it has finished within ``timeout_s``.

        From a hook or an ``assigner``: False at once, the round to follow once it returns (it
        holds what the round needs; waiting, it waited out ``timeout_s``).
        """
        timeout_s = check_wait("timeout_s", timeout_s)
        run = self._running()
        return run.reconciler.run_round(0.0 if run.in_callback() else timeout_s)


def _partitions(keys: PartitionKeys) -> list[TopicPartition]:
    if isinstance(keys, str | TopicPartition):
        return [to_topic_partition(keys)]
    return sorted({to_topic_partition(key) for key in keys})
