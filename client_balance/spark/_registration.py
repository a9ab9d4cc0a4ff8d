"""A streaming query as a member of its Kafka group on the status topic (mode ``spark``).

A streaming query with a ``group.id`` runs for hours next to the group's SDK workers, so it
takes part in the group's ownership the way a worker does: it joins the status topic as a
member of mode ``spark``, **claims** every partition it reads (a claim that loses to a live
worker fails the query: both would read the same messages) and **pins** them, so workers that
start later leave them alone (every mode takes other members' pins out of its target). Its
report carries each partition's position (the end of the last finished micro-batch), the
group's committed offset and the high watermark, so ``client-balance status`` shows the query
and its lag. When the query stops, Spark calls the stream reader's ``stop()`` and the member
leaves; if the driver dies, its lease lapses like any member's.

A ``spark`` member takes no part in the group checks (topics, source count, strategy): it does
not share the strategy's split, it only holds what it reads.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from types import FrameType
from typing import NoReturn

from client_balance._kafka import wait_until
from client_balance._logging import get_logger
from client_balance._version import __version__
from client_balance.errors import PartitionOccupiedError
from client_balance.keys import TopicPartition
from client_balance.membership import HeldPartition, MemberReport, StatusMember
from client_balance.settings import ClientBalanceSettings
from client_balance.spark._options import SourceOptions
from client_balance.spark._ownership import named_holders

__all__ = ["QueryMembership", "leave_on_terminate"]

_log = get_logger("spark")

SPARK_MODE = "spark"
_LEASE_WAIT_POLL_S = 0.05
_RETRY_CLAIM_S = 0.5
_LEAVE_ON_TERMINATE_S = 5.0


class QueryMembership:
    """A streaming query's membership of ``options.group_id`` (module docstring).

    ``hold`` joins on its first call and claims what is new on every later one; ``leave`` is
    idempotent. Not thread-safe: Spark calls a stream reader from one thread.
    """

    def __init__(
        self,
        options: SourceOptions,
        *,
        source_count: int,
        lease_timeout_s: float = 30.0,
        report_interval_s: float = 10.0,
    ) -> None:
        if options.group_id is None:
            raise ValueError("a query without group.id is no member of a group")
        self._options = options
        self._group_id = options.group_id
        self._source_count = source_count
        self._settings = ClientBalanceSettings(
            bootstrap_servers=options.bootstrap_servers,
            group_id=options.group_id,
            kafka=dict(options.kafka),
            status_topic=options.status_topic,
            lease_timeout_s=lease_timeout_s,
            report_interval_s=report_interval_s,
            request_timeout_s=min(10.0, lease_timeout_s / 2),  # the settings bound it by the lease
        )
        self._consumer_id = (
            f"{options.group_id}_{socket.gethostname()}-{os.getpid()}-"
            f"{uuid.uuid4().hex[:12]}-Spark-{__version__}"
        )
        self._positions: dict[TopicPartition, int] = {}
        self._highs: dict[TopicPartition, int] = {}
        self._status: StatusMember | None = None
        self._left = False

    @property
    def consumer_id(self) -> str:
        """``<group>_<host>-<pid>-<random>-Spark-<version>``: the query's member id."""
        return self._consumer_id

    def hold(
        self, positions: Mapping[TopicPartition, int], highs: Mapping[TopicPartition, int]
    ) -> None:
        """Hold ``highs``' partitions, standing at ``positions``; raise if a live member has one.

        Raises :class:`PartitionOccupiedError` naming the member when a partition is held or
        pinned by another live member: the query must not read beside it.
        """
        self._positions.update(positions)
        self._highs.update(highs)
        status = self._status
        if status is None:
            status = self._join()
        self._wait_for_lease(status)
        self._take(status, set(self._highs))
        status.report_soon()

    def _take(self, status: StatusMember, wanted: set[TopicPartition]) -> None:
        """Claim what of ``wanted`` is new; refuse if a live member holds or pinned one.

        A query restarted from its checkpoint may find its previous run still there: Spark
        stops a stream reader's process without notice, so that run's claims and pins stay
        until its process handles the signal, or its lease lapses. So while every member in
        the way is a ``spark`` member, this tries again until the longest of their leases
        has passed; any other member in the way refuses the query at once.
        """
        deadline_s: float | None = None
        while True:
            blocked = {
                tp: member
                for tp, member in status.pins().items()
                if tp in wanted and member != self._consumer_id
            }
            new = wanted - status.claimed() - blocked.keys()
            if new and not blocked:
                verdicts = status.claim(sorted(new))
                blocked = {tp: holder for tp, holder in verdicts.items() if holder}
            if not blocked:
                return
            reports = status.live_reports()
            # A member missing here lapsed since the verdict: the next try passes it.
            in_the_way = [reports[m] for m in sorted(set(blocked.values())) if m in reports]
            if any(report.mode != SPARK_MODE for report in in_the_way):
                self._refuse(blocked)  # leaving withdraws the claims won
            if deadline_s is None:
                longest_s = max(
                    (report.lease_timeout_s for report in in_the_way),
                    default=self._settings.lease_timeout_s,
                )
                deadline_s = time.monotonic() + longest_s + self._settings.request_timeout_s
                _log.info(
                    "waiting for an earlier query to leave", members=sorted(set(blocked.values()))
                )
            if deadline_s is not None and time.monotonic() > deadline_s:
                self._refuse(blocked)
            time.sleep(_RETRY_CLAIM_S)

    def leave(self) -> None:
        """Withdraw the claims and the report: the query stopped. Idempotent."""
        if self._left:
            return
        self._left = True
        if self._status is not None:
            self._status.leave()
            _log.info("streaming query left its group", consumer_id=self._consumer_id)

    def _join(self) -> StatusMember:
        status = StatusMember(
            self._settings,
            self._consumer_id,
            self._describe,
            on_change=_nothing,
            on_fenced=self._fenced,
        )
        status.join()
        self._status = status
        try:
            # Only the signing check bites: a spark member takes no part in the others.
            status.check_group(self._describe())
        except BaseException:
            self.leave()
            raise
        _log.info("streaming query joined its group", consumer_id=self._consumer_id)
        return status

    def _refuse(self, held: Mapping[TopicPartition, str]) -> NoReturn:
        self.leave()
        first, holder = sorted(held.items())[0]
        shown = named_holders(held)
        raise PartitionOccupiedError(
            f"live members of group {self._group_id!r} hold or pinned partitions this streaming "
            f"query reads: {shown}; stop them first, or set readHeldPartitions=true to read "
            "them anyway (read-only: the query then neither commits nor joins the group)",
            key=str(first),
            holder=holder,
        )

    def _wait_for_lease(self, status: StatusMember) -> None:
        """After a pause past the lease (a long GC of the driver), report before claiming."""
        if status.lease_ok():
            return
        status.report_soon()
        wait_until(
            status.lease_ok, timeout_s=self._settings.request_timeout_s,
            interval_s=_LEASE_WAIT_POLL_S,
        )  # fmt: skip

    def _fenced(self, fenced: bool) -> None:
        if fenced:
            # The claims lapse with the lease; the next hold() claims them afresh, or fails
            # the query if a worker took one meanwhile.
            _log.warning("streaming query missed its lease", consumer_id=self._consumer_id)

    def _describe(self) -> MemberReport:
        # Only what its claims won: a pin published before the claim would make a worker that
        # holds the partition give it up, where the query must be refused instead.
        claimed = set() if self._status is None else self._status.claimed()
        keys = sorted(tp for tp in self._highs if tp in claimed)
        committed = self._options.commit_to_kafka
        return MemberReport(
            consumer_id=self._consumer_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            node_id=0,
            source_count=self._source_count,
            topics=tuple(sorted({tp.topic for tp in keys} | set(self._options.topics))),
            strategy=self._options.strategy,
            version=__version__,
            lease_timeout_s=self._settings.lease_timeout_s,
            held={
                str(tp): HeldPartition(
                    confirmed=self._positions.get(tp, 0),
                    committed=self._positions.get(tp) if committed else None,
                    high=self._highs[tp],
                )
                for tp in keys
            },
            mode=SPARK_MODE,
            pinned=[str(tp) for tp in keys],
        )


def leave_on_terminate(membership: QueryMembership) -> None:
    """Leave the group when the process is terminated, then end as the signal would have.

    Spark stops a streaming query by terminating the stream reader's Python process, without
    calling ``stop()``: without this the query would hold its partitions for one more lease.
    That process serves this one reader, so its SIGTERM handler is the reader's to set; only
    from the main thread, where Python runs signal handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handle(signum: int, frame: FrameType | None) -> None:
        # In a thread of its own: the signal may have interrupted this thread inside hold(),
        # holding a lock that leaving takes. A leave that cannot finish soon is left to the lease.
        leaving = threading.Thread(target=membership.leave, name="client-balance-leave")
        leaving.start()
        leaving.join(_LEAVE_ON_TERMINATE_S)
        if previous == signal.SIG_IGN:
            return
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, handle)


def _nothing() -> None:
    """Changes of the group need no action: the query holds what it reads, whoever joins."""
