"""Partition lifecycle hooks on the real broker: order, offsets, fencing, failures, and state.

The stateful test runs worker processes (tests/integration/usecase_worker.py) that keep a
per-partition count with the hooks and must end with every message counted exactly once,
across a member joining and a member killed with SIGKILL.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from client_balance import (
    CallbackError,
    ClientBalanceConsumer,
    ClientBalanceSettings,
    PartitionKey,
)
from tests.integration.usecase_worker import read_states
from tests.integration.usecases import UseCaseGroup
from tests.integration.workers import all_records, committed, highs, produce, wait_until

pytestmark = pytest.mark.integration

GroupMaker = Callable[..., UseCaseGroup]


def _identity(key: str) -> str:
    return str(PartitionKey.parse(key).topic_partition)


def _start_committed(bootstrap: str, group: str, topic: str) -> None:
    """Wait for the start's commit (offset 0): sent when the partition is held, not waited for.

    A release that commits nothing may come before its turn, and then it is not sent: a next
    holder would choose the same start. The tests below check what the release leaves.
    """
    wait_until(lambda: committed(bootstrap, group, topic, 1) == {0: 0}, 10, "the start's commit")


def test_hooks_keep_a_stateful_count_exact_across_a_join_and_a_sigkill(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    usecase_groups: GroupMaker,
    tmp_path: Path,
) -> None:
    """on_assigned loads, on_revoked flushes: the counts end exact after a join and a SIGKILL."""
    topic = new_topic(partitions=4)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    stateful = ("--mode", "elastic", "--state-dir", str(state_dir), "--batch-max", "20")
    group = usecase_groups(kafka_bootstrap, [topic])
    produce(kafka_bootstrap, topic, 800, partitions=4)
    first = group.spawn("first", -1, -1, *stateful)
    group.wait_for(lambda: len(first.lines()) >= 400, 30, "the first member consumes alone")
    second = group.spawn("second", -1, -1, *stateful)  # a join: the first revokes half
    group.wait_for(lambda: len(second.held()) == 2, 30, "the second member takes its half")
    produce(kafka_bootstrap, topic, 800, partitions=4, first=800)
    group.wait_for(lambda: len(second.lines()) >= 100, 30, "the second member consumes")
    group.kill(second)  # a crash: its counts since the last checkpoint are gone
    produce(kafka_bootstrap, topic, 800, partitions=4, first=1600)
    expected = {(topic, p, o) for p, o in all_records(highs(kafka_bootstrap, topic, 4))}
    group.wait_for(lambda: set(group.consumed()) >= expected, 60, "every message consumed")
    group.wait_for(lambda: len(first.held()) == 4, 30, "the first member holds everything")
    group.stop([first])  # revokes all: every state is written
    states = read_states(state_dir)
    high = highs(kafka_bootstrap, topic, 4)
    assert {key: state["count"] for key, state in states.items()} == {
        f"{topic}:{p}": end for p, end in high.items()
    }
    assert {key: state["next"] for key, state in states.items()} == {
        f"{topic}:{p}": end for p, end in high.items()
    }
    first_calls = [hook for hook, positions in first.hooks() for _ in positions]
    assert first_calls.count("revoked") >= 2 + 4  # half for the join, all at the end
    # Assigned (in one round, or two when its share came free in steps), then killed: no
    # revoked or lost hook ran in it.
    assert {hook for hook, _ in second.hooks()} == {"assigned"}


def test_on_assigned_runs_before_any_batch_and_on_revoked_before_the_final_commit(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """The hooks see the start offsets, then the confirmed positions before they are committed."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20, partitions=2)
    settings = kafka_settings(commit="interval", commit_interval_s=3600.0)
    events: list[tuple[str, dict[str, int]]] = []
    committed_at_revoke: dict[int, int] = {}

    def assigned(positions: Mapping[str, int]) -> None:
        events.append(("assigned", {_identity(k): v for k, v in positions.items()}))

    def revoked(positions: Mapping[str, int]) -> None:
        events.append(("revoked", {_identity(k): v for k, v in positions.items()}))
        committed_at_revoke.update(committed(kafka_bootstrap, settings.group_id, topic, 2))

    consumer = ClientBalanceConsumer(settings, on_assigned=assigned, on_revoked=revoked)
    with consumer:
        consumer.start([topic], -1, 0)
        consumer.connect(f"{topic}:0")
        assert events == [("assigned", {f"{topic}:0": 0})]
        batch = consumer.get_message(timeout_s=30)
        events.append(("batch", {f"{topic}:{batch.partition}": batch.start_offset}))
        consumer.confirm(batch.confirm_context)
        consumer.disconnect(f"{topic}:0")
        after = committed(kafka_bootstrap, settings.group_id, topic, 2)
    assert events == [
        ("assigned", {f"{topic}:0": 0}),
        ("batch", {f"{topic}:0": 0}),
        ("revoked", {f"{topic}:0": 10}),
    ]
    # The confirm not yet; the start (0) is sent, not waited for, at registration: it may still
    # be on its way through the commit client's first look-up of its coordinator (-1001: none).
    assert committed_at_revoke[0] in (0, -1001)
    assert after[0] == 10  # the final commit came after the hook


def test_on_lost_runs_on_a_member_that_was_stopped_past_its_lease(
    kafka_bootstrap: str, new_topic: Callable[..., str], usecase_groups: GroupMaker
) -> None:
    """SIGSTOP past the lease: the others take over, and on SIGCONT on_lost says what went."""
    topic = new_topic(partitions=2)
    group = usecase_groups(kafka_bootstrap, [topic])
    paused = group.spawn("paused", -1, -1, "--mode", "elastic")
    group.wait_for(lambda: len(paused.held()) == 2, 30, "the first member holds everything")
    other = group.spawn("other", -1, -1, "--mode", "elastic")
    group.wait_for(lambda: len(paused.held()) == len(other.held()) == 1, 30, "halves")
    before, hooks_before = paused.held(), len(paused.hooks())
    paused.process.send_signal(signal.SIGSTOP)
    try:
        group.wait_for(lambda: len(other.held()) == 2, 30, "the other takes over after the lease")
    finally:
        paused.process.send_signal(signal.SIGCONT)
    group.wait_for(
        lambda: any(hook == "lost" for hook, _ in paused.hooks()), 30, "on_lost in the paused one"
    )
    since = paused.hooks()[hooks_before:]
    assert since[0][0] == "lost"  # first, and not revoked: nothing was committed
    assert set(since[0][1]) == before
    group.stop([paused, other])


def test_a_raising_hook_surfaces_on_the_next_call_and_consumption_goes_on(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """on_assigned that raises: CallbackError from the next call, then batches as usual."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)

    def broken(positions: Mapping[str, int]) -> None:
        raise OSError("state store unreachable")

    with ClientBalanceConsumer(kafka_settings(), on_assigned=broken) as consumer:
        consumer.start([topic], -1, 0, pinned=[f"{topic}:0"])
        with pytest.raises(CallbackError) as failed:
            wait_until(lambda: not consumer.is_partitions_ready(0.1), 30, "a call that raises")
        assert failed.value.callback == "on_assigned"
        assert "state store unreachable" in str(failed.value)
        batch = consumer.get_message(timeout_s=30)
        assert len(batch.messages) == 10


def _disk_full(positions: Mapping[str, int]) -> None:
    """An on_revoked whose state store is full: the flush fails."""
    raise OSError("disk full: state not written")


def test_an_on_revoked_that_fails_at_shutdown_is_raised_and_nothing_is_committed_past_it(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """A flush that fails: shutdown() raises CallbackError and the final commit is not written."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    settings = kafka_settings(commit="interval", commit_interval_s=3600.0)

    consumer = ClientBalanceConsumer(settings, on_revoked=_disk_full)
    consumer.start([topic], -1, 0, pinned=[f"{topic}:0"])
    batch = consumer.get_message(timeout_s=30)
    consumer.confirm(batch.confirm_context)
    _start_committed(kafka_bootstrap, settings.group_id, topic)
    with pytest.raises(CallbackError) as failed:
        consumer.shutdown()
    assert failed.value.callback == "on_revoked"
    assert "disk full" in str(failed.value)
    assert consumer.is_shutdown()
    consumer.shutdown()  # raised once; shutting down again is quiet
    # The start (offset 0) was committed when the partition was registered, the confirm not.
    assert committed(kafka_bootstrap, settings.group_id, topic, 1) == {0: 0}


def test_an_on_revoked_that_fails_in_a_round_leaves_the_commit_to_the_next_holder(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """disconnect() whose flush fails: no commit past the unwritten state, the error raised next."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    settings = kafka_settings(commit="interval", commit_interval_s=3600.0)

    with ClientBalanceConsumer(settings, on_revoked=_disk_full) as consumer:
        consumer.start([topic], -1, 0)
        consumer.connect(f"{topic}:0")
        batch = consumer.get_message(timeout_s=30)
        consumer.confirm(batch.confirm_context)
        _start_committed(kafka_bootstrap, settings.group_id, topic)
        consumer.disconnect(f"{topic}:0")
        assert committed(kafka_bootstrap, settings.group_id, topic, 1) == {0: 0}
        with pytest.raises(CallbackError):
            consumer.connect(f"{topic}:0")
        consumer.connect(f"{topic}:0")
        again = consumer.get_message(timeout_s=30)
        assert again.start_offset == 0  # the confirmed but uncommitted batch comes again
        consumer.confirm(again.confirm_context, consumed=False)
        with pytest.raises(CallbackError):
            consumer.shutdown()


def test_a_commit_made_while_on_revoked_writes_leaves_that_partition_to_its_release(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """The checkpoint's commit() during a slow flush that then fails commits none of it."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    settings = kafka_settings(commit="interval", commit_interval_s=3600.0)
    checkpoint_done = threading.Event()

    def checkpoint() -> None:
        consumer.commit()  # another thread's checkpoint, while the hook still writes
        checkpoint_done.set()

    def slow_disk_full(positions: Mapping[str, int]) -> None:
        threading.Thread(target=checkpoint, daemon=True).start()
        assert checkpoint_done.wait(30)
        raise OSError("disk full: state not written")

    with ClientBalanceConsumer(settings, on_revoked=slow_disk_full) as consumer:
        consumer.start([topic], -1, 0)
        consumer.connect(f"{topic}:0")
        batch = consumer.get_message(timeout_s=30)
        consumer.confirm(batch.confirm_context)
        _start_committed(kafka_bootstrap, settings.group_id, topic)
        consumer.disconnect(f"{topic}:0")
        assert checkpoint_done.is_set()
        assert committed(kafka_bootstrap, settings.group_id, topic, 1) == {0: 0}
        with pytest.raises(CallbackError):
            consumer.connect(f"{topic}:0")


def test_shutdown_from_a_hook_that_disconnect_runs_finishes_once_the_hook_returns(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """on_revoked of a disconnect() calls shutdown() while a round waits: nothing hangs.

    The hook's shutdown() joined the reconcile thread, which waited for the lock the
    disconnect() held: the worker hung for good (the review of 2026-11-29, later).
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    revoked: list[dict[str, int]] = []

    def stop_for_good(positions: Mapping[str, int]) -> None:
        revoked.append(dict(positions))
        due = threading.Thread(target=consumer.reconcile_now, args=(5.0,), daemon=True)
        due.start()  # a round comes due while the hook flushes
        due.join(0.3)
        consumer.shutdown()  # returns at once: the shutdown goes on after the hook
        consumer.shutdown()  # so does a second call: this thread holds what it would wait for

    consumer = ClientBalanceConsumer(kafka_settings(), on_revoked=stop_for_good)
    consumer.start([topic], -1, 0)
    consumer.connect(f"{topic}:0")
    batch = consumer.get_message(timeout_s=30)
    consumer.confirm(batch.confirm_context)
    disconnecting = threading.Thread(target=consumer.disconnect, args=(f"{topic}:0",))
    disconnecting.daemon = True
    disconnecting.start()
    disconnecting.join(30)
    assert not disconnecting.is_alive(), "disconnect() hung in its hook's shutdown()"
    stopping = threading.Thread(target=consumer.shutdown, daemon=True)  # waits for the first
    stopping.start()
    stopping.join(30)
    assert not stopping.is_alive(), "the shutdown begun in the hook never finished"
    assert consumer.is_shutdown()
    assert [list(positions.values()) for positions in revoked] == [[batch.end_offset]]
    assert committed(kafka_bootstrap, consumer.settings.group_id, topic, 1) == {0: batch.end_offset}


def test_shutdown_from_a_hook_that_a_round_runs_revokes_each_partition_once(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """on_revoked of a round's release calls shutdown(): no second on_revoked, nested in the first.

    The shutdown ran inside the round's release and released the same partition again, its
    commit written though the outer hook went on to fail (the review of 2026-11-29, later).
    """
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20, partitions=2)
    revoked: list[list[str]] = []
    raised: list[CallbackError] = []

    def stop_for_good(positions: Mapping[str, int]) -> None:
        revoked.append([_identity(key) for key in positions])
        consumer.shutdown()
        if len(revoked) == 1:
            raise OSError("disk full: state not written")

    def shutdown_and_catch() -> None:
        try:
            consumer.shutdown()
        except CallbackError as error:
            raised.append(error)

    consumer = ClientBalanceConsumer(kafka_settings(), on_revoked=stop_for_good)
    consumer.start([topic], 2, 0, pinned=[f"{topic}:0", f"{topic}:1"])  # node 0 of 2
    wait_until(lambda: len(consumer.registered_partitions()) == 2, 30, "both pins held")
    # The next round releases node 1's share, and that release's hook stops the member.
    consumer.unpin([f"{topic}:0", f"{topic}:1"])
    wait_until(lambda: bool(revoked), 30, "the round's on_revoked")
    stopping = threading.Thread(target=shutdown_and_catch, daemon=True)
    stopping.start()
    stopping.join(30)
    assert not stopping.is_alive(), "the shutdown begun in the hook never finished"
    assert sorted(key for keys in revoked for key in keys) == [f"{topic}:0", f"{topic}:1"]
    # The hook's failure in the round: raised by the shutdown that waited for the handed-off one.
    assert [error.callback for error in raised] == ["on_revoked"]


def test_reconcile_now_from_a_hook_returns_at_once_and_the_round_follows(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """reconcile_now() in an on_assigned that connect() runs: False at once, the round after.

    It waited for a round that could not run until the hook's call returned: the whole
    timeout, here ten minutes (the review of 2026-11-29).
    """
    topic = new_topic(partitions=1)
    answers: list[bool] = []

    def ask_for_a_round(_positions: Mapping[str, int]) -> None:
        answers.append(consumer.reconcile_now(600.0))

    with ClientBalanceConsumer(kafka_settings(), on_assigned=ask_for_a_round) as consumer:
        consumer.start([topic], -1, 0)
        connecting = threading.Thread(target=consumer.connect, args=(f"{topic}:0",), daemon=True)
        connecting.start()
        connecting.join(60)
        assert not connecting.is_alive(), "connect() waited out its hook's reconcile_now()"
        assert answers == [False]
        assert consumer.reconcile_now(30.0)  # the rounds go on
