"""Commits of confirmed positions: on demand, on the interval, and the hourly re-commit.

Only confirmed positions are ever committed (Kafka's "next message to read"), so delivery is at
least once and a crash loses nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from client_balance._kafka import (
    GROUP_IN_USE_CODES,
    Consumer,
    KafkaException,
    KafkaTopicPartition,
    commit_batches,
    commit_runs,
    from_kafka_exception,
    is_transient,
    kafka_tp,
)
from client_balance._logging import get_logger
from client_balance.consumer._buffers import HeldPartition
from client_balance.errors import ClientBalanceError, GroupInUseError, KafkaClientError

__all__ = ["Committer"]

_log = get_logger("fetch")

# Re-commit unchanged positions this often: Kafka expires a simple group's offsets 7 days
# after their last commit, which would silently reset an idle partition.
_RECOMMIT_EVERY_S = 3600.0
_AWAY_AT_MOST_S = 60.0
"""The longest the interval and sync-confirm commits wait out a coordinator that was away."""


class Committer:
    """Commits held partitions' confirmed positions through the client lock's owner."""

    def __init__(
        self,
        consumer: Consumer,
        group_id: str,
        interval_s: float,
        lock: threading.Condition,
        *,
        held: Callable[[], list[HeldPartition]] = list,
        holds: Callable[[HeldPartition], bool] = lambda _state: True,
        may_commit: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        answer_wait_s: float = 10.0,
    ) -> None:
        self._consumer = consumer
        self._held = held
        self._holds = holds
        self._may_commit = may_commit
        self._group_id = group_id
        self._interval_s = interval_s
        self._lock = lock
        self._clock = clock
        self._answer_wait_s = answer_wait_s
        self._last_flush_s = clock()
        self._last_recommit_s = clock()
        self._in_flight = 0
        # A commit to a coordinator out of reach holds the client lock for librdkafka's whole
        # wait (10 s seen): tried on every interval and confirm, fetching would stall for most
        # of an outage. After such a failure they wait out a window, doubled each time.
        self._away_until_s = float("-inf")
        self._away_for_s = 0.0

    def settled(self) -> bool:
        """Whether no commit is waiting for its answer.

        librdkafka holds a commit while the group's coordinator is out of reach, and sends it
        when it is back.
        """
        return self._in_flight == 0

    def recommit_soon(self) -> None:
        """Commit every held position again at the next interval check (or release).

        A member that was cut off may have had a commit held, which landed when it came back
        and moved a partition's committed position behind where its new owner committed: what
        the group has committed is not known any more, so none of it counts as committed.
        """
        states = self._held()
        with self._lock:
            for state in states:
                state.committed = None
        self._last_flush_s = float("-inf")

    def commit_confirmed(
        self, state: HeldPartition, through_gate: Callable[[Callable[[], bool]], object]
    ) -> bool:
        """Commit one confirmed position now (``commit="sync"``); False if Kafka refused.

        A refusal is logged and left to the interval's commits: the position stays confirmed.
        """
        if self._coordinator_away():
            return False  # the interval's commit makes it once the coordinator is back
        try:  # asked again at the lock: the commit this one queued behind may have failed
            return bool(
                through_gate(lambda: not self._coordinator_away() and self.commit_held([state]))
            )
        except GroupInUseError:
            raise
        except KafkaClientError as error:
            _log.warning("commit failed; will retry", error=str(error))
            return False

    def commit_held(self, states: Sequence[HeldPartition]) -> bool:
        """Commit those of ``states`` still held (under the client lock); whether all were.

        The states were taken before the client lock: a release without commit (the topic
        re-created, or the partition another member's now) may have come in between, and the
        position it left behind must not be committed after it. A release drops its state
        under the client lock, so none slips in between this look and the commit.
        """
        with self._lock:
            held = [state for state in states if self._holds(state)]
        if held:
            self.commit(held)
        return len(held) == len(states)

    def commit(self, states: Sequence[HeldPartition]) -> None:
        """Commit each state's confirmed position now (the caller holds the client lock).

        Refused while ``may_commit()`` says the member's lease may have lapsed: another member
        may hold the partitions by now, and its commits are not ours to overwrite. A commit
        whose answer comes only after that is not counted as made either: the new owner
        commits over it once this member is back (:meth:`recommit_soon`).

        librdkafka waits for a commit's answer until the coordinator's link heals, however
        long: the commit is sent from a thread of its own and waited for ``answer_wait_s`` at
        most, then given up as transient (the window begins). Until its answer comes, no other
        commit is sent, and ``settled()`` says so.
        """
        if not self._may_commit():
            raise _lease_lapsed("nothing is committed until it is renewed")
        positions = [s.confirmed for s in states]
        offsets = [kafka_tp(s.partition, s.confirmed) for s in states]
        with self._lock:
            in_flight = self._in_flight
            if not in_flight:
                self._in_flight += 1
        if in_flight:  # the coordinator is as good as away: sync confirms skip, and say it once
            self._wait_out_the_coordinator()
            raise _no_answer("an earlier commit still waits for its answer")
        runs = _Runs()
        threading.Thread(
            target=self._send_runs, args=(offsets, runs), name="client-balance-commit", daemon=True
        ).start()
        if not runs.done.wait(self._answer_wait_s):
            self._wait_out_the_coordinator()
            raise _no_answer(f"no answer within {self._answer_wait_s} s")
        done = 0
        for landed in runs.landed:
            if not self._may_commit():
                raise _lease_lapsed("a commit answered after that counts for nothing")
            with self._lock:  # a run that landed stays marked, should a later one fail
                for at in range(done, done + landed):
                    states[at].committed = positions[at]
            done += landed
        if runs.error is not None and not isinstance(runs.error, KafkaException):
            failed = type(runs.error).__name__  # its text may quote the client's settings
            raise ClientBalanceError(f"committing offsets failed: {failed}") from runs.error
        if runs.error is not None:
            mapped = self._error(runs.error)
            if is_transient(mapped):
                self._wait_out_the_coordinator()
            raise mapped from runs.error
        self._away_for_s = 0.0

    def _send_runs(self, offsets: list[KafkaTopicPartition], runs: _Runs) -> None:
        try:
            runs.landed.extend(commit_runs(self._consumer, self._group_id, offsets))
        except Exception as error:  # whatever it is, the waiting caller raises it
            runs.error = error
        finally:
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()  # close_after_answers may wait for it
            runs.done.set()

    def close_after_answers(self, close_client: Callable[[], None]) -> None:
        """Close the client once no commit waits for its answer (``answer_wait_s`` at most).

        A commit's thread still inside librdkafka would have the client freed under it; such a
        client is left open instead (its threads end with the process), and that is logged.
        """
        with self._lock:
            answered = self._lock.wait_for(self.settled, self._answer_wait_s)
        if answered:
            close_client()
        else:
            _log.warning("a commit still waits for its answer; the Kafka client is left open")

    def _wait_out_the_coordinator(self) -> None:
        self._away_for_s = min(max(2 * self._away_for_s, self._interval_s), _AWAY_AT_MOST_S)
        self._away_until_s = self._clock() + self._away_for_s

    def send(self, states: Sequence[HeldPartition]) -> None:
        """Send a commit of each state's confirmed position, not waiting for its answer.

        The states are not marked committed, so the next interval's commit makes sure of it:
        one that failed is made again then. Skipped while ``may_commit()`` says no.
        """
        if not states or not self._may_commit():
            return
        offsets = [kafka_tp(s.partition, s.confirmed) for s in states]
        try:
            for batch in commit_batches(self._group_id, offsets):
                self._consumer.commit(offsets=batch, asynchronous=True)
        except KafkaException as error:  # the interval's commit makes it again
            _log.warning("commit failed; will retry", error=str(self._error(error)))

    def commit_due(self, states: Sequence[HeldPartition]) -> None:
        """Commit the states whose confirmed position is not committed yet."""
        with self._lock:
            due = [s for s in states if s.committed != s.confirmed]
        if due:
            self.commit_held(due)

    def on_interval(
        self,
        call: Callable[[Callable[[], object]], object],
        fail: Callable[[ClientBalanceError], None],
    ) -> None:
        """Every ``commit_interval_s``: commit what is due (every hour: all of it again)."""
        now = self._clock()
        # Also in "sync" mode: a commit that failed while the broker was away is retried here.
        if now - self._last_flush_s < self._interval_s or self._coordinator_away():
            return
        self._last_flush_s = now
        everything = now - self._last_recommit_s >= _RECOMMIT_EVERY_S
        if everything:
            self._last_recommit_s = now
        try:
            states = self._held()
            commit = self.commit_held if everything else self.commit_due
            if states:  # the window asked again at the lock, as for a sync confirm
                call(lambda: None if self._coordinator_away() else commit(states))
        except GroupInUseError as error:
            fail(error)
        except KafkaClientError as error:
            _log.warning("commit failed; will retry", error=str(error))

    def _coordinator_away(self) -> bool:
        """Whether the last commit found the coordinator out of reach, within its window."""
        return self._clock() < self._away_until_s

    def _error(self, error: KafkaException) -> ClientBalanceError:
        mapped = from_kafka_exception(error, "committing offsets")
        if mapped.kafka_code in GROUP_IN_USE_CODES:
            return GroupInUseError(
                f"group {self._group_id!r} has members that subscribe(); Kafka rejects the "
                f"commits of client-balanced consumers then ({mapped.kafka_name}). Use a group "
                "id that is never used with subscribe()",
                group_id=self._group_id,
            )
        return mapped


class _Runs:
    """What a commit's thread reports: the runs that landed, the error that ended it."""

    def __init__(self) -> None:
        self.landed: list[int] = []
        self.error: Exception | None = None
        self.done = threading.Event()


def _no_answer(why: str) -> KafkaClientError:
    return KafkaClientError(
        f"committing offsets failed: {why}; the group's coordinator may be out of reach",
        kafka_code=-185,
        kafka_name="_TIMED_OUT",
        retriable=True,
    )


def _lease_lapsed(consequence: str) -> KafkaClientError:
    return KafkaClientError(
        "committing offsets failed: this member's lease may have lapsed (no status report "
        f"acknowledged in time); {consequence}",
        kafka_code=-1,
        kafka_name="LEASE_LAPSED",
        retriable=True,
    )
