"""The member's commits: sent by a thread of their own, through a Kafka client of their own.

confluent-kafka makes the calls on one ``Consumer`` one at a time. Commits went through the
fetching client: a commit whose answer a dropped link held back kept ``consume()`` waiting
behind it for the whole cut (2 batches in 75 s on a 3-node cluster, against 9,452 in the 20 s
before). Now they go through a second client, and only this module's thread touches it (a
call from another thread would wait behind the thread's own), so fetching goes on while a
commit waits, however long.

One commit at a time, in the order they were asked for: a later one never lands before an
earlier one, so a committed position never goes back. What a commit sends is picked under the
state lock right before it is sent: a partition released while the commit waited its turn is
left out.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

from client_balance._kafka import Committing, KafkaTopicPartition, commit_runs, stopped
from client_balance._logging import get_logger

__all__ = ["CommitClient", "CommitJob", "CommitSender"]

_log = get_logger("fetch")

_SERVE_EVERY_S = 0.5
"""An idle commit client is polled this often: it serves librdkafka's log lines (else queued
for as long as it lives) and an ``oauth_cb`` asking for a token."""


class CommitClient(Committing, Protocol):
    """What the sender uses of confluent-kafka's ``Consumer`` (a stand-in in unit tests)."""

    def poll(self, timeout: float) -> object: ...

    def close(self) -> object: ...


class CommitJob:
    """One commit: what to send (picked at its turn), and how it went."""

    def __init__(
        self,
        pick: Callable[[], list[KafkaTopicPartition]],
        after: Callable[[CommitJob], None],
    ) -> None:
        self.pick = pick
        """Called under the state lock on the sender's thread: the offsets to send now."""
        self.after = after
        """Called on the sender's thread once the answer came, before ``done`` is set."""
        self.sent: frozenset[tuple[str, int]] | None = None
        """(topic, partition) of every offset it sent (set with the pick, under the lock); None
        until then: it may yet send anything."""
        self.landed: list[int] = []
        """The length of each run (``commit_batches``) that landed, in order."""
        self.error: Exception | None = None
        self.given_up = False
        """Its waiter stopped waiting: the coordinator is as good as away until it is done."""
        self.done = threading.Event()


class CommitSender:
    """A thread that sends commits one at a time through a client only it touches."""

    def __init__(
        self, new_client: Callable[[], CommitClient], group_id: str, lock: threading.Condition
    ) -> None:
        self._new_client = new_client
        self._group_id = group_id
        self._state_lock = lock
        self._jobs_lock = threading.Condition()
        self._jobs: deque[CommitJob] = deque()
        self._current: CommitJob | None = None
        self._closing = False
        self._broken: Exception | None = None
        """Why the client could not be made: every commit fails with it."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Make the client now, on the sender's thread: the first commit finds it ready."""
        with self._jobs_lock:
            if self._thread is None and not self._closing:
                self._thread = threading.Thread(
                    target=self._run, name="client-balance-commit", daemon=True
                )
                self._thread.start()

    def queue(
        self,
        pick: Callable[[], list[KafkaTopicPartition]],
        after: Callable[[CommitJob], None] = lambda _job: None,
    ) -> CommitJob:
        """Have a commit sent after those queued before it; wait on its ``done``."""
        job = CommitJob(pick, after)
        self.start()
        with self._jobs_lock:
            if self._closing:
                job.error = self._broken or stopped("the consumer is closed")
                job.done.set()
                return job
            self._jobs.append(job)
            self._jobs_lock.notify_all()
        return job

    def give_up(self, job: CommitJob) -> None:
        """Its waiter stops waiting for ``job`` (see :meth:`overdue`)."""
        with self._jobs_lock:
            job.given_up = not job.done.is_set()

    def overdue(self) -> bool:
        """Whether a commit whose waiter gave up is still waiting for its answer (or turn)."""
        with self._jobs_lock:
            pending = [*self._jobs, *filter(None, [self._current])]
            return any(job.given_up for job in pending)

    def settled(
        self, partitions: Iterable[tuple[str, int]] | None = None, wait_s: float = 0.0
    ) -> bool:
        """Whether no commit is queued or waiting for its answer; of ``partitions``, if given.

        A commit that has not had its turn yet sends nothing of a partition released before
        it, nor anything at all once its waiter gave up on it (a start's commit, whose states
        are not held yet): only the one sent and waiting can still land. Waits ``wait_s`` at
        most for it.
        """
        keys = None if partitions is None else frozenset(partitions)

        def settled() -> bool:
            if keys is None:
                return not self._jobs and self._current is None
            sent = None if self._current is None else self._current.sent
            return self._current is None or (sent is not None and sent.isdisjoint(keys))

        with self._jobs_lock:
            return self._jobs_lock.wait_for(settled, wait_s)

    def close(self, wait_s: float) -> bool:
        """Send what is queued, then stop; whether that took at most ``wait_s``.

        A commit still inside librdkafka after that keeps its client open (its thread ends
        with the process): freeing a client under a thread's call would crash it.
        """
        with self._jobs_lock:
            self._closing = True
            self._jobs_lock.notify_all()
            thread = self._thread
        if thread is None:
            return True
        thread.join(wait_s)
        return not thread.is_alive()

    def _run(self) -> None:
        try:
            client = self._new_client()
        except Exception as error:  # whatever it is, every commit fails with it and says so
            self._fail_all(error)
            return
        _serve(client)  # an oauth_cb gets its first token before the first commit needs it
        while (job := self._next(client)) is not None:
            try:
                self._send(client, job)
            except Exception as error:  # whatever it is, the commit's waiter raises it
                job.error = error
            finally:
                self._finish(job)
        client.close()

    def _next(self, client: CommitClient) -> CommitJob | None:
        while True:
            with self._jobs_lock:
                self._jobs_lock.wait_for(lambda: self._jobs or self._closing, _SERVE_EVERY_S)
                if self._jobs:
                    self._current = self._jobs.popleft()
                    return self._current
                if self._closing:
                    return None
            _serve(client)

    def _send(self, client: CommitClient, job: CommitJob) -> None:
        # A release drops its partition under this lock: one released before the commit's turn
        # is not sent. One released after it waits for this commit before its claim is let go.
        with self._state_lock:
            if job.given_up:  # its waiter went on as if it failed: a start's claim may be gone
                job.sent = frozenset()
                return
            offsets = job.pick()
            job.sent = frozenset((offset.topic, offset.partition) for offset in offsets)
        if offsets:
            job.landed.extend(commit_runs(client, self._group_id, offsets))

    def _finish(self, job: CommitJob) -> None:
        try:
            job.after(job)
        except Exception:  # the commit is done all the same: its waiter must not wait on
            _log.exception("handling a commit's answer failed")
        with self._jobs_lock:
            self._current = None
            job.done.set()
            self._jobs_lock.notify_all()

    def _fail_all(self, error: Exception) -> None:
        _log.error("the commit client could not be made", error=type(error).__name__)
        with self._jobs_lock:
            self._closing = True
            self._broken = error
            jobs, self._jobs = list(self._jobs), deque()
        for job in jobs:
            job.error = error
            self._finish(job)


def _serve(client: CommitClient) -> None:
    """Serve the client's callbacks; one that raised (an ``oauth_cb``) is asked again later.

    confluent-kafka raises a callback's exception from ``poll()``: it ended this thread, and
    every commit after it waited for nothing (the review of 2026-11-29). A token that stays
    refused fails the commits themselves, which say so.
    """
    try:
        client.poll(0)
    except Exception as error:  # the user's callback: its words may hold a secret
        _log.warning("serving the commit client failed", error=type(error).__name__)
