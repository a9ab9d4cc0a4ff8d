"""Serves the log lines of the admin clients, which nothing else polls.

confluent-kafka hands a client's librdkafka lines to its ``logger`` only in ``poll()``; an
``AdminClient`` answers through futures and is never polled, so without a logger its lines went
to stderr from C (a member's admin client wrote some 80 "Connect to ... failed" lines a second
while its cluster was away, past the application's logging), and with one they would queue for
as long as it lives. One daemon thread polls every live admin client once a second instead:
their lines reach ``client_balance.kafka`` (and its filter of alike lines) like any client's.
"""

from __future__ import annotations

import threading
import weakref

from confluent_kafka.admin import AdminClient

from client_balance._logging import get_logger

__all__ = ["PUMP_EVERY_S", "pumped"]

PUMP_EVERY_S = 1.0
"""How often each live admin client's queued log lines are served."""

_log = get_logger("kafka")
_clients: weakref.WeakSet[AdminClient] = weakref.WeakSet()
_lock = threading.Lock()
_started = threading.Event()


def pumped(client: AdminClient) -> AdminClient:
    """``client``, its log lines served from now on while it lives (it is not kept alive)."""
    with _lock:
        _clients.add(client)
        if not _started.is_set():
            _started.set()
            threading.Thread(target=_serve, name="client-balance-admin-logs", daemon=True).start()
    return client


def _serve() -> None:
    idle = threading.Event()  # never set: a pause that no one cuts short
    while True:
        idle.wait(PUMP_EVERY_S)
        _serve_once()


def _serve_once() -> None:
    # A function of its own: its locals, the clients among them, are gone before the pause,
    # where a loop variable would keep the last client polled (and its threads) alive.
    with _lock:
        clients = list(_clients)
    for client in clients:
        try:
            client.poll(0)
        except Exception as error:  # a callback of the client's raised: the others go on
            # Named by type only: its words may quote the client's settings, secrets included.
            _log.warning("serving an admin client's callbacks failed", error=type(error).__name__)
