"""The reconcile thread and the target set it works towards.

Every ``reconcile_interval_s``, at once on start, and whenever woken, the consumer refreshes
metadata, computes the partitions this node should hold, releases what it holds beyond them
(and what became unsubscribable), then registers what it lacks, in that order. The target comes
from, in this order of precedence, the ``pinned`` partitions (always held), a user callback, or
the strategy over the nodes ``0 .. source_count - 1`` and the **full configured** partition set,
so a partition without a leader does not reshuffle anyone else's.

A failure of one round is logged and kept for the next user call; the thread goes on. A
Kafka error that only says the cluster is out of reach for now (a broker down, a timeout, a
coordinator moving) is logged and not raised: the next round tries again, which is how
workers ride out a broker restart without the application doing anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

import structlog

from client_balance.errors import ClientBalanceError, ConfigError, KafkaClientError
from client_balance.keys import (
    RESUME_OFFSET,
    TopicPartition,
    check_bootstrap_offset,
    to_topic_partition,
)
from client_balance.strategies import Member, get_strategy

__all__ = [
    "TRANSIENT_KAFKA_CODES",
    "Reconciler",
    "is_transient",
    "node_member_ids",
    "strategy_target",
    "user_target",
]

_log = structlog.get_logger("client_balance.reconcile")

# librdkafka codes that mean "not reachable right now": transport, timeouts, no brokers,
# resolution, waiting for a coordinator, and the broker's own retriable coordinator/leader codes.
TRANSIENT_KAFKA_CODES = frozenset({-195, -187, -185, -193, -180, 5, 6, 7, 14, 15, 16})


def is_transient(error: ClientBalanceError) -> bool:
    """Whether ``error`` only says the cluster cannot be reached for now."""
    return isinstance(error, KafkaClientError) and (
        error.retriable or error.kafka_code in TRANSIENT_KAFKA_CODES
    )


UserTarget = Iterable[str | TopicPartition] | Mapping[str | TopicPartition, int]


def node_member_ids(source_count: int) -> list[str]:
    """Member ids of the nodes, zero-padded so that string order is node order."""
    width = len(str(source_count - 1))
    return [str(node).zfill(width) for node in range(source_count)]


def strategy_target(
    strategy_name: str, counts: Mapping[str, int], source_count: int, node_id: int
) -> set[TopicPartition]:
    """The node's share of ``counts`` under the strategy, every node subscribing every topic."""
    ids = node_member_ids(source_count)
    members = [Member(member_id, counts) for member_id in ids]
    assignment = get_strategy(strategy_name).assign(counts, members)
    return set(assignment[ids[node_id]])


def user_target(answer: UserTarget) -> dict[TopicPartition, int]:
    """A callback's answer (keys, or keys -> bootstrap offsets) as partitions -> offsets."""
    if isinstance(answer, str):
        raise ConfigError(
            f"the assignment callback returned the string {answer!r}; return a collection of "
            "partition keys or a mapping of keys to bootstrap offsets"
        )
    if isinstance(answer, Mapping):
        return {
            to_topic_partition(key): check_bootstrap_offset(offset)
            for key, offset in answer.items()
        }
    return {to_topic_partition(key): RESUME_OFFSET for key in answer}


class Reconciler:
    """Runs ``round_once`` now, every ``interval_s``, and whenever woken, until stopped."""

    def __init__(self, round_once: Callable[[], None], interval_s: float) -> None:
        self._round_once = round_once
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._finished = 0  # rounds finished
        self._running_round = False
        self._failure: ClientBalanceError | None = None
        self._thread = threading.Thread(
            target=self._run, name="client-balance-reconcile", daemon=True
        )

    def start(self) -> None:
        """Start the thread; its first round runs at once."""
        self._thread.start()

    def run_round(self, timeout_s: float) -> bool:
        """Have a round start after this call and wait for it: True if it ended in time."""
        with self._lock:
            # A round already running began before this call: wait for the one after it.
            needed = self._finished + (2 if self._running_round else 1)
            self._wake.set()
            return self._lock.wait_for(lambda: self._finished >= needed, timeout_s)

    def wake(self) -> None:
        """Have a round start soon, without waiting for it."""
        self._wake.set()

    def stop(self) -> None:
        """Stop after the current round."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def raise_failure(self) -> None:
        """Raise (once) the failure of a round since the last call."""
        with self._lock:
            error, self._failure = self._failure, None
        if error is not None:
            raise error

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._wake.clear()
                self._running_round = True
            try:
                self._round_once()
            except ClientBalanceError as error:
                _log.warning("reconcile round failed", error=str(error), kind=type(error).__name__)
                if not is_transient(error):
                    with self._lock:
                        self._failure = error
            except Exception as error:
                _log.exception("reconcile round failed unexpectedly")
                with self._lock:
                    self._failure = ClientBalanceError(f"reconcile round failed: {error!r}")
            with self._lock:
                self._running_round = False
                self._finished += 1
                self._lock.notify_all()
            self._wake.wait(self._interval_s)
