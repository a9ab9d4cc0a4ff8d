"""The threads that run a consumer's blocking calls for asyncio, and the batches tasks hold.

The engine (``ClientBalanceConsumer``) is thread-safe in every call, so asyncio only has to run
its calls off the event loop. Two lanes do that, per consumer:

- ``calls``, a pool of up to ``max_threads`` threads for the calls that wait (``get_message``,
  ``start``, ``connect`` ...). Threads are made on demand and an idle one is reused, so a task
  that loops ``get_message`` / ``confirm`` keeps fetching from one thread, the engine's fast
  path (the caller fetches for itself);
- ``settles``, one thread for every confirm and rollback, in the order they were asked, and
  never queued behind a ``get_message`` waiting for data: a confirm that waited would keep
  its partition locked.

A call cannot be stopped once its thread runs it, so cancellation is made safe around it:
a ``get_message`` whose caller was cancelled rolls back the batch it brings, and a batch held
by a task that ends by cancellation or an exception is rolled back (nothing is committed for
it; its messages come again). A cancelled call that then fails may have taken a background
failure from the engine (raised once, by the next call, and so cleared there): its failure is
kept here and raised by the next call instead. A batch that a ``batches()`` generator
yielded is the generator's until it is settled or the generator moves past it: closing the
generator at it rolls it back, whether the task that iterated it ended before or not.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, Protocol, TypeVar

from client_balance._failure import FailureSlot
from client_balance._logging import get_logger
from client_balance.consumer._results import ConfirmResult, ConsumeResult
from client_balance.errors import ClientBalanceError, NoMessageError, NotStartedError

__all__ = ["Engine", "Lanes"]

_log = get_logger("consumer")

T = TypeVar("T")


class Engine(Protocol):
    """What the lanes call on: ``ClientBalanceConsumer`` (a fake in unit tests)."""

    def get_message(self, timeout_s: float = ...) -> ConsumeResult:
        """One partition's batch."""

    def confirm(self, confirm_context: str, consumed: bool = ...) -> ConfirmResult:
        """Settle a batch."""

    def _give_back(self, confirm_context: str) -> None:
        """Roll back a batch the application never received (no redelivery counted)."""


class Lanes:
    """Runs an engine's calls on its two thread lanes; tracks which task holds which batch.

    Everything but the engine calls and ``_roll_back_result`` runs on the event loop's thread.
    """

    def __init__(self, engine: Engine, max_threads: int) -> None:
        self._engine = engine
        self._calls = ThreadPoolExecutor(max_threads, thread_name_prefix="client-balance-async")
        self._settles = ThreadPoolExecutor(1, thread_name_prefix="client-balance-async-settle")
        self._holders: dict[str, tuple[asyncio.Task[Any], Callable[[asyncio.Task[Any]], None]]] = {}
        """Confirm context -> the task that took the batch, and its done callback."""
        self._yielded: set[str] = set()
        """Confirm contexts a ``batches()`` generator yielded and has not moved past, unsettled.

        Python closes a generator left by ``break`` or ``return`` on a later turn of the loop,
        after the task that left it may have ended; the generator, not that task, decides.
        """
        self._failures = FailureSlot()
        """What a call whose caller was cancelled failed with: raised by the next call or take."""
        self._closed = False

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on the calls lane (with the caller's context variables).

        Cancelled before its thread took it, the call never runs; after, it runs to its end,
        and what it fails with is raised by the next call or take.
        """
        self._failures.raise_once()
        future = self._submit(self._calls, function, *args)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if not future.cancel():  # it runs or ran: its failure must not vanish with it
                future.add_done_callback(self._keep_failure)
            raise

    async def take(self, timeout_s: float) -> ConsumeResult:
        """``get_message(timeout_s)``, held by the calling task until it is settled."""
        self._failures.raise_once()
        future = self._submit(self._calls, self._engine.get_message, timeout_s)
        try:
            result = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if not future.cancel():  # it runs or ran: whatever it brings goes back
                future.add_done_callback(self._roll_back_result)
            raise
        self._hold(result.confirm_context)
        return result

    async def settle(self, confirm_context: str, consumed: bool) -> ConfirmResult:
        """``confirm(confirm_context, consumed)`` on the settles lane."""
        self._forget(confirm_context)
        self._yielded.discard(confirm_context)
        future = self._submit(self._settles, self._engine.confirm, confirm_context, consumed)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancel():  # it never ran: the batch is still out, and goes back
                self._submit_roll_back(confirm_context)
            raise

    def lend(self, confirm_context: str) -> None:
        """A generator yields the batch: it rolls it back if closed before it is settled."""
        self._yielded.add(confirm_context)

    def resumed(self, confirm_context: str) -> None:
        """The generator moved past the batch: it stays with the task that took it, if any."""
        self._yielded.discard(confirm_context)

    def abandon(self, confirm_context: str) -> None:
        """The generator was closed at the batch: roll it back unless it was settled already."""
        if confirm_context in self._yielded:
            self._yielded.discard(confirm_context)
            self._forget(confirm_context)
            self._submit_roll_back(confirm_context)

    def drain(self) -> None:
        """Wait until every confirm and rollback asked for so far has reached the engine."""
        self._settles.submit(lambda: None).result()

    def close(self) -> None:
        """Wait for both lanes to finish what they run, then stop their threads (blocking)."""
        self._closed = True
        self._calls.shutdown(wait=True)  # their abandoned batches still reach the settles
        self._settles.shutdown(wait=True)

    def _submit(
        self, lane: ThreadPoolExecutor, function: Callable[..., T], *args: Any
    ) -> Future[T]:
        if self._closed:
            raise NotStartedError("the consumer has been shut down; create a new one")
        # The caller's context variables (structlog's among them) go along, as to_thread does.
        return lane.submit(contextvars.copy_context().run, function, *args)

    def _hold(self, confirm_context: str) -> None:
        task = asyncio.current_task()
        if task is None:  # not awaited from a task: nothing ends that could abandon it
            return
        ended = partial(self._task_ended, confirm_context)
        task.add_done_callback(ended)
        self._holders[confirm_context] = (task, ended)

    def _forget(self, confirm_context: str) -> None:
        holder = self._holders.pop(confirm_context, None)
        if holder is not None:
            task, ended = holder
            task.remove_done_callback(ended)

    def _task_ended(self, confirm_context: str, task: asyncio.Task[Any]) -> None:
        self._holders.pop(confirm_context, None)
        # A task that was cancelled or failed dropped its batch: back at once. One that returned
        # handed it on (to a queue, another task), unless a generator still has it yielded: that
        # generator is closed later (the loop finalises it) and rolls it back then.
        # _exception, not exception(): that would mark the exception retrieved, and asyncio would
        # no longer report "Task exception was never retrieved" for a task nobody awaits.
        if task.cancelled():
            _log.info("task cancelled holding a batch", task=task.get_name())
        elif (error := task._exception) is not None:
            # The traceback goes as the `exception` field (no locals: text of the application's).
            _log.warning("task failed holding a batch", task=task.get_name(),
                         error=type(error).__name__, exc_info=error)  # fmt: skip
        else:
            return
        self._yielded.discard(confirm_context)
        self._submit_roll_back(confirm_context)

    def _roll_back_result(self, future: Future[ConsumeResult]) -> None:
        # From the calls thread that ran get_message, or the loop if it had finished already.
        if not future.cancelled() and future.exception() is None:
            self._submit_roll_back(future.result().confirm_context, received=False)
        else:
            self._keep_failure(future)

    def _keep_failure(self, future: Future[Any]) -> None:
        # From the calls thread that ran the call, or the loop if it had finished already.
        error = None if future.cancelled() else future.exception()
        # No batch in time, or no consumer running: the next call finds that out for itself (a
        # NotStartedError kept from before start() would be raised by start()).
        if error is None or isinstance(error, NoMessageError | NotStartedError):
            return
        if isinstance(error, ClientBalanceError):
            # Maybe a background failure the engine raised once, to this call: the only time.
            self._failures.store(error)
        else:  # a bug: it would vanish in a future nobody awaits
            _log.error("a call whose caller was cancelled failed", exc_info=error)

    def _submit_roll_back(self, confirm_context: str, *, received: bool = True) -> None:
        try:
            self._settles.submit(self._roll_back, confirm_context, received)
        except RuntimeError:  # the lanes closed: the engine stopped and rolled back what was out
            _log.debug("rollback after close", context=confirm_context)

    def _roll_back(self, confirm_context: str, received: bool) -> None:
        try:
            if received:  # the application had it: a rollback like any other
                self._engine.confirm(confirm_context, consumed=False)
            else:
                self._engine._give_back(confirm_context)
        except ClientBalanceError as error:
            # Settled or released meanwhile, the consumer stopped, or past max_redeliveries
            # (rolled back all the same): there is nobody left to raise it to.
            _log.warning("rollback of an abandoned batch failed", context=confirm_context,
                         error=str(error))  # fmt: skip
        except Exception:  # a bug: it would vanish in a future nobody awaits
            _log.exception("rollback of an abandoned batch failed", context=confirm_context)
        else:
            _log.info("abandoned batch rolled back", context=confirm_context)
