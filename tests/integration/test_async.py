"""AsyncClientBalanceConsumer against the session's real broker: consume, confirm, cancel."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import pytest

from client_balance import (
    AsyncClientBalanceConsumer,
    ClientBalanceSettings,
    ConsumeResult,
    NotStartedError,
)
from tests.integration.test_consumer import committed_offset
from tests.integration.workers import produce

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

Settings = Callable[..., ClientBalanceSettings]
NOTHING_COMMITTED = -1001


def _values(result: ConsumeResult) -> list[int]:
    """The message values of a batch, as the numbers ``produce`` wrote."""
    return [int(message.value() or b"") for message in result.messages]


async def test_async_for_consumes_a_whole_topic_and_commits_it(
    kafka_bootstrap: str, new_topic: Callable[..., str], kafka_settings: Settings
) -> None:
    """Every message of a 3-partition topic comes once through async for; all is committed."""
    topic = new_topic(partitions=3)
    produce(kafka_bootstrap, topic, 300, partitions=3)
    settings = kafka_settings(batch_max_messages=40)
    seen: list[int] = []
    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start([topic], source_count=1, node_id=0)
        async for batch in consumer.batches(timeout_s=1.0):
            seen += _values(batch.result)
            await batch.confirm()
            if len(seen) >= 300:
                break
    assert sorted(seen) == list(range(300))
    group = settings.group_id
    assert sum(committed_offset(kafka_bootstrap, group, topic, p) for p in range(3)) == 300


async def test_get_message_and_confirm_commit_the_batch(
    kafka_bootstrap: str, new_topic: Callable[..., str], kafka_settings: Settings
) -> None:
    """get_message hands out a batch; confirm makes its end the committed position."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 30, partitions=1)
    settings = kafka_settings(batch_max_messages=10, commit="sync")
    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start([topic], source_count=1, node_id=0)
        assert await consumer.is_partitions_ready(30.0)
        assert consumer.registered_partitions() == set(await consumer.get_partition_meta())
        batch = await consumer.get_message(timeout_s=30)
        assert (batch.start_offset, batch.end_offset, _values(batch)) == (0, 10, list(range(10)))
        confirmed = await consumer.confirm(batch.confirm_context)
        assert (confirmed.consumed, confirmed.current, confirmed.committed) == (True, 10, True)
        assert committed_offset(kafka_bootstrap, settings.group_id, topic) == 10
        assert [info.current for info in (await consumer.offset_infos()).values()] == [10]
    assert consumer.is_shutdown()
    with pytest.raises(NotStartedError):
        await consumer.get_message(timeout_s=1)


async def test_a_task_cancelled_in_the_async_for_body_has_its_batch_come_again(
    kafka_bootstrap: str, new_topic: Callable[..., str], kafka_settings: Settings
) -> None:
    """Cancelled holding a batch: nothing is committed for it, the same consumer gets it again."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 30, partitions=1)
    settings = kafka_settings(batch_max_messages=10, commit="sync")
    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start([topic], source_count=1, node_id=0)
        first = await consumer.get_message(timeout_s=30)
        await consumer.confirm(first.confirm_context)
        held: asyncio.Future[ConsumeResult] = asyncio.get_running_loop().create_future()

        async def work() -> None:
            async for batch in consumer.batches(timeout_s=1.0):
                held.set_result(batch.result)
                await asyncio.Event().wait()  # stuck on the batch until cancelled

        worker = asyncio.create_task(work())
        taken = await held
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
        again = await consumer.get_message(timeout_s=30)
        assert (again.start_offset, _values(again)) == (taken.start_offset, _values(taken))
        assert again.start_offset == 10
        assert committed_offset(kafka_bootstrap, settings.group_id, topic) == 10


@pytest.mark.parametrize("how", ["break", "return"])
async def test_a_task_that_leaves_async_for_and_ends_has_its_batch_come_again(
    kafka_bootstrap: str, new_topic: Callable[..., str], kafka_settings: Settings, how: str
) -> None:
    """A task leaving async for unsettled by break or return, then ending: the batch comes again."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 30, partitions=1)
    settings = kafka_settings(batch_max_messages=10, commit="sync")
    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start([topic], source_count=1, node_id=0)
        first = await consumer.get_message(timeout_s=30)
        await consumer.confirm(first.confirm_context)

        async def work() -> ConsumeResult:
            taken = None
            async for batch in consumer.batches(timeout_s=1.0):
                if how == "return":
                    return batch.result
                taken = batch.result
                break
            assert taken is not None
            return taken  # the task ends before Python closes the generator it left

        taken = await asyncio.create_task(work())
        # Lost, the batch would keep the one partition out: "every partition has a batch out".
        again = await consumer.get_message(timeout_s=15)
        assert (again.start_offset, _values(again)) == (taken.start_offset, _values(taken))
        assert again.start_offset == 10
        assert committed_offset(kafka_bootstrap, settings.group_id, topic) == 10


async def test_a_batch_held_by_a_cancelled_task_goes_to_the_next_member(
    kafka_bootstrap: str, new_topic: Callable[..., str], kafka_settings: Settings
) -> None:
    """Cancelled between get_message and confirm: a new consumer of the group gets the batch."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 30, partitions=1)
    settings = kafka_settings(batch_max_messages=10, commit="sync")
    taken: list[ConsumeResult] = []

    async def take_and_hang(consumer: AsyncClientBalanceConsumer) -> None:
        taken.append(await consumer.get_message(timeout_s=30))
        await asyncio.Event().wait()

    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start([topic], source_count=1, node_id=0)
        first = await consumer.get_message(timeout_s=30)
        await consumer.confirm(first.confirm_context)
        holder = asyncio.create_task(take_and_hang(consumer))
        while not taken:
            await asyncio.sleep(0.01)
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder
    assert committed_offset(kafka_bootstrap, settings.group_id, topic) == 10
    async with AsyncClientBalanceConsumer(settings) as successor:
        await successor.start([topic], source_count=1, node_id=0)
        again = await successor.get_message(timeout_s=30)
    assert (again.start_offset, _values(again)) == (10, _values(taken[0]))


async def test_a_cancelled_get_message_loses_no_message(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Settings,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A get_message cancelled while it waits still runs; the batch it brings comes again."""
    caplog.set_level(logging.INFO, logger="client_balance")
    topic = new_topic(partitions=1)
    settings = kafka_settings(batch_max_messages=10, commit="sync")
    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start([topic], source_count=1, node_id=0)
        assert await consumer.is_partitions_ready(30.0)
        waiting_in_engine = threading.Event()
        engine_get_message = consumer.consumer.get_message

        def get_message(timeout_s: float = 10.0) -> ConsumeResult:
            waiting_in_engine.set()
            return engine_get_message(timeout_s)

        monkeypatch.setattr(consumer.consumer, "get_message", get_message)  # a spy, calling on
        waiting = asyncio.create_task(consumer.get_message(timeout_s=30))
        assert await asyncio.to_thread(waiting_in_engine.wait, 30)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        produce(kafka_bootstrap, topic, 10, partitions=1)  # what the abandoned call will take
        while not any(r.getMessage() == "abandoned batch rolled back" for r in caplog.records):
            await asyncio.sleep(0.01)
        batch = await consumer.get_message(timeout_s=30)
        assert (batch.start_offset, _values(batch)) == (0, list(range(10)))
        # Registering may commit the start position; the rolled back batch moved nothing.
        assert committed_offset(kafka_bootstrap, settings.group_id, topic) in (NOTHING_COMMITTED, 0)
        await consumer.confirm(batch.confirm_context)
        assert committed_offset(kafka_bootstrap, settings.group_id, topic) == 10


async def test_a_task_group_of_nodes_consumes_a_topic_exactly_once(
    kafka_bootstrap: str, new_topic: Callable[..., str], kafka_settings: Settings
) -> None:
    """Three node-mode consumers in one TaskGroup share a topic: each message once, committed."""
    topic = new_topic(partitions=6)
    produce(kafka_bootstrap, topic, 600, partitions=6)
    settings = kafka_settings(batch_max_messages=25)
    consumers = [AsyncClientBalanceConsumer(settings) for _ in range(3)]
    seen: list[int] = []
    partitions_of: dict[int, set[int]] = {node: set() for node in range(3)}
    all_seen = asyncio.Event()

    async def node(node_id: int) -> None:
        async with consumers[node_id] as consumer:
            await consumer.start([topic], source_count=3, node_id=node_id)
            async for batch in consumer.batches(timeout_s=0.5):
                seen.extend(_values(batch.result))
                partitions_of[node_id].add(batch.result.partition)
                await batch.confirm()
                if len(seen) >= 600:
                    all_seen.set()

    async def stop_when_all_seen() -> None:
        await all_seen.wait()
        await asyncio.gather(*(consumer.shutdown() for consumer in consumers))

    async with asyncio.TaskGroup() as group:
        for node_id in range(3):
            group.create_task(node(node_id))
        group.create_task(stop_when_all_seen())

    assert sorted(seen) == list(range(600))
    assert sorted(p for held in partitions_of.values() for p in held) == list(range(6))
    assert all(len(held) == 2 for held in partitions_of.values())
    group_id = settings.group_id
    assert sum(committed_offset(kafka_bootstrap, group_id, topic, p) for p in range(6)) == 600


async def test_batches_that_came_after_their_wait_was_cancelled_are_no_redeliveries(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given back, not counted: three cancelled waits do not make the policy skip the batch.

    Each was rolled back through confirm(consumed=False), which counted towards
    max_redeliveries, so a batch the application never saw was skipped and committed past.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    settings = kafka_settings(max_redeliveries=1, redelivery_policy="skip", commit="sync")
    async with AsyncClientBalanceConsumer(settings) as consumer:
        await consumer.start([topic], -1, 0, pinned=[f"{topic}:0"])
        engine, took, let_go = consumer.consumer, threading.Event(), threading.Event()
        engine_get_message = engine.get_message

        def late_get_message(timeout_s: float = 10.0) -> ConsumeResult:
            batch = engine_get_message(timeout_s)
            took.set()
            assert let_go.wait(30), "the test never let the batch come"
            return batch

        monkeypatch.setattr(engine, "get_message", late_get_message)
        for _ in range(3):
            took.clear()
            let_go.clear()
            waiting = asyncio.create_task(consumer.get_message(timeout_s=30))
            assert await asyncio.to_thread(took.wait, 30)
            waiting.cancel()  # the thread has the batch; it comes after the wait ended
            with pytest.raises(asyncio.CancelledError):
                await waiting
            let_go.set()
            await asyncio.sleep(0.2)  # its rollback reaches the engine
        monkeypatch.undo()
        batch = await consumer.get_message(timeout_s=30)
        assert (batch.start_offset, len(batch.messages)) == (0, 10)
        await consumer.confirm(batch.confirm_context)
    assert committed_offset(kafka_bootstrap, settings.group_id, topic) == 10
