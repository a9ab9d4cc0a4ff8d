"""shutdown() called twice at once: the second returns once the first has released everything."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, cast

from client_balance import ClientBalanceConsumer, ClientBalanceSettings
from client_balance.consumer import _consumer


def _running_consumer(stop: Any) -> tuple[ClientBalanceConsumer, threading.Thread]:
    """A consumer whose run stops with ``stop()``; its reconcile thread (never started)."""
    consumer = ClientBalanceConsumer(ClientBalanceSettings(bootstrap_servers="127.0.0.1:9",
                                                           group_id="g"))  # fmt: skip
    reconcile_thread = threading.Thread(target=lambda: None)
    failures = SimpleNamespace(raise_once=lambda: None)
    consumer._run = cast(Any, SimpleNamespace(
        stop=stop, close=lambda: None, reconciler=SimpleNamespace(thread=reconcile_thread),
        in_callback=lambda: False,
        keeper=SimpleNamespace(hooks=SimpleNamespace(failures=failures)),
    ))  # fmt: skip
    consumer._state = _consumer._RUNNING
    return consumer, reconcile_thread


def test_a_second_shutdown_waits_for_the_first_to_release_everything() -> None:
    """A second call (another thread, a with block) returns after the first's release.

    It returned at once while the first still released: a process exiting then lost the final
    commits and the withdrawal (the review of 2026-11-29).
    """
    releasing, released = threading.Event(), threading.Event()

    def stop() -> None:
        releasing.set()
        released.wait(5.0)

    consumer, _ = _running_consumer(stop)
    first = threading.Thread(target=consumer.shutdown)
    first.start()
    assert releasing.wait(5.0)
    second_done = threading.Event()

    def second_call() -> None:
        consumer.shutdown()
        second_done.set()

    threading.Thread(target=second_call).start()
    assert not second_done.wait(0.3)  # still releasing: the second call waits
    released.set()
    assert second_done.wait(5.0)
    first.join(5.0)
    assert consumer.is_shutdown()


def test_a_shutdown_from_a_hook_of_the_stopping_thread_returns_at_once() -> None:
    """An on_revoked that calls shutdown() runs on the thread that stops: it must not wait."""
    consumer: ClientBalanceConsumer
    inner: list[bool] = []

    def stop() -> None:
        consumer.shutdown()  # as a hook run by the release would
        inner.append(True)

    consumer, _ = _running_consumer(stop)
    consumer.shutdown()
    assert inner == [True]
