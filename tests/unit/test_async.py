"""The asyncio layer's edge cases, over a fake engine: what cancellation rolls back, and when."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading

import pytest

from client_balance import (
    AsyncClientBalanceConsumer,
    ClientBalanceSettings,
    ConfigError,
    ConfirmResult,
    ConsumeResult,
    NotStartedError,
)
from client_balance.consumer._lanes import Lanes

# Never contacted: the fake engine stands in wherever a broker would answer.
_SETTINGS = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="async-unit")


class FakeEngine:
    """Hands out empty batches once ``open`` is set; records every settle."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.called = threading.Event()
        self.confirming = threading.Event()
        self.confirm_may_go = threading.Event()
        self.confirm_may_go.set()
        self.calls = 0
        self.settled: list[tuple[str, bool]] = []
        self._tokens = itertools.count(1)
        self.stopped = False

    def get_message(self, timeout_s: float = 10.0) -> ConsumeResult:
        """A batch of its own token, once the test opens the gate."""
        self.calls += 1
        self.called.set()
        assert self.open.wait(30), "the test never let get_message return"
        token = next(self._tokens)
        return ConsumeResult("0:t:0", "t", 0, [], f"0:t:0:{token}", token, token + 1, None)

    def confirm(self, confirm_context: str, consumed: bool = True) -> ConfirmResult:
        """Record the settle, once the test lets confirms go."""
        self.confirming.set()
        assert self.confirm_may_go.wait(30), "the test never let confirm return"
        self.settled.append((confirm_context, consumed))
        return ConfirmResult("0:t:0", consumed, 0, False)

    def is_shutdown(self) -> bool:
        """Whether shutdown() ran."""
        return self.stopped

    def shutdown(self) -> None:
        """Stop."""
        self.stopped = True


async def _until_called(engine: FakeEngine) -> None:
    assert await asyncio.to_thread(engine.called.wait, 30)


async def _closed(lanes: Lanes) -> None:
    await asyncio.sleep(0)  # the done callbacks of a task that just ended run first
    await asyncio.to_thread(lanes.close)


@pytest.mark.asyncio
async def test_a_get_message_cancelled_while_it_runs_rolls_back_what_it_brings() -> None:
    """The call goes on in its thread; the batch it returns after the cancel goes back."""
    engine = FakeEngine()
    lanes = Lanes(engine, max_threads=2)
    waiting = asyncio.create_task(lanes.take(10.0))
    await _until_called(engine)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    engine.open.set()
    await _closed(lanes)
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.asyncio
async def test_a_get_message_cancelled_before_its_thread_took_it_never_runs() -> None:
    """With every thread busy, a cancelled call is dropped: no batch is taken for it."""
    engine = FakeEngine()
    lanes = Lanes(engine, max_threads=1)
    first = asyncio.create_task(lanes.take(10.0))
    await _until_called(engine)
    queued = asyncio.create_task(lanes.take(10.0))
    await asyncio.sleep(0)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    engine.open.set()
    assert (await first).confirm_context == "0:t:0:1"
    await _closed(lanes)
    assert engine.calls == 1
    assert engine.settled == []  # the first task returned: it handed its batch on


@pytest.mark.asyncio
async def test_a_task_cancelled_holding_a_batch_rolls_it_back() -> None:
    """Cancelled between get_message and confirm: the batch is rolled back, not confirmed."""
    engine = FakeEngine()
    engine.open.set()
    lanes = Lanes(engine, max_threads=2)
    holding = asyncio.Event()

    async def hold() -> None:
        await lanes.take(10.0)
        holding.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(hold())
    await holding.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _closed(lanes)
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.asyncio
async def test_a_task_failing_holding_a_batch_rolls_it_back() -> None:
    """A task that raises with a batch unsettled dropped it: rolled back."""
    engine = FakeEngine()
    engine.open.set()
    lanes = Lanes(engine, max_threads=2)

    async def fail() -> None:
        await lanes.take(10.0)
        raise ValueError("bad message")

    with pytest.raises(ValueError, match="bad message"):
        await asyncio.create_task(fail())
    await _closed(lanes)
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.asyncio
async def test_a_batch_handed_to_another_task_is_confirmed_by_it() -> None:
    """A task that returns a batch hands it on: nothing is rolled back, the other confirms."""
    engine = FakeEngine()
    engine.open.set()
    lanes = Lanes(engine, max_threads=2)
    result = await asyncio.create_task(lanes.take(10.0))
    await asyncio.sleep(0)
    await asyncio.create_task(lanes.settle(result.confirm_context, True))
    await _closed(lanes)
    assert engine.settled == [("0:t:0:1", True)]


@pytest.mark.asyncio
async def test_a_confirm_cancelled_before_it_ran_rolls_the_batch_back() -> None:
    """A confirm still queued when cancelled never commits: the batch goes back instead."""
    engine = FakeEngine()
    engine.open.set()
    lanes = Lanes(engine, max_threads=2)
    first, second = await lanes.take(10.0), await lanes.take(10.0)
    engine.confirm_may_go.clear()
    confirming = asyncio.create_task(lanes.settle(first.confirm_context, True))
    assert await asyncio.to_thread(engine.confirming.wait, 30)
    queued = asyncio.create_task(lanes.settle(second.confirm_context, True))
    await asyncio.sleep(0)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    engine.confirm_may_go.set()
    await confirming
    await _closed(lanes)
    assert engine.settled == [("0:t:0:1", True), ("0:t:0:2", False)]


@pytest.mark.asyncio
async def test_closed_lanes_refuse_calls_with_420() -> None:
    """After close, every call raises NotStartedError, as the stopped engine does."""
    lanes = Lanes(FakeEngine(), max_threads=1)
    await asyncio.to_thread(lanes.close)
    with pytest.raises(NotStartedError):
        await lanes.take(1.0)
    with pytest.raises(NotStartedError):
        await lanes.settle("0:t:0:1", True)


def _consumer_over(engine: FakeEngine) -> AsyncClientBalanceConsumer:
    consumer = AsyncClientBalanceConsumer(_SETTINGS)
    consumer._consumer = engine  # type: ignore[assignment]  # the fake stands in for the engine
    consumer._lanes = Lanes(engine, max_threads=2)
    return consumer


@pytest.mark.asyncio
async def test_leaving_async_for_early_rolls_back_the_unsettled_batch() -> None:
    """Leaving batches() by break (closed by aclosing) rolls back the batch of that iteration."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    async with contextlib.aclosing(consumer.batches(timeout_s=1.0)) as batches:
        async for batch in batches:
            await batch.confirm()
            break
    async with contextlib.aclosing(consumer.batches(timeout_s=1.0)) as batches:
        async for _batch in batches:
            break
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:1", True), ("0:t:0:2", False)]


@pytest.mark.asyncio
async def test_an_exception_in_the_async_for_body_rolls_the_batch_back() -> None:
    """An exception leaving the loop rolls back its batch once, even caught in the same task."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)

    async def fail_on_the_first_batch() -> None:
        async for _batch in consumer.batches(timeout_s=1.0):
            raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        await fail_on_the_first_batch()
    while not engine.settled:  # the loop finalises the dropped generator on its next turns
        await asyncio.sleep(0.01)
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.asyncio
async def test_batch_rollback_is_confirm_false_and_shutdown_is_idempotent() -> None:
    """AsyncBatch.rollback() confirms with consumed=False; a second shutdown does nothing."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    async for batch in consumer.batches(timeout_s=1.0):
        result = await batch.rollback()
        assert (result.consumed, batch.key, batch.messages) == (False, "0:t:0", [])
        break
    await consumer.shutdown()
    await consumer.shutdown()
    assert consumer.is_shutdown()
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "4"])
def test_max_threads_must_be_a_positive_int(threads: object) -> None:
    """A bad max_threads is refused, naming the value and what is allowed."""
    with pytest.raises(ConfigError, match=r"max_threads=.* give an int >= 1"):
        AsyncClientBalanceConsumer(_SETTINGS, max_threads=threads)  # type: ignore[arg-type]  # the point


@pytest.mark.asyncio
async def test_a_refused_confirm_leaves_the_batch_held_by_its_task() -> None:
    """A confirm with a bad flag raises ConfigError, settles nothing; a cancel still rolls back."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    refused = asyncio.Event()

    async def hold() -> None:
        result = await consumer.get_message(timeout_s=1.0)
        with pytest.raises(ConfigError, match="consumed='yes' is not allowed"):
            await consumer.confirm(result.confirm_context, consumed="yes")  # type: ignore[arg-type]  # the point
        refused.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(hold())
    await refused.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:1", False)]


def test_the_async_consumer_takes_a_metrics_registry_as_the_synchronous_one_does() -> None:
    """metrics_registry goes to the engine: a wrong one is refused there, by name."""
    with pytest.raises(ConfigError, match="CollectorRegistry, not dict"):
        AsyncClientBalanceConsumer(_SETTINGS, metrics_registry={})
