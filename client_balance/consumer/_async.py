"""``AsyncClientBalanceConsumer``: the consumer for asyncio, a thin layer over the same engine.

It owns a :class:`ClientBalanceConsumer` and runs its blocking calls off the event loop
(``_lanes``); fetching, reconcile and membership are the engine's, unchanged::

    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start(["orders"], source_count=4, node_id=1)
        async for batch in consumer.batches():
            await handle(batch.messages)
            await batch.confirm()

Cancellation never commits and never loses a batch: a task cancelled while it holds a batch
rolls it back, and so does leaving ``async for`` early. See ``docs/async.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import AsyncGenerator, Iterable, Mapping
from concurrent.futures import Future
from functools import partial
from types import TracebackType
from typing import Any, Self

from client_balance._deserializers import Deserializer
from client_balance._logging import get_logger
from client_balance.consumer._consumer import ClientBalanceConsumer, PartitionKeys
from client_balance.consumer._hooks import PartitionHook
from client_balance.consumer._lanes import Lanes
from client_balance.consumer._parse import check_flag, check_wait, parse_context
from client_balance.consumer._results import (
    BatchView,
    ConfirmResult,
    ConsumeResult,
    OffsetInfo,
    PartitionMeta,
)
from client_balance.consumer._setup import Assigner
from client_balance.errors import CallbackError, ConfigError, NoMessageError, NotStartedError
from client_balance.keys import RESUME_OFFSET, TopicPartition
from client_balance.settings import ClientBalanceSettings, GroupMode

__all__ = ["AsyncBatch", "AsyncClientBalanceConsumer"]

_log = get_logger("consumer")
_OWN_TASK_ADVICE = (
    "create_task, gather, shield (and wait_for before Python 3.12) run get_message in a task "
    "that hands its batch on when it returns, so cancelling the task that uses the batch does "
    "not roll it back; bound the wait with get_message(timeout_s=...) or asyncio.timeout()"
)


class AsyncClientBalanceConsumer:
    """``ClientBalanceConsumer`` for asyncio: the same calls, awaited where they block."""

    def __init__(
        self,
        settings: ClientBalanceSettings,
        *,
        assigner: Assigner | None = None,
        on_assigned: PartitionHook | None = None,
        on_revoked: PartitionHook | None = None,
        on_lost: PartitionHook | None = None,
        metrics_registry: Any = None,
        max_threads: int = 8,
    ) -> None:
        """As ``ClientBalanceConsumer``; ``max_threads`` caps the calls that wait at once.

        The callbacks are plain functions, called from the engine's threads as in the
        synchronous consumer.
        """
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ConfigError(f"max_threads={max_threads!r} is not allowed; give an int >= 1")
        self._consumer = ClientBalanceConsumer(
            settings, assigner=assigner, on_assigned=on_assigned, on_revoked=on_revoked,
            on_lost=on_lost, metrics_registry=metrics_registry,
        )  # fmt: skip
        self._lanes = Lanes(self._consumer, max_threads)
        # A thread's future, not a task's: no loop owns it, and no task cancel reaches it.
        self._closing: Future[None] | None = None
        self._close_failure_raised = False
        self._warned_own_task = False

    # ------------------------------------------------------------------ cheap, not awaited
    @property
    def consumer(self) -> ClientBalanceConsumer:
        """The synchronous consumer this one drives (its calls block: not from the loop)."""
        return self._consumer

    @property
    def settings(self) -> ClientBalanceSettings:
        """The settings given at construction."""
        return self._consumer.settings

    @property
    def consumer_id(self) -> str:
        """Unique per object: ``<group>_<host>-<pid>-<random>-Balance-<version>``."""
        return self._consumer.consumer_id

    @property
    def client_version(self) -> str:
        """The version string of this library."""
        return self._consumer.client_version

    @property
    def mode(self) -> GroupMode | None:
        """The group mode ``start()`` resolved (None before start)."""
        return self._consumer.mode

    @property
    def source_count(self) -> int:
        """The group size given to ``start()`` (-2 before start or outside node mode)."""
        return self._consumer.source_count

    @property
    def node_id(self) -> int:
        """The node index given to ``start()`` (-2 before start or outside node mode)."""
        return self._consumer.node_id

    def is_shutdown(self) -> bool:
        """True before ``start()`` and from ``shutdown()`` on."""
        return self._consumer.is_shutdown()

    def is_filter_consume(self, topic: str) -> bool:
        """Whether ``topic`` was started with a filter set."""
        return self._consumer.is_filter_consume(topic)

    def registered_partitions(self) -> set[str]:
        """The keys of the partitions this consumer holds now."""
        return self._consumer.registered_partitions()

    # ------------------------------------------------------------------ lifecycle
    async def start(
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
        """``ClientBalanceConsumer.start``: subscribe as node ``node_id`` of ``source_count``."""
        start = partial(
            self._consumer.start, topics, source_count, node_id, mode=mode, pinned=pinned,
            key_deserializer=key_deserializer, value_deserializer=value_deserializer,
        )  # fmt: skip
        await self._lanes.call(start)

    async def shutdown(self) -> None:
        """Roll back what cancelled tasks left, then ``ClientBalanceConsumer.shutdown``.

        Idempotent. The shutdown runs on a thread of the loop's default executor to its end,
        whatever happens to its awaiters (cancelled, or every task cancelled as ``asyncio.run``
        ends, which waits for it): awaiting again waits for the same shutdown. What it fails
        with is raised once, to the first awaiter that sees it, as the sync shutdown() does.
        """
        if self._closing is None:
            self._closing = Future()
            self._closing.set_running_or_notify_cancel()  # nothing can cancel it from now on
            try:
                asyncio.get_running_loop().run_in_executor(None, self._close, self._closing)
            except RuntimeError:  # the executor is shut down: a thread of its own, not a hang
                closer = threading.Thread(target=self._close, args=(self._closing,),
                                          name="client-balance-async-shutdown")  # fmt: skip
                closer.start()
        try:
            await asyncio.shield(asyncio.wrap_future(self._closing))
        except Exception:
            if not self._close_failure_raised:
                self._close_failure_raised = True
                raise

    def _close(self, done: Future[None]) -> None:
        # One blocking sequence on a thread, not a task: a task cancelled half-way (asyncio.run
        # cancels every task left) never shut the engine down, and left every awaiter cancelled.
        try:
            try:
                self._lanes.drain()  # the rollbacks asked for so far reach the engine first
                # Not on a lane: every calls thread may be waiting in get_message, and the
                # batches out must stay confirmable on the settles lane while shutdown waits.
                self._consumer.shutdown()
            finally:
                self._lanes.close()
        except BaseException as error:  # whatever it is, the awaiters must not wait for ever
            done.set_exception(error)
        else:
            done.set_result(None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # A callback's failure (logged when it failed) must not hide the block's own error.
        with contextlib.suppress(*(() if exc is None else (CallbackError,))):
            await self.shutdown()

    # ------------------------------------------------------------------ consume / confirm
    async def get_message(self, timeout_s: float = 10.0) -> ConsumeResult:
        """``ClientBalanceConsumer.get_message``: one partition's batch, held by this task.

        If the task is cancelled, here or before it settled the batch, the batch is rolled
        back; one that arrives after the wait was cancelled is rolled back too.
        """
        wait_s = check_wait("timeout_s", timeout_s)
        if not self._warned_own_task:  # looked at until it warned once
            task = asyncio.current_task()
            coroutine = task.get_coro() if task is not None else None
            # A task that is only this call ends by returning the batch, which hands it on: a
            # cancel of the task that uses it can no longer roll it back (docs/async.md).
            if getattr(coroutine, "cr_frame", None) is inspect.currentframe():
                self._warned_own_task = True
                _log.warning("get_message awaited in a task of its own", advice=_OWN_TASK_ADVICE)
        return await self._lanes.take(wait_s)

    async def confirm(self, confirm_context: str, consumed: bool = True) -> ConfirmResult:
        """``ClientBalanceConsumer.confirm``; ``consumed=False`` has the batch come again.

        Cancelled before the engine took the confirm, the batch is rolled back instead.
        """
        # Checked here, before the batch stops being this task's: a refused call settles nothing.
        parse_context(confirm_context)
        return await self._lanes.settle(confirm_context, check_flag("consumed", consumed))

    async def batches(self, timeout_s: float = 1.0) -> AsyncGenerator[AsyncBatch, None]:
        """Batches until shutdown, for ``async for batch in consumer.batches(): ...``.

        Leaving the loop early (``break``, ``return``, an exception, a cancel) rolls back the
        batch of the iteration it left once, unless it was settled, even if the task ends before
        Python closes the generator; ``contextlib.aclosing`` makes that happen on the spot.
        """
        timeout_s = check_wait("timeout_s", timeout_s)
        while not self._consumer.is_shutdown():
            try:
                result = await self._lanes.take(timeout_s)
            except NoMessageError:
                continue
            except NotStartedError:
                return
            # The generator owns the batch while it is out at the yield: the task that iterates
            # may end before Python closes a generator it left (break, return).
            self._lanes.lend(result.confirm_context)
            try:
                yield AsyncBatch(self, result)
            except BaseException:  # GeneratorExit when the loop is left, or a throw()
                self._lanes.abandon(result.confirm_context)
                raise
            self._lanes.resumed(result.confirm_context)

    # ------------------------------------------------------------------ the other calls
    async def get_partition_meta(self) -> dict[str, PartitionMeta]:
        """``ClientBalanceConsumer.get_partition_meta``."""
        return await self._lanes.call(self._consumer.get_partition_meta)

    async def is_partitions_ready(self, max_wait_s: float) -> bool:
        """``ClientBalanceConsumer.is_partitions_ready``: wait for a held partition."""
        return await self._lanes.call(self._consumer.is_partitions_ready, max_wait_s)

    async def connect(
        self, key: str | TopicPartition, bootstrap_offset: int = RESUME_OFFSET
    ) -> None:
        """``ClientBalanceConsumer.connect``: hold a partition now."""
        await self._lanes.call(self._consumer.connect, key, bootstrap_offset)

    async def disconnect(self, key: str | TopicPartition) -> None:
        """``ClientBalanceConsumer.disconnect``: release a partition."""
        await self._lanes.call(self._consumer.disconnect, key)

    async def pin(self, keys: PartitionKeys, offset: int | None = None) -> None:
        """``ClientBalanceConsumer.pin``."""
        await self._lanes.call(self._consumer.pin, keys, offset)

    async def unpin(self, keys: PartitionKeys) -> None:
        """``ClientBalanceConsumer.unpin``."""
        await self._lanes.call(self._consumer.unpin, keys)

    async def offset_infos(self) -> dict[str, OffsetInfo]:
        """``ClientBalanceConsumer.offset_infos``."""
        return await self._lanes.call(self._consumer.offset_infos)

    async def commit(self) -> None:
        """``ClientBalanceConsumer.commit``: commit every confirmed position now."""
        await self._lanes.call(self._consumer.commit)

    async def reconcile_now(self, timeout_s: float = 30.0) -> bool:
        """``ClientBalanceConsumer.reconcile_now``: run a reconcile round now."""
        return await self._lanes.call(self._consumer.reconcile_now, timeout_s)


class AsyncBatch(BatchView):
    """A batch from :meth:`AsyncClientBalanceConsumer.batches`: the result, awaited settles."""

    __slots__ = ("_consumer",)

    def __init__(self, consumer: AsyncClientBalanceConsumer, result: ConsumeResult) -> None:
        super().__init__(result)
        self._consumer = consumer

    async def confirm(self, consumed: bool = True) -> ConfirmResult:
        """Confirm the batch (``consumed=False`` has it delivered again)."""
        return await self._consumer.confirm(self.result.confirm_context, consumed)

    async def rollback(self) -> ConfirmResult:
        """Roll the batch back: ``confirm(consumed=False)``, its messages come again."""
        return await self.confirm(consumed=False)
