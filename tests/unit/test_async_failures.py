"""The asyncio layer's failures: those of cancelled calls, of shutdown, and refused hooks."""

from __future__ import annotations

import asyncio
import functools
import pickle
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine

import pytest

from client_balance import (
    AsyncClientBalanceConsumer,
    CallbackError,
    ClientBalanceConsumer,
    ClientBalanceError,
    ConfigError,
    ConsumeResult,
    GroupInUseError,
    NoMessageError,
)
from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._lanes import Lanes
from tests.unit.test_async import (
    _SETTINGS,
    FakeEngine,
    _closed,
    _consumer_over,
    _take_cancelled_while_it_runs,
)

_BACKGROUND = ClientBalanceError("the status report thread failed and goes on: X")


class FirstCallFailsEngine(FakeEngine):
    """Its first get_message (once the gate opens) raises ``error``, as a kept failure is."""

    def __init__(self, error: ClientBalanceError) -> None:
        super().__init__()
        self.error = error

    def get_message(self, timeout_s: float = 10.0) -> ConsumeResult:
        """Raise ``error`` from the first call (which clears it in the engine), then batches."""
        first = self.calls == 0  # counted on entry: a later call may start while this waits
        result = super().get_message(timeout_s)
        if first:
            raise self.error
        return result


async def _first_failure(call: Callable[[], Awaitable[None]]) -> BaseException | None:
    """Await ``call()`` up to 100 times (10 ms apart) until it raises; what it raised."""
    for _ in range(100):
        try:
            await call()
        except ClientBalanceError as error:
            return error
        await asyncio.sleep(0.01)
    return None


@pytest.mark.asyncio
async def test_a_failure_a_cancelled_get_message_took_is_raised_once_by_the_next_call() -> None:
    """The orphaned call raised (and so cleared) a background failure: the next call gets it."""
    engine = FirstCallFailsEngine(_BACKGROUND)
    consumer = _consumer_over(engine)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await consumer.get_message(timeout_s=10.0)
    engine.open.set()  # the orphaned call goes on in its thread, and raises the failure

    async def take_and_confirm() -> None:
        batch = await consumer.get_message(timeout_s=1.0)
        await consumer.confirm(batch.confirm_context)

    assert await _first_failure(take_and_confirm) is _BACKGROUND
    assert await _first_failure(take_and_confirm) is None  # once
    await consumer.shutdown()


@pytest.mark.asyncio
async def test_a_no_message_error_of_a_cancelled_get_message_is_dropped() -> None:
    """Nothing in time is no failure: the next call does not raise it."""
    engine = FirstCallFailsEngine(NoMessageError("no batch within 10.0 s", code=406))
    lanes = Lanes(engine, max_threads=2)
    await _take_cancelled_while_it_runs(lanes, engine)
    engine.open.set()
    await asyncio.sleep(0.1)  # the orphaned call ends
    assert (await lanes.take(1.0)).confirm_context == "0:t:0:2"
    await _closed(lanes)


@pytest.mark.asyncio
async def test_a_failure_of_a_cancelled_call_is_raised_once_by_the_next_call() -> None:
    """A commit cancelled while it runs, then failing: its failure reaches the next call."""
    lanes = Lanes(FakeEngine(), max_threads=2)
    running, may_fail = threading.Event(), threading.Event()
    refused = GroupInUseError("commit refused: the group has subscribe() members", group_id="g")

    def commit() -> None:
        running.set()
        assert may_fail.wait(30), "the test never let the commit fail"
        raise refused

    calling = asyncio.create_task(lanes.call(commit))
    assert await asyncio.to_thread(running.wait, 30)
    calling.cancel()
    with pytest.raises(asyncio.CancelledError):
        await calling
    may_fail.set()

    async def nothing() -> None:
        await lanes.call(lambda: None)

    assert await _first_failure(nothing) is refused
    assert await _first_failure(nothing) is None  # once
    await _closed(lanes)


class SlowSettleEngine(FakeEngine):
    """Its confirms wait for the test (a commit="sync" to a slow broker); counts shutdowns."""

    def __init__(self) -> None:
        super().__init__()
        self.open.set()
        self.shutdowns = 0

    def shutdown(self) -> None:
        """Count, then stop."""
        self.shutdowns += 1
        super().shutdown()


@pytest.mark.parametrize("how", ["task left running", "wait_for timed out"])
def test_a_shutdown_under_way_when_asyncio_run_ends_goes_on_to_its_end(how: str) -> None:
    """asyncio.run cancels every task left: the shutdown still runs, and awaits its end again.

    It waits for a confirm that holds the settles lane when main returns.
    """
    engine = SlowSettleEngine()
    consumer = _consumer_over(engine)
    left: list[asyncio.Task[object]] = []  # tasks main leaves running, for asyncio.run to cancel

    async def main() -> None:
        batch = await consumer.get_message(timeout_s=1.0)
        engine.confirm_may_go.clear()
        left.append(asyncio.create_task(consumer.confirm(batch.confirm_context)))
        assert await asyncio.to_thread(engine.confirming.wait, 30)
        threading.Timer(0.2, engine.confirm_may_go.set).start()  # after main returned
        if how == "task left running":
            left.append(asyncio.create_task(consumer.shutdown()))  # a signal handler's, say
            await asyncio.sleep(0.05)
        else:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(consumer.shutdown(), 0.05)

    asyncio.run(main())
    assert (engine.shutdowns, engine.settled) == (1, [("0:t:0:1", True)])
    asyncio.run(consumer.shutdown())  # neither CancelledError nor a second engine shutdown
    assert engine.shutdowns == 1


def test_a_shutdown_after_the_loops_executor_was_shut_down_still_shuts_the_engine() -> None:
    """With the default executor gone, the shutdown runs on a thread of its own, once.

    It set up its future and then failed to hand the work over: every later await hung, and
    the engine never stopped (the review of 2026-11-29, third round).
    """
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)

    async def main() -> None:
        await asyncio.get_running_loop().shutdown_default_executor()
        await consumer.shutdown()

    asyncio.run(main())
    assert engine.stopped
    asyncio.run(asyncio.wait_for(consumer.shutdown(), 10))  # the same shutdown, ended


class RefusedShutdownEngine(FakeEngine):
    """A shutdown whose final commit was refused: it stops, then raises once."""

    def shutdown(self) -> None:
        """Stop, then raise GroupInUseError (the first time)."""
        first = not self.stopped
        self.stopped = True
        if first:
            raise GroupInUseError("final commit refused: subscribe() members", group_id="g")


@pytest.mark.asyncio
async def test_any_failure_of_shutdown_is_raised_to_the_first_awaiter_only() -> None:
    """Not only a CallbackError: a refused final commit is raised once, as the sync one does."""
    consumer = _consumer_over(RefusedShutdownEngine())
    with pytest.raises(GroupInUseError):
        await consumer.shutdown()
    await consumer.shutdown()
    async with consumer:
        pass


@pytest.mark.asyncio
async def test_a_shutdown_failure_whose_first_awaiter_was_cancelled_goes_to_the_next() -> None:
    """Cancelled before the shutdown ended, the first awaiter saw nothing: the next one raises."""
    engine = RefusedShutdownEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    batch = await consumer.get_message(timeout_s=1.0)
    engine.confirm_may_go.clear()
    confirming = asyncio.create_task(consumer.confirm(batch.confirm_context))
    assert await asyncio.to_thread(engine.confirming.wait, 30)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(consumer.shutdown(), 0.05)
    engine.confirm_may_go.set()
    await confirming
    with pytest.raises(GroupInUseError):
        await consumer.shutdown()
    await consumer.shutdown()


async def _async_hook(positions: object) -> None:
    """What an asyncio application writes first: never run from the engine's threads."""


async def _async_generator_hook(positions: object) -> AsyncIterator[None]:
    """An async generator function: calling it runs nothing either."""
    yield


class _AsyncCallable:
    """An object whose __call__ is async."""

    async def __call__(self, positions: object) -> None:
        """Never run from a thread."""


@pytest.mark.parametrize("name", ["on_assigned", "on_revoked", "on_lost", "assigner"])
@pytest.mark.parametrize(
    "hook",
    [_async_hook, _async_generator_hook, _AsyncCallable(), functools.partial(_async_hook)],
    ids=["async def", "async generator", "async __call__", "partial"],
)
@pytest.mark.parametrize("consumer_type", [AsyncClientBalanceConsumer, ClientBalanceConsumer])
def test_an_async_hook_is_refused_naming_it_and_what_is_allowed(
    consumer_type: Callable[..., object], name: str, hook: object
) -> None:
    """An async hook would make a coroutine nobody awaits: refused at construction, by name."""
    with pytest.raises(ConfigError) as refused:
        consumer_type(_SETTINGS, **{name: hook})
    message = str(refused.value)
    assert message.startswith(f"{name}={hook!r} is an async function")
    assert "give a plain function or None" in message
    assert "loop.call_soon_threadsafe" in message
    assert str(pickle.loads(pickle.dumps(refused.value))) == message


def test_a_hook_that_returns_an_awaitable_failed() -> None:
    """A plain function that returns an async one's coroutine did none of its work: it failed.

    on_revoked reports False, so the release skips its commit, and the next call raises it.
    """
    ran: list[object] = []

    async def flush(positions: object) -> None:
        ran.append(positions)

    def on_revoked(positions: object) -> Coroutine[None, None, None]:
        return flush(positions)  # plain, so construction takes it: the coroutine is dropped

    hooks = PartitionHooks("c-1", on_revoked=on_revoked)
    assert hooks.revoked({"0:t:0": 5}) is False
    with pytest.raises(CallbackError, match=r"on_revoked of c-1 failed .* never awaited"):
        hooks.failures.raise_once()
    assert ran == []
