"""Kafka I/O of the status topic: opening it, and reading a group (``_writer``: writing).

The topic is compacted and stamps every record with the broker's log-append time, so leases
are judged by one clock. A group's records all go to the partition ``crc32(group) % n``, the
same for every member, so all of them read the group's records in one order.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from itertools import compress, count, repeat
from operator import contains, countOf, itemgetter
from typing import Any

from client_balance._failure import keep_running
from client_balance._kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    AdminClient,
    KafkaException,
    Message,
    from_kafka_exception,
    kafka_tp,
    reader_client,
    timed_out,
    wait_until,
)
from client_balance._logging import get_logger
from client_balance._secrets import scrub
from client_balance.errors import ClientBalanceError
from client_balance.keys import TopicPartition
from client_balance.membership._keys import quoted_group
from client_balance.membership._records import GroupState
from client_balance.membership._signing import RecordGate
from client_balance.membership._topic import (
    STATUS_TOPIC_CONFIG,
    ensure_status_topic,
    status_partition,
)
from client_balance.membership._writer import StatusWriter
from client_balance.settings import KafkaValue

__all__ = [
    "STATUS_TOPIC_CONFIG",
    "StatusReader",
    "ensure_status_topic",
    "open_status_topic",
    "status_partition",
]

_log = get_logger("membership")

_READ_WAIT_S = 0.1


def open_status_topic(
    bootstrap_servers: str,
    topic: str,
    group: str,
    *,
    kafka: Mapping[str, KafkaValue],
    timeout_s: float,
    secret: bytes | None,
    on_change: Callable[[], None],
    allow_single_replica: bool,
    partitions: int,
    admin: AdminClient | None = None,
    on_failure: Callable[[ClientBalanceError], None] = lambda _: None,
    on_new_log: Callable[[], None] = lambda: None,
) -> tuple[StatusWriter, StatusReader]:
    """Ensure the status topic (see :func:`ensure_status_topic`); ``group``'s writer and reader.

    Both connect, and the reader reads the group's history, while the topic is checked: a
    member's first message waits for all three. Neither can create the topic; if the check
    created it, both are made anew (librdkafka looks a missing topic up after 0.5 s).
    """
    partition = status_partition(group, partitions)

    def open_both() -> tuple[StatusWriter, StatusReader]:
        writer = StatusWriter(
            bootstrap_servers, topic, partition, kafka=kafka, timeout_s=timeout_s, secret=secret
        )
        reader = StatusReader(
            bootstrap_servers, topic, partition, group, kafka=kafka, timeout_s=timeout_s,
            on_change=on_change, secret=secret, on_failure=on_failure, on_new_log=on_new_log,
        )  # fmt: skip
        return writer, reader

    created: list[bool] = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ensured = pool.submit(
            ensure_status_topic, bootstrap_servers, topic, kafka=kafka, timeout_s=timeout_s,
            admin=admin, allow_single_replica=allow_single_replica, partitions=partitions,
            on_created=lambda: created.append(True),
        )  # fmt: skip
        writer, reader = open_both()
        try:
            ensured.result()
        except BaseException:
            created.append(False)  # neither is kept
            raise
        finally:
            if created:
                writer.close()
                reader.close()
    return open_both() if created else (writer, reader)


def _own_records(
    messages: list[Message], quoted: bytes
) -> tuple[list[int], list[int], list[int]] | None:
    """Where ``quoted``'s group's records are in ``messages``; every record's offset and stamp.

    C-level passes only: at a start the reader replays its whole partition, most of it other
    groups' records, holding the interpreter that the start's other threads wait for. None
    when the list needs the record-by-record loop: an event among the records, a record
    without a key, or one not stamped with the broker's log-append time.
    """
    if not messages or any(map(Message.error, messages)):
        return None
    keys: list[Any] = list(map(Message.key, messages))
    offsets: list[Any] = list(map(Message.offset, messages))
    times = list(map(Message.timestamp, messages))
    if None in keys or None in offsets:
        return None
    if countOf(map(itemgetter(0), times), TIMESTAMP_LOG_APPEND_TIME) != len(times):
        return None
    own = list(compress(count(), map(contains, keys, repeat(quoted))))
    return own, offsets, list(map(itemgetter(1), times))


class StatusReader:
    """Follows a group's status partition in a thread and keeps its :class:`GroupState`."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partition: int,
        group: str,
        *,
        kafka: Mapping[str, KafkaValue],
        timeout_s: float,
        on_change: Callable[[], None] = lambda: None,
        follow: bool = True,
        keep_records: bool = False,
        secret: bytes | None = None,
        on_failure: Callable[[ClientBalanceError], None] = lambda _: None,
        on_new_log: Callable[[], None] = lambda: None,
    ) -> None:
        self.state = GroupState(group)
        self.stale = False
        """Set when the partition handed out an offset below the position read (or this member's
        record landed below it): compaction never lowers an offset, so the topic was deleted
        and made anew. Nothing more is applied until :meth:`begin_anew`."""
        self._anew = False  # begin_anew asked of the reading thread
        self._group, self._secret, self._on_new_log = group, secret, on_new_log
        self.records: list[tuple[bytes | None, bytes | None, int, int]] | None = (
            [] if keep_records else None
        )
        """Every record read as (key, value, offset, broker ms), when ``keep_records``; with a
        ``secret``, only the validly signed ones."""
        self._gate = RecordGate(secret)
        self._quoted = quoted_group(group)
        self._logged: set[str] = set()  # skip reasons already logged: once each per reader
        self._on_change = on_change
        self._kafka = kafka  # what librdkafka's words are scrubbed of
        self._consumer = reader_client(
            {
                **kafka,
                "bootstrap.servers": bootstrap_servers,
                "group.id": f"__client_balance_status_reader-{uuid.uuid4().hex}",
                # librdkafka's 500 ms long poll: the broker answers it as soon as a record
                # lands, so a shorter one only adds empty fetches. 10 ms made every idle
                # member fetch 100 times a second (8 idle members: 7.6% of a broker's CPU).
                "fetch.wait.max.ms": 500,
                "fetch.queue.backoff.ms": 10,
            }
        )
        # An absolute start offset: librdkafka resolves OFFSET_BEGINNING with a delay of about
        # 0.5 s, which every start() of a member would wait for. Compaction keeps offsets, so
        # the log starts at 0 unless records were deleted; then "earliest" takes over.
        self._partition = TopicPartition(topic, partition)
        self._consumer.assign([kafka_tp(self._partition, 0)])
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if follow:
            loop = partial(keep_running, thread="status", on_failure=on_failure)
            self._thread = threading.Thread(target=loop, args=(self._read_once, self._stop),
                                            name="client-balance-status", daemon=True)  # fmt: skip
            self._thread.start()

    def _read_once(self) -> None:
        with self._lock:
            if self._anew:
                self._begin_anew()
            stale = self.stale
        if stale:  # a new log's records on the old log's state would give false verdicts
            self._stop.wait(_READ_WAIT_S)
            return
        try:
            # consume() would wait out its timeout unless the whole batch arrived: poll() for
            # the first record, then take what else is there.
            first = self._consumer.poll(_READ_WAIT_S)
            messages = [] if first is None else [first]
            if first is not None:
                messages += self._consumer.consume(num_messages=10_000, timeout=0)
        except KafkaException as error:
            _log.warning("reading the status topic failed", error=scrub(str(error), self._kafka))
            return
        with self._lock:
            changed = self._apply_all(messages)
            went_back = self.stale
            self._lock.notify_all()
        if went_back:
            self._on_new_log()
        if changed:
            self._on_change()

    def landed(self, offset: int, read_before: int) -> None:
        """A record this member wrote landed at ``offset``, when the position was ``read_before``.

        Records land at the log's end, which nothing read before the write is past: lower, it is
        a new log, whose low offsets the reader may not reach for long (it asks the old position
        on). The position now may be past ``offset``: the reader may have read it already.
        """
        with self._lock:
            if self.stale or offset >= read_before:
                return
            self.stale = True
            self._lock.notify_all()
        _log.warning("the status topic is a new log: a record landed below the position read",
                     offset=offset, position=read_before)  # fmt: skip
        self._on_new_log()

    def begin_anew(self, timeout_s: float) -> bool:
        """Read the log again from its start into a fresh state; False if not begun in time.

        For a topic made anew: its records say nothing of the old log's, so the state, the
        signatures seen (a new writer numbering from 0 is no replay) and the kept records go.
        """
        with self._lock:
            if self._thread is None:
                self._begin_anew()
                return True
            self._anew = True
            return self._lock.wait_for(lambda: not self._anew, timeout_s)

    def _begin_anew(self) -> None:
        verdicts_of, self.state = self.state.verdicts_of, GroupState(self._group)
        self.state.verdicts_of = verdicts_of
        self._gate = RecordGate(self._secret)
        self.records = None if self.records is None else []
        self._consumer.assign([kafka_tp(self._partition, 0)])
        self.stale = self._anew = False
        self._lock.notify_all()

    def _apply_all(self, messages: list[Message]) -> bool:
        """Apply what one read returned; True if it changed members or holders.

        The topic is shared by every group of the cluster, and a member's start reads all of
        its partition: another group's record, told by its key, only moves the position and
        the clock, as applying it would, without the calls that apply one (3,591 records took
        9 ms of CPU that way, on the way to every first message). Kept records need them all,
        and so does a reader with a secret: a record signed with it moves the clock, one not
        signed does not, and telling which takes the signature's check.
        """
        first = next((m.offset() for m in messages if m.error() is None), None)
        if first is not None and first < self.state.position:
            self.stale = True
            _log.warning("the status topic is a new log: its offsets went back",
                         offset=first, position=self.state.position)  # fmt: skip
            return False
        passing = self.records is None and not self._gate.verifies
        own = _own_records(messages, self._quoted) if passing else None
        if own is not None:
            return self._pass_over_runs(messages, *own)
        state = self.state
        changed = passed = False
        for message in messages:
            offset = message.offset()
            if message.error() is not None or offset is None:
                continue  # an end-of-partition event, or a fetch error librdkafka retries
            kind, stamp = message.timestamp()
            if kind != TIMESTAMP_LOG_APPEND_TIME:
                stamp = int(time.time() * 1000)  # a foreign record; never decides a lease
            key = message.key()
            if passing and (key is None or self._quoted not in key):
                state.pass_over(offset, stamp)
                passed = True
                continue
            if passed:  # a lease may have run out by the time of the records passed over
                changed |= state.lapsed()
                passed = False
            changed |= self._apply(message, offset, stamp)
        return (passed and state.lapsed()) or changed

    def _pass_over_runs(
        self, messages: list[Message], own: list[int], offsets: list[int], stamps: list[int]
    ) -> bool:
        """:meth:`_apply_all`'s loop with each run of other groups' records passed over at once."""
        state, changed, start = self.state, False, 0
        for index in [*own, len(messages)]:
            if index > start:
                state.pass_over(max(offsets[start:index]), max(stamps[start:index]))
                if index == len(messages):
                    return state.lapsed() or changed
                changed |= state.lapsed()  # a lease may have run out by the time of the run
            if index < len(messages):
                changed |= self._apply(messages[index], offsets[index], stamps[index])
            start = index + 1
        return changed

    def _apply(self, message: Message, offset: int, stamp: int) -> bool:
        """Apply one record, or skip it; never raise (one bad record must not stop the reader)."""
        key, value, headers = message.key(), message.value(), message.headers()
        skipped = self.state.last_skipped
        changed = False
        try:
            applied, changed = self._gate.admit(
                self.state, key, value, headers, offset=offset, timestamp_ms=stamp
            )
            if applied and self.records is not None:
                self.records.append((key, value, offset, stamp))
        except Exception:  # a bug, not a record's fault: log it, and read on
            self.state.position = max(self.state.position, offset + 1)
            if "error" not in self._logged:
                self._logged.add("error")
                _log.exception("status record could not be applied", offset=offset)
        now = self.state.last_skipped
        if now is not skipped and now is not None:
            log = _log.debug if now.reason in self._logged else _log.warning
            self._logged.add(now.reason)
            log(
                "status record skipped", reason=now.reason, detail=now.detail, key=now.key,
                offset=now.offset, skipped=self.state.skipped.get(now.reason, 0),
            )  # fmt: skip
        return changed

    def wait_applied(self, offset: int, timeout_s: float) -> bool:
        """Wait until the record at ``offset`` is applied; False at timeout, or if ``stale``.

        A stale position is past any offset of a new log: it would say the record is read.
        """
        with self._lock:
            self._lock.wait_for(lambda: self.stale or self.state.position > offset, timeout_s)
            return not self.stale and self.state.position > offset

    def read_to_end(self, timeout_s: float) -> None:
        """Without a thread: read up to the end the log has now (for one-off views).

        Up to the high watermark taken first, not to an end-of-partition event: while members
        keep writing, a reader may never see the log stand still at its end.
        """
        try:
            _, end = self._consumer.get_watermark_offsets(
                kafka_tp(self._partition), timeout=timeout_s
            )
        except KafkaException as error:
            raise from_kafka_exception(error, "reading the status topic") from error

        def read_reaches_end() -> bool:
            if self.state.position < end:
                self._read_once()
            return self.state.position >= end

        if not wait_until(read_reaches_end, timeout_s=timeout_s, interval_s=0.0):
            raise timed_out("reading the status topic to its end", timeout_s)

    @property
    def lock(self) -> threading.Condition:
        """Held while records are applied; hold it to read the state consistently."""
        return self._lock

    def stop_following(self) -> None:
        """End the reading thread after the read in progress (:meth:`close` waits for it)."""
        self._stop.set()

    def close(self) -> None:
        """Stop following and drop the client."""
        self.stop_following()
        if self._thread is not None:
            self._thread.join()
        self._consumer.close()
