"""The asyncio layer's edge cases, over a fake engine: what cancellation rolls back, and when."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import itertools
import logging
import threading
from collections.abc import AsyncGenerator

import pytest

from client_balance import (
    AsyncBatch,
    AsyncClientBalanceConsumer,
    CallbackError,
    ClientBalanceConsumer,
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
        self.given_back: list[str] = []
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

    def _give_back(self, confirm_context: str) -> None:
        """Record the batch given back (never received), apart from the rollbacks."""
        self.given_back.append(confirm_context)

    def is_shutdown(self) -> bool:
        """Whether shutdown() ran."""
        return self.stopped

    def shutdown(self) -> None:
        """Stop."""
        self.stopped = True


async def _until_called(engine: FakeEngine) -> None:
    assert await asyncio.to_thread(engine.called.wait, 30)


async def _take_cancelled_while_it_runs(lanes: Lanes, engine: FakeEngine) -> None:
    """A take(10 s) cancelled once the engine runs it: its thread goes on without a waiter."""
    waiting = asyncio.create_task(lanes.take(10.0))
    await _until_called(engine)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def _closed(lanes: Lanes) -> None:
    await asyncio.sleep(0)  # the done callbacks of a task that just ended run first
    await asyncio.to_thread(lanes.close)


@pytest.mark.asyncio
async def test_a_get_message_cancelled_while_it_runs_rolls_back_what_it_brings() -> None:
    """The call goes on in its thread; the batch it returns after the cancel is given back.

    Given back, not rolled back: the application never had it, so it is no redelivery.
    """
    engine = FakeEngine()
    lanes = Lanes(engine, max_threads=2)
    await _take_cancelled_while_it_runs(lanes, engine)
    engine.open.set()
    await _closed(lanes)
    assert (engine.settled, engine.given_back) == ([], ["0:t:0:1"])


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


async def _cancelled_holding_a_batch(lanes: Lanes) -> None:
    """A task takes a batch and is cancelled holding it; then the lanes close."""
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


@pytest.mark.asyncio
async def test_a_task_cancelled_holding_a_batch_rolls_it_back() -> None:
    """Cancelled between get_message and confirm: the batch is rolled back, not confirmed."""
    engine = FakeEngine()
    engine.open.set()
    lanes = Lanes(engine, max_threads=2)
    await _cancelled_holding_a_batch(lanes)
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
async def test_a_confirm_cancelled_while_it_runs_settles_the_batch_as_asked() -> None:
    """A confirm the engine took already runs to its end when cancelled: confirmed, no rollback."""
    engine = FakeEngine()
    engine.open.set()
    lanes = Lanes(engine, max_threads=2)
    batch = await lanes.take(10.0)
    engine.confirm_may_go.clear()
    confirming = asyncio.create_task(lanes.settle(batch.confirm_context, True))
    assert await asyncio.to_thread(engine.confirming.wait, 30)
    confirming.cancel()
    engine.confirm_may_go.set()
    with contextlib.suppress(asyncio.CancelledError):
        await confirming
    await _closed(lanes)
    assert engine.settled == [("0:t:0:1", True)]
    assert engine.given_back == []


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


async def _settled(engine: FakeEngine, count: int) -> list[tuple[str, bool]]:
    """The settles once ``count`` have come, or what came within 2 s (loop turns included)."""
    for _ in range(200):
        if len(engine.settled) >= count:
            break
        await asyncio.sleep(0.01)
    return list(engine.settled)


@pytest.mark.parametrize("how", ["break", "return", "raise", "cancel"])
@pytest.mark.asyncio
async def test_a_task_that_leaves_async_for_and_ends_has_the_batch_rolled_back_once(
    how: str,
) -> None:
    """However a task leaves batches() unsettled and ends, its batch goes back exactly once."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    holding = asyncio.Event()

    async def work() -> str:
        async for _batch in consumer.batches(timeout_s=1.0):
            holding.set()
            if how == "return":
                return "returned"
            if how == "raise":
                raise ValueError("bad batch")
            if how == "cancel":
                await asyncio.Event().wait()
            break
        return "left the loop"

    task = asyncio.create_task(work())
    await holding.wait()
    if how == "cancel":
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, ValueError):
        await task
    # Before shutdown, which rolls back whatever is out anyway.
    assert await _settled(engine, 1) == [("0:t:0:1", False)]
    await asyncio.sleep(0.1)  # room for a second rollback, which must not come
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.asyncio
async def test_a_generator_closed_after_its_task_returned_rolls_its_batch_back() -> None:
    """The task's end does not hand on a batch its generator still has out: closing it does."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)

    async def take_one() -> AsyncGenerator[AsyncBatch, None]:
        batches = consumer.batches(timeout_s=1.0)
        await anext(batches)
        return batches

    batches = await asyncio.create_task(take_one())
    await asyncio.sleep(0.05)  # the task's done callbacks ran
    assert engine.settled == []
    await batches.aclose()
    assert await _settled(engine, 1) == [("0:t:0:1", False)]
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.asyncio
async def test_a_generator_never_closed_rolls_its_batch_back_when_collected() -> None:
    """A generator kept alive by a reference cycle is finalised by gc: its batch goes back."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)

    async def take_one() -> None:
        batches = consumer.batches(timeout_s=1.0)
        await anext(batches)
        cycle: list[object] = [batches]
        cycle.append(cycle)  # refcounting alone never frees it now: only gc does

    await asyncio.create_task(take_one())
    await asyncio.sleep(0.05)
    assert engine.settled == []  # still alive: nothing closed it
    gc.collect()  # the loop's finaliser hook schedules its aclose()
    assert await _settled(engine, 1) == [("0:t:0:1", False)]
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:1", False)]


@pytest.mark.asyncio
async def test_a_batch_the_generator_moved_past_stays_with_its_taker() -> None:
    """Closing the generator rolls back only the batch it is at, not one handed on before."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    batches = consumer.batches(timeout_s=1.0)
    first = await anext(batches)
    await anext(batches)
    await batches.aclose()
    await first.confirm()
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:2", False), ("0:t:0:1", True)]


@pytest.mark.asyncio
async def test_a_task_failing_holding_a_batch_logs_its_traceback_and_asyncio_still_reports_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The failure is logged with its traceback (no locals), and left for asyncio to report."""
    caplog.set_level(logging.WARNING, logger="client_balance")
    loop = asyncio.get_running_loop()
    reports: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: reports.append(context))
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)

    async def fail_on_a_batch() -> None:
        kept = "canary-0c7a1f-Secret"  # a local: a traceback with locals would show it
        await consumer.get_message(timeout_s=1.0)
        raise ValueError(f"bad message of length {len(kept)}")

    try:
        task = asyncio.create_task(fail_on_a_batch(), name="failing-worker")
        assert await _settled(engine, 1) == [("0:t:0:1", False)]
        del task  # never awaited: asyncio reports its exception when it is collected
        gc.collect()
        await consumer.shutdown()
    finally:
        loop.set_exception_handler(None)
    [record] = [r for r in caplog.records if r.getMessage() == "task failed holding a batch"]
    fields = record.__dict__
    assert (record.levelno, fields["task"], fields["error"]) == (
        logging.WARNING, "failing-worker", "ValueError"
    )  # fmt: skip
    assert fields["exception"].startswith("Traceback (most recent call last):")
    assert "in fail_on_a_batch" in fields["exception"]
    assert fields["exception"].endswith("ValueError: bad message of length 20")
    assert "canary-0c7a1f-Secret" not in repr(fields)
    [report] = [r for r in reports if r["message"] == "Task exception was never retrieved"]
    assert repr(report["exception"]) == "ValueError('bad message of length 20')"


@pytest.mark.asyncio
async def test_a_rollback_that_fails_unexpectedly_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An engine's confirm raising something other than its own errors: logged, not lost.

    It vanished in the settles lane's future, which nobody awaits.
    """
    engine = FakeEngine()
    engine.open.set()

    def broken_confirm(confirm_context: str, consumed: bool = True) -> ConfirmResult:
        raise RuntimeError("engine bug")

    engine.confirm = broken_confirm  # type: ignore[method-assign]
    lanes = Lanes(engine, max_threads=2)
    with caplog.at_level(logging.WARNING, logger="client_balance"):
        await _cancelled_holding_a_batch(lanes)
    failed = [
        r for r in caplog.records if r.getMessage() == "rollback of an abandoned batch failed"
    ]
    assert len(failed) == 1
    assert failed[0].exc_info is not None


def test_every_async_call_takes_the_arguments_of_its_synchronous_twin() -> None:
    """Each public method both consumers have takes the same parameters, in the same order."""
    differ = {}
    for name in sorted(dir(AsyncClientBalanceConsumer)):
        twin = getattr(ClientBalanceConsumer, name, None)
        if name.startswith("_") or not callable(twin):
            continue
        ours = list(inspect.signature(getattr(AsyncClientBalanceConsumer, name)).parameters)
        theirs = list(inspect.signature(twin).parameters)
        if ours != theirs:
            differ[name] = (ours, theirs)
    assert differ == {}


class FailingShutdownEngine(FakeEngine):
    """A shutdown whose final on_revoked failed: it stops, then raises once."""

    def shutdown(self) -> None:
        """Stop, then raise the callback's failure (once)."""
        first = not self.stopped
        self.stopped = True
        if first:
            raise CallbackError("on_revoked failed", callback="on_revoked", round_number=3)


@pytest.mark.asyncio
async def test_a_callback_failure_of_shutdown_is_raised_to_the_first_awaiter_only() -> None:
    """The first shutdown() (or async with's exit) raises the CallbackError; awaiting again not."""
    consumer = _consumer_over(FailingShutdownEngine())
    with pytest.raises(CallbackError):
        await consumer.shutdown()
    await consumer.shutdown()
    other = _consumer_over(FailingShutdownEngine())
    with pytest.raises(CallbackError):
        async with other:
            pass
    await other.shutdown()


@pytest.mark.asyncio
async def test_async_with_left_by_an_error_keeps_that_error_over_a_callback_failure() -> None:
    """The block's own exception propagates; the shutdown's CallbackError (logged) not over it."""
    with pytest.raises(KeyError):
        async with _consumer_over(FailingShutdownEngine()):
            raise KeyError("the application's own")


@pytest.mark.asyncio
async def test_get_message_in_a_task_of_its_own_warns_once_that_cancels_reach_it_no_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """create_task(get_message()) (and wait_for on 3.11): one WARNING; a plain await: none."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    with caplog.at_level(logging.WARNING, logger="client_balance.consumer"):
        await consumer.get_message()
        assert not [r for r in caplog.records if "task of its own" in r.getMessage()]
        await asyncio.create_task(consumer.get_message())
        await asyncio.gather(consumer.get_message(), consumer.get_message())
        await asyncio.wait_for(consumer.get_message(), 30)  # its own task before Python 3.12
    warned = [r for r in caplog.records if "task of its own" in r.getMessage()]
    assert len(warned) == 1
    assert "asyncio.timeout()" in warned[0].__dict__["advice"]
    await consumer.shutdown()


@pytest.mark.asyncio
async def test_a_cancelled_get_message_keeps_its_thread_until_its_engine_call_returns() -> None:
    """An outer timeout ends the await, not the engine's wait: later calls queue behind it."""
    engine = FakeEngine()
    lanes = Lanes(engine, max_threads=1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await lanes.take(10.0)
    calling = asyncio.create_task(lanes.call(lambda: "ran"))
    await asyncio.sleep(0.1)
    assert not calling.done()  # the only thread still waits in the orphaned get_message
    engine.open.set()
    assert await calling == "ran"
    await _closed(lanes)
    assert engine.given_back == ["0:t:0:1"]


@pytest.mark.asyncio
async def test_a_break_out_of_a_generator_still_referenced_rolls_back_once_it_is_closed() -> None:
    """A `break` leaves a generator a variable holds open: its batch stays out until aclose()."""
    engine = FakeEngine()
    engine.open.set()
    consumer = _consumer_over(engine)
    batches = consumer.batches(timeout_s=1.0)
    async for _batch in batches:
        break
    await asyncio.sleep(0.05)
    assert engine.settled == []  # still out: its partition stays locked meanwhile
    await batches.aclose()
    assert await _settled(engine, 1) == [("0:t:0:1", False)]
    await consumer.shutdown()
    assert engine.settled == [("0:t:0:1", False)]
