"""Commits of confirmed positions: on demand, on the interval, and the hourly re-commit.

Only confirmed positions are ever committed (Kafka's "next message to read"), so delivery is at
least once and a crash loses nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from client_balance._kafka import (
    AUTHORIZATION_CODES,
    GROUP_IN_USE_CODES,
    KafkaException,
    KafkaTopicPartition,
    from_kafka_exception,
    is_access_denied,
    is_transient,
    kafka_tp,
)
from client_balance._logging import get_logger
from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._commit_sender import CommitClient, CommitJob, CommitSender
from client_balance.errors import ClientBalanceError, GroupInUseError, KafkaClientError
from client_balance.keys import TopicPartition

__all__ = ["Committer"]

_log = get_logger("fetch")

# Re-commit unchanged positions this often: Kafka expires a simple group's offsets 7 days
# after their last commit, which would silently reset an idle partition.
_RECOMMIT_EVERY_S = 3600.0
_AWAY_AT_MOST_S = 60.0
"""The longest the interval and sync-confirm commits wait out a coordinator that was away."""


class Committer:
    """Commits held partitions' confirmed positions, through a sender of their own."""

    def __init__(
        self,
        new_client: Callable[[], CommitClient],
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
        self._sender = CommitSender(new_client, group_id, lock)
        # librdkafka waits for a commit's answer until its coordinator's link heals: tried on
        # every interval and confirm, commits would queue up behind it. After a commit failed
        # that way (or was given up), they wait out a window, doubled each time.
        self._away_until_s = float("-inf")
        self._away_for_s = 0.0
        self._recommits = 0  # each recommit_soon(): an answer to a commit sent before it counts not

    def start(self) -> None:
        """Make the commit client now, in the background: the first commit finds it ready."""
        self._sender.start()

    def settled(self, partitions: Iterable[TopicPartition] | None = None) -> bool:
        """Whether no commit is queued or waiting for its answer; of ``partitions``, if given.

        librdkafka holds a commit while the group's coordinator is out of reach, and sends it
        when it is back. Of ``partitions``, one in flight is waited for ``answer_wait_s`` at
        most (a start commit sent as the partition was taken may still be on its way).
        """
        if partitions is None:
            return self._sender.settled()
        keys = {(tp.topic, tp.partition) for tp in partitions}
        return self._sender.settled(keys, self._answer_wait_s)

    def recommit_soon(self) -> None:
        """Commit every held position again at the next interval check (or release).

        A member that was cut off may have had a commit held, which landed when it came back
        and moved a partition's committed position behind where its new owner committed: what
        the group has committed is not known any more, so none of it counts as committed.
        """
        states = self._held()
        with self._lock:
            self._recommits += 1
            for state in states:
                state.committed = None
        self._last_flush_s = float("-inf")

    def commit_confirmed(self, state: HeldPartition) -> bool:
        """Commit one confirmed position now (``commit="sync"``); False if not committed.

        A failure is logged and left to the interval's commits: the position stays confirmed.
        So is a commit skipped for the window of a coordinator found away. A refusal that
        trying again cannot mend (``_lasting``) is raised.
        """
        if self._coordinator_away():
            return False  # the interval's commit makes it once the coordinator is back
        try:
            return self._commit([state], which=self._unreleased, skip_when_away=True) == 1
        except KafkaClientError as error:
            if _lasting(error):
                raise
            _log.warning("commit failed; will retry", error=str(error))
            return False

    def commit_held(self, states: Sequence[HeldPartition]) -> bool:
        """Commit those of ``states`` still held when the commit's turn comes; whether all were.

        The states were taken earlier: a release without commit (the topic re-created, or the
        partition another member's now) may have come in between, and the position it left
        behind must not be committed after it.

        A release's commit is where the partition's next holder starts: it waits behind a
        commit given up earlier (within the same ``answer_wait_s``) rather than being refused,
        as a link that has just healed answers that one soon.
        """
        return self._commit(states, which=self._holds, behind_given_up=True) == len(states)

    def _unreleased(self, state: HeldPartition) -> bool:
        """Held and not being released: a release commits its partitions after ``on_revoked``.

        An interval's, ``commit()``'s or a sync confirm's commit made while the hook still
        writes would pass a state it may fail to write (the checkpoint pattern, consumer.md).
        """
        return not state.releasing and self._holds(state)

    def commit(self, states: Sequence[HeldPartition]) -> None:
        """Commit each state's confirmed position now, held yet or not (a start's commit)."""
        self._commit(states, which=_any_state)

    def _commit(
        self,
        states: Sequence[HeldPartition],
        *,
        which: Callable[[HeldPartition], bool],
        skip_when_away: bool = False,
        behind_given_up: bool = False,
    ) -> int:
        """Commit the states' confirmed positions and wait; how many were sent.

        Refused while ``may_commit()`` says the member's lease may have lapsed: another member
        may hold the partitions by now, and its commits are not ours to overwrite. A commit
        whose answer comes only after that is not counted as made either: the new owner
        commits over it once this member is back (:meth:`recommit_soon`).

        The answer is waited for ``answer_wait_s`` at most, then given up as transient (the
        window begins). Until its answer comes, no other commit is waited for, unless
        ``behind_given_up``.
        """
        if not self._may_commit():
            raise _lease_lapsed("nothing is committed until it is renewed")
        # The coordinator is as good as away: say it at once.
        if not behind_given_up and self._sender.overdue():
            self._wait_out_the_coordinator()
            raise _no_answer("an earlier commit still waits for its answer")
        picked: list[HeldPartition] = []
        positions: list[int] = []
        lapsed: list[bool] = []
        recommits: list[int] = []  # recommit_soon() calls before the pick

        def pick() -> list[KafkaTopicPartition]:  # under the state lock, at the commit's turn
            if skip_when_away and self._coordinator_away():
                return []  # the one before found the coordinator away: see the window
            if not self._may_commit():
                lapsed.append(True)
                return []
            recommits.append(self._recommits)
            picked.extend(filter(which, states))
            positions.extend(s.confirmed for s in picked)
            return [kafka_tp(s.partition, at) for s, at in zip(picked, positions, strict=True)]

        job = self._sender.queue(pick, self._after_answer)
        if not job.done.wait(self._answer_wait_s):
            self._sender.give_up(job)
            if not job.done.is_set():
                self._wait_out_the_coordinator()
                raise _no_answer(f"no answer within {self._answer_wait_s} s")
        if lapsed:
            raise _lease_lapsed("nothing is committed until it is renewed")
        done = 0
        for landed in job.landed:
            if not self._may_commit():
                raise _lease_lapsed("a commit answered after that counts for nothing")
            with self._lock:  # a run that landed stays marked, should a later one fail
                for at in range(done, done + landed):  # unless to be committed again since
                    if recommits == [self._recommits]:
                        picked[at].committed = positions[at]
            done += landed
        if job.error is not None:
            raise self._raised(job.error) from job.error
        return len(picked)

    def _after_answer(self, job: CommitJob) -> None:
        """On the sender's thread: a coordinator found away starts the window at once.

        The next commit's turn comes right after: had the window waited for this commit's
        waiter, it would have been sent, and waited as long again.
        """
        if job.error is None:
            if job.landed:
                self._away_for_s = 0.0
        elif isinstance(job.error, KafkaException) and is_transient(self._error(job.error)):
            self._wait_out_the_coordinator()

    def close(self) -> None:
        """Send the commits queued, then close the commit client (``answer_wait_s`` at most).

        A commit still inside librdkafka after that keeps its client open (its thread ends
        with the process) rather than have it freed under the call; that is logged.
        """
        if not self._sender.close(self._answer_wait_s):
            _log.warning("a commit still waits for its answer; its Kafka client is left open")

    def _wait_out_the_coordinator(self) -> None:
        with self._lock:
            self._away_for_s = min(max(2 * self._away_for_s, self._interval_s), _AWAY_AT_MOST_S)
            self._away_until_s = self._clock() + self._away_for_s

    def send(self, states: Sequence[HeldPartition]) -> None:
        """Send a commit of each state's confirmed position, not waiting for its answer.

        The states are not marked committed, so the next interval's commit makes sure of it:
        one that failed is made again then. Skipped while ``may_commit()`` says no.
        """
        if not states or not self._may_commit():
            return
        # The positions as they are now: at its turn, a state may be confirmed further, and
        # a commit of that must wait for on_revoked (the checkpoint pattern of consumer.md).
        positions = [(s, s.confirmed) for s in states]

        def pick() -> list[KafkaTopicPartition]:
            if not self._may_commit():
                return []
            return [kafka_tp(s.partition, at) for s, at in positions if self._holds(s)]

        self._sender.queue(pick, self._after_sent)

    def _after_sent(self, job: CommitJob) -> None:
        self._after_answer(job)
        if job.error is not None:  # the interval's commit makes it again
            _log.warning("commit failed; will retry", error=str(self._raised(job.error)))

    def commit_due(self, states: Sequence[HeldPartition], *, skip_when_away: bool = False) -> None:
        """Commit the states whose confirmed position is not committed yet."""
        with self._lock:
            due = [s for s in states if s.committed != s.confirmed]
        if due:
            self._commit(due, which=self._unreleased, skip_when_away=skip_when_away)

    def on_interval(self, fail: Callable[[ClientBalanceError], None]) -> None:
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
            if states and everything:
                self._commit(states, which=self._unreleased, skip_when_away=True)
            elif states:
                self.commit_due(states, skip_when_away=True)
        except KafkaClientError as error:
            if _lasting(error):
                fail(error)
            else:
                _log.warning("commit failed; will retry", error=str(error))

    def _coordinator_away(self) -> bool:
        """Whether the last commit found the coordinator out of reach, within its window."""
        return self._clock() < self._away_until_s

    def _raised(self, error: Exception) -> ClientBalanceError:
        """What a commit's waiter raises for the error its sender met."""
        if isinstance(error, ClientBalanceError):
            return error
        if isinstance(error, KafkaException):
            return self._error(error)
        # Its text may quote the client's settings: named by type only.
        return ClientBalanceError(f"committing offsets failed: {type(error).__name__}")

    def _error(self, error: KafkaException) -> ClientBalanceError:
        mapped = from_kafka_exception(error, "committing offsets")
        if mapped.kafka_code in GROUP_IN_USE_CODES:
            return GroupInUseError(
                f"group {self._group_id!r} has members that subscribe(); Kafka rejects the "
                f"commits of client-balanced consumers then ({mapped.kafka_name}). Use a group "
                "id that is never used with subscribe()",
                group_id=self._group_id,
            )
        if is_access_denied(mapped):  # name the ACL a commit needs (Kafka's words do not)
            kind = AUTHORIZATION_CODES.get(mapped.kafka_code)
            return from_kafka_exception(
                error, "committing offsets", operation="Read",
                resource=self._group_id if kind == "group" else None,
            )  # fmt: skip
        return mapped


def _lasting(error: ClientBalanceError) -> bool:
    """Whether a commit's failure wants the application: another group's members, or an ACL.

    Either refuses every commit until someone acts; logged only, a worker ran on committing
    nothing, and its next start read everything again.
    """
    return isinstance(error, GroupInUseError) or is_access_denied(error)


def _any_state(_state: HeldPartition) -> bool:
    return True


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
