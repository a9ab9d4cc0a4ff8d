"""A consumer's side of the status topic: its reports, its claims, and fencing itself.

The member writes its first report at start and waits to read it back, so its view then holds
every record written before it joined. After that a thread writes a report on change and every
``report_interval_s``. A member that has not managed to write a report for nearly its lease
fences itself (``on_fenced(True)``): the others will soon consider it dead and take its
partitions, so it must stop fetching first. Once a report gets through again, and every commit
it made before has had its answer (``commits_settled()``), it is told (``on_fenced(False)``) and
claims afresh: the others, seeing it back, commit their positions again over any commit of its
that was held while it was cut off and landed only now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from client_balance._failure import keep_running
from client_balance._kafka import AdminClient, backoff_s, stopped, timed_out
from client_balance._logging import get_logger
from client_balance._metrics import NO_METRICS, Recorder
from client_balance.errors import (
    ClientBalanceError,
    ConfigError,
    KafkaClientError,
)
from client_balance.keys import TopicPartition
from client_balance.membership._checks import check_group, check_signing
from client_balance.membership._claims import MemberClaims
from client_balance.membership._keys import member_key
from client_balance.membership._log import open_status_topic
from client_balance.membership._lookups import GroupLookups
from client_balance.membership._records import MemberReport
from client_balance.membership._renewal import LogRenewal
from client_balance.membership._report import MAX_LEASE_S
from client_balance.membership._signing import status_secret
from client_balance.membership._upkeep import reap_dead, tombstone_defeated
from client_balance.settings import ClientBalanceSettings

__all__ = ["StatusMember"]

_log = get_logger("membership")

_SETTLE_POLL_S = 0.1
"""How often a fenced member whose report got through looks again for its commits' answers."""
_RETRY_REPORT_AT_MOST_S = 1.0
"""After a failed report the next comes this soon (a quarter interval, if shorter), then twice
as late after each failure, up to the interval: a whole interval later, the lease's margin had
passed and one refused report fenced a healthy member."""


class StatusMember(GroupLookups):
    """One consumer's membership of its group on the status topic."""

    def __init__(
        self,
        settings: ClientBalanceSettings,
        consumer_id: str,
        describe: Callable[[], MemberReport],
        *,
        on_change: Callable[[], None],
        on_fenced: Callable[[bool], None],
        admin: AdminClient | None = None,
        commits_settled: Callable[[], bool] = lambda: True,
        on_failure: Callable[[ClientBalanceError], None] = lambda _: None,
    ) -> None:
        self._settings = settings
        self._group = settings.group_id
        self._id = consumer_id
        self._describe = describe
        self._on_change = on_change
        self._on_fenced = on_fenced
        self._commits_settled = commits_settled
        self._on_failure = on_failure
        """Told what its threads' steps raise unexpectedly (``keep_running``); they go on."""
        self._awaiting_commits = False
        self._report_wait_s = settings.report_interval_s  # shorter after a failed report
        self._failed_reports = 0  # in a row
        timeout_s = settings.request_timeout_s
        kafka = settings.admin_config()
        topic = settings.status_topic
        if settings.lease_timeout_s > MAX_LEASE_S:
            raise ConfigError(
                f"lease_timeout_s={settings.lease_timeout_s} is longer than the status records "
                f"allow ({MAX_LEASE_S:g} s): the other members would skip this member's reports"
            )
        secret = self._secret = status_secret(settings)
        self._wake = threading.Event()
        self._writer, self._reader = open_status_topic(
            settings.bootstrap_servers, topic, self._group, kafka=kafka, timeout_s=timeout_s,
            secret=secret, on_change=on_change, admin=admin, on_failure=on_failure,
            allow_single_replica=settings.status_topic_single_replica_ok,
            partitions=settings.status_topic_partitions, on_new_log=self._wake_all,
        )  # fmt: skip
        self._reader.state.verdicts_of = consumer_id
        self._claims = MemberClaims(
            self._writer, self._reader, self._group, consumer_id, self._wait_applied
        )
        self._renewal = LogRenewal(settings, self._reader, self._claims, admin=admin,
                                   wake=self._wake_all, on_failure=on_failure)  # fmt: skip
        self._warned_unsigned: set[str] = set()
        self._join_offset: int | None = None
        self._fenced = False
        self.fences = 0
        """How many times the member fenced itself: a claim read back before one may be gone."""
        self._left = False
        self._last_written_s = 0.0  # monotonic time the last acknowledged report was sent
        # Fence with a margin: the others count the lease from when the last report landed,
        # which is after it was sent, and stopping the fetch takes a moment.
        self._fence_after_s = settings.lease_timeout_s - min(
            settings.report_interval_s, settings.lease_timeout_s / 3
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.recorder: Recorder = NO_METRICS
        """Told of each registration's claims won and lost (the consumer's metrics)."""

    # ------------------------------------------------------------------ lifecycle
    def join(self, claims: Iterable[TopicPartition] = ()) -> None:
        """Write the first report and claims on ``claims``, read up to them; then report.

        Written together, one write and one read-back. Claims lost are withdrawn; those won
        stand (:meth:`claimed`), and a :meth:`claim` of them later is won without a write.
        A join that fails (its write, or a check of what it read back) leaves before raising.
        """
        sent = time.monotonic()
        report = (member_key(self._group, self._id), self._report())
        try:
            offset, _ = self._claims.join(report, claims)  # counted when a registration claims
            self._join_offset, self._last_written_s = offset, sent
            self._check_layout()
        except BaseException:
            self.leave()  # not left to the caller: a Spark query's start keeps no member yet
            raise
        self._thread = threading.Thread(target=self._run, name="client-balance-report", daemon=True)
        self._thread.start()

    def leave(self) -> None:
        """Withdraw every claim and the report (a clean shutdown), and stop. Idempotent.

        All in one write: the others see one change, the member gone, and take its partitions
        in one round (withdrawn claims alone would wake a round whose target still gives the
        member its share, and the others would be busy with it when the report goes).
        """
        if self._left:
            return
        self._left = True
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        # The read that brings the leave back ends the reader: had it begun another poll, the
        # reader's close() waited that out (_READ_WAIT_S, 0.1 s of every other shutdown).
        self._reader.stop_following()
        try:
            records = self._claims.withdrawals()
            records.append((member_key(self._group, self._id), None))
            self._writer.write(records)
            self._claims.forget()
        except ClientBalanceError as error:
            _log.warning("could not withdraw from the status topic", error=str(error))
        finally:
            self._writer.close()
            self._reader.close()

    def _check_layout(self) -> None:
        """Refuse to join next to members that place groups with another partition count."""
        mine = self._settings.status_topic_partitions
        with self._reader.lock:
            others = {
                member_id: report.status_partitions
                for member_id, report in self._reader.state.live_reports().items()
                if member_id != self._id and report.status_partitions not in (0, mine)
            }
        if others:
            member_id, theirs = sorted(others.items())[0]
            raise ConfigError(
                f"status_topic_partitions={mine} differs from the live member {member_id}'s "
                f"{theirs} in group {self._group!r}: members that place the group on different "
                "status partitions do not see each other; give every member the same value"
            )

    @property
    def fenced(self) -> bool:
        """True while the member could not report within its lease."""
        return self._fenced

    # ------------------------------------------------------------------ group checks
    def check_group(self, me: MemberReport) -> None:
        """Raise :class:`GroupConflictError` if an earlier live member contradicts ``me``."""
        with self._reader.lock:
            check_group(self._reader.state, me, self._group)
            check_signing(
                self._reader.state, me.consumer_id, self._group,
                signs=self._secret is not None, warned=self._warned_unsigned,
            )  # fmt: skip

    # ------------------------------------------------------------------ claims
    def claim(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]:
        """Claim ``partitions``: None for each one won, else the live holder it lost to."""
        verdicts = self._claims.claim(partitions)
        if verdicts:
            lost = sum(holder is not None for holder in verdicts.values())
            self.recorder.claimed(len(verdicts) - lost, lost)
        return verdicts

    def withdraw(self, partitions: Iterable[TopicPartition]) -> None:
        """Withdraw the claims on ``partitions`` (after they are released)."""
        self._claims.withdraw(partitions)

    # ------------------------------------------------------------------ reports
    def report_soon(self) -> None:
        """Write a report now (what the member holds changed)."""
        self._wake.set()

    def _report(self) -> bytes:
        report = self._describe()
        return replace(
            report,
            join_offset=self._join_offset,
            fenced=self._fenced,
            lease_timeout_s=self._settings.lease_timeout_s,
            status_partitions=self._settings.status_topic_partitions,
        ).encode()

    def lease_ok(self) -> bool:
        """Whether this member's lease surely still holds, by its own clock.

        False once the last acknowledged report was sent ``fence_after_s`` ago or more: after
        failing writes, and also after a pause of the whole process (SIGSTOP, a long GC, a VM
        freeze), which no write ever reports. Checked by time alone, so it never waits on a
        write in flight. Batches are handed out and commits made only while it is True. False
        too once the status topic is seen gone or made anew, while the report thread may still
        wait on a write to it: the fence follows (``_renewal.py``).
        """
        if self._fenced or self._renewal.news() is not None:
            return False
        return time.monotonic() - self._last_written_s < self._fence_after_s

    def lease_in_doubt(self) -> bool:
        """Whether the lease is doubted only for news of the status log not yet asked again.

        One answer can be off (``LogRenewal.holds``): until the report thread has asked again,
        nothing is handed out (:meth:`lease_ok`), but nothing is let go either; the fence
        follows if the news holds.
        """
        return (
            not self._fenced
            and self._renewal.news() is not None
            and (time.monotonic() - self._last_written_s < self._fence_after_s)
        )

    def _wake_all(self) -> None:
        """The status topic was seen gone or made anew: the report thread and the round act."""
        self._wake.set()
        self._on_change()

    def _fence_if_silent(self) -> None:
        if time.monotonic() - self._last_written_s >= self._fence_after_s:
            self._fence("no report within the lease")

    def _fence(self, why: str) -> None:
        if not self._fenced:
            self._fenced = True
            self.fences += 1
            self._on_fenced(True)  # before the log: its handlers (or first import) may be slow
            _log.warning(f"fenced: {why}; stopped fetching")

    def _run(self) -> None:
        keep_running(self._report_once, self._stop, thread="status report",
                     on_failure=self._on_failure)  # fmt: skip

    def _report_once(self) -> None:
        awaiting_commits = self._awaiting_commits
        self._wake.wait(_SETTLE_POLL_S if awaiting_commits else self._report_wait_s)
        self._wake.clear()
        if self._stop.is_set() or (awaiting_commits and not self._report_due()):
            return
        self._renewal.ask()  # an answer that shows another log wakes this thread
        if self._renewal.news() is not None and self._renewal.holds():  # the leases are gone
            self._fence("the status topic was deleted or made anew")
            if not self._renewal.renew():
                return
            self._join_offset = None  # joined anew: the first report in the new log says when
        self._fence_if_silent()  # a pause of the whole process shows only here
        sent = time.monotonic()
        # Waiting on an unreachable broker past the fence would fence only once the write gave
        # up, after the others may have taken the partitions (request_timeout_s: lease / 2).
        left_s = None if self._fenced else self._fence_after_s - (sent - self._last_written_s)
        try:
            # Signed groups re-assert their claims with each report (see _claims.py); not
            # while fenced: those claims have lapsed and are claimed afresh.
            offset = self._claims.write_report(
                (member_key(self._group, self._id), self._report()),
                reassert=self._secret is not None and not self._fenced,
                within_s=left_s,
            )
            if self._fenced:
                # Others may have claimed meanwhile: read the log up to this report, so
                # holders() shows who holds what now before anything is fetched again.
                self._wait_applied(offset)
                self._join_offset = offset if self._join_offset is None else self._join_offset
                # Withdrawn, not forgotten: the fence comes before the others see the lease
                # lapse, and a claim they still count keeps what was dropped from everyone.
                self._claims.withdraw(self._claims.claimed())
        except KafkaClientError as error:
            silent_s = time.monotonic() - self._last_written_s
            _log.warning("status report failed", error=str(error), silent_s=round(silent_s))
            self._fence_if_silent()
            self._failed_reports += 1
            interval_s = self._settings.report_interval_s
            first_s = min(interval_s / 4, _RETRY_REPORT_AT_MOST_S)
            self._report_wait_s = backoff_s(
                self._failed_reports, first_s=first_s, most_s=interval_s
            )
            return
        self._last_written_s, self._report_wait_s = sent, self._settings.report_interval_s
        self._failed_reports = 0
        self._awaiting_commits = self._fenced and not self._commits_settled()
        if self._awaiting_commits:
            # Back only once it has landed: the others then see this member return after
            # it, and their commits on seeing that go over it (module docstring).
            _log.info("still fenced: a commit made before the fence has had no answer yet")
            return
        if self._fenced:
            self._fenced = False  # its claims are withdrawn: the next round claims afresh
            self._on_fenced(False)
        tombstone_defeated(self._writer, self._reader)
        reap_dead(self._writer, self._reader, self._id, self._settings.reap_after_s)

    def _report_due(self) -> bool:
        """Whether a report is due while fenced and awaiting commits: settled, or an interval."""
        since_s = time.monotonic() - self._last_written_s
        return self._commits_settled() or since_s >= self._settings.report_interval_s

    def _wait_applied(self, offset: int) -> None:
        timeout_s = self._settings.request_timeout_s
        if not self._reader.wait_applied(offset, timeout_s):
            if self._reader.stale:
                raise stopped(f"reading back record {offset} of the status topic: the topic "
                              "was made anew; the member fences and joins it again")  # fmt: skip
            raise timed_out(f"reading back record {offset} of the status topic", timeout_s)

    def claimed(self) -> set[TopicPartition]:
        """The partitions this member has claimed and not withdrawn."""
        return self._claims.claimed()

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop claims that lapsed or were lost without withdrawing them (nothing to write)."""
        self._claims.forget(partitions)
