"""A group's offsets without joining it: watermarks, committed offsets, commits, times."""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Literal, Protocol

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from client_balance._kafka._clients import group_client, kafka_tp
from client_balance._kafka._errors import from_kafka_exception
from client_balance._kafka._metadata import ask_watermarks
from client_balance._kafka._retry import call_until_transient_passes
from client_balance._logging import get_logger
from client_balance.errors import KafkaClientError
from client_balance.keys import TopicPartition
from client_balance.settings import KafkaValue

_log = get_logger("kafka")

ONE_BY_ONE_S = 1.0
"""With ``skip_unreadable``, what ``read_starts`` spends in all asking partitions one by one."""
COMMITTED_PATIENCE_S = 0.2
"""How long ``read_committed`` waits for the consumer's answer before asking a new client.

A consumer looks its group coordinator up once it is made, on its bootstrap connection, which
librdkafka drops as soon as the first metadata answer names the brokers. A lookup still on it
is lost, and librdkafka asks again on its coordinator-query interval, 0.5 to 1 s later: now and
then a start waited 0.7 s for its committed offsets that way (docs/design-decisions.md). The
answer takes a few milliseconds otherwise."""
SecondReader = Callable[[], Consumer]
"""Makes a new consumer of the same group: ``read_committed`` asks it when the first is slow."""

__all__ = [
    "COMMIT_REQUEST_BYTES",
    "Committing",
    "SecondReader",
    "commit_batches",
    "commit_offsets",
    "commit_runs",
    "offsets_for_times",
    "offsets_for_timestamps",
    "read_committed",
    "read_starts",
]


COMMIT_REQUEST_BYTES = 512 * 1024
"""Bound on the offset records one commit makes the group coordinator write. It writes a
commit's records as one batch, and refuses a batch over the offsets topic's 1 MB
(``RecordTooLargeException``): about 10,000 partitions of short names, 1,750 of the longest
(a 255-character group, 249-character topics). Larger commits go out in several requests."""
_OFFSET_RECORD_BYTES = 100
"""An offset record's size beside its group and topic names: key and value fields, framing."""
_SHOWN = 5  # partitions named in an error; the count says how many more
_TOPIC_BYTES_MAX = 249 * 4
"""Kafka's longest topic name (249 characters) in the widest UTF-8 (4 bytes a character)."""


def commit_batches(
    group_id: str, offsets: Sequence[KafkaTopicPartition]
) -> Iterator[list[KafkaTopicPartition]]:
    """``offsets`` in order, in runs whose offset records stay within COMMIT_REQUEST_BYTES."""
    fixed = _OFFSET_RECORD_BYTES + len(group_id.encode())
    if len(offsets) * (fixed + _TOPIC_BYTES_MAX) <= COMMIT_REQUEST_BYTES:  # the usual: one run
        yield list(offsets)
        return
    topic_bytes: dict[str, int] = {}
    batch: list[KafkaTopicPartition] = []
    size = 0
    for offset in offsets:
        topic = offset.topic
        record = topic_bytes.get(topic)
        if record is None:
            record = topic_bytes[topic] = fixed + len(topic.encode())
        if batch and size + record > COMMIT_REQUEST_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(offset)
        size += record
    if batch:
        yield batch


class Committing(Protocol):
    """A client that commits offsets and waits (confluent-kafka's ``Consumer``)."""

    def commit(
        self, *, offsets: list[KafkaTopicPartition], asynchronous: Literal[False]
    ) -> list[KafkaTopicPartition] | None: ...


def commit_runs(
    client: Committing, group_id: str, offsets: Sequence[KafkaTopicPartition]
) -> Iterator[int]:
    """Commit ``offsets`` and wait, run by run (``commit_batches``); yield each run's length.

    Raises ``KafkaException`` for a run refused as a whole or in part: the runs yielded
    before it stay committed.
    """
    for batch in commit_batches(group_id, offsets):
        answers = client.commit(offsets=batch, asynchronous=False)
        for answer in answers or ():
            if answer.error is not None:
                raise KafkaException(answer.error)
        yield len(batch)


def commit_offsets(
    bootstrap_servers: str,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_s: float = 30.0,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> None:
    """Commit ``offsets`` (next message to read) for ``group_id`` without joining it.

    A coordinator that is loading or moving is waited for, within ``timeout_s``.
    """
    if not offsets:
        return
    doing = f"committing offsets of group {group_id!r}"
    client = group_client(bootstrap_servers, group_id, kafka)

    every = [kafka_tp(tp, offset) for tp, offset in offsets.items()]

    def commit() -> None:
        done: list[str] = []  # committed before a run failed: the error must say so
        for run in commit_batches(group_id, every):
            try:
                answers = client.commit(offsets=run, asynchronous=False) or []
            except KafkaException as error:
                raise _partly(from_kafka_exception(error, doing), done, run) from error
            refused = [answer for answer in answers if answer.error is not None]
            done += [f"{a.topic}:{a.partition}" for a in answers if a.error is None]
            if refused:
                first = KafkaException(refused[0].error)
                raise _partly(from_kafka_exception(first, doing), done, refused) from first

    try:
        call_until_transient_passes(commit, timeout_s=timeout_s)
    finally:
        client.close()


def _partly(
    error: KafkaClientError, done: Sequence[str], refused: Sequence[KafkaTopicPartition]
) -> KafkaClientError:
    """``error``, saying which partitions were committed before it and which were not."""
    if not done:
        return error
    return KafkaClientError(
        f"{error}; committed before it failed: {_few(done)}; not committed: "
        f"{_few([f'{tp.topic}:{tp.partition}' for tp in refused])}",
        kafka_code=error.kafka_code,
        kafka_name=error.kafka_name,
        retriable=error.retriable,
    )


def _few(names: Sequence[str]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def offsets_for_times(
    bootstrap_servers: str,
    group_id: str,
    partitions: list[TopicPartition],
    stamp_ms: int,
    *,
    timeout_s: float = 30.0,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> dict[TopicPartition, int | None]:
    """Each partition's first offset at or after ``stamp_ms``; None where there is none."""
    return offsets_for_timestamps(
        bootstrap_servers,
        group_id,
        dict.fromkeys(partitions, stamp_ms),
        timeout_s=timeout_s,
        kafka=kafka,
    )


def offsets_for_timestamps(
    bootstrap_servers: str,
    group_id: str,
    stamps_ms: Mapping[TopicPartition, int],
    *,
    timeout_s: float = 30.0,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> dict[TopicPartition, int | None]:
    """Each partition's first offset at or after its own timestamp (ms); None where there is none.

    None: no message of the partition is that late (the caller decides: the end, or an error).
    """
    if not stamps_ms:
        return {}
    wanted = sorted(stamps_ms)
    client = group_client(bootstrap_servers, group_id, kafka)
    try:
        found = client.offsets_for_times(
            [kafka_tp(tp, stamps_ms[tp]) for tp in wanted], timeout=timeout_s
        )
    except KafkaException as error:
        doing = f"looking up the offsets of timestamps of {len(wanted)} partitions"
        raise from_kafka_exception(error, doing) from error
    finally:
        client.close()
    at = {TopicPartition(tp.topic, tp.partition): tp.offset for tp in found}
    return {tp: at[tp] if at.get(tp, -1) >= 0 else None for tp in wanted}


def read_starts(
    consumer: Consumer,
    wanted: Iterable[TopicPartition],
    timeout_s: float,
    *,
    through: AdminClient | None = None,
    read_committed_only: bool = True,
    skip_unreadable: bool = False,
    fallback: AdminClient | None = None,
    second_reader: SecondReader | None = None,
) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, int | None]]:
    """Watermarks and the group's committed offsets of partitions ``consumer`` is to hold.

    The watermarks come in two ListOffsets requests for all partitions (Kafka's "timestamps"
    -2 and -1 ask for the earliest and the latest offset), where ``get_watermark_offsets``
    would send two per partition, one after the other: registering is on the way to the first
    message. Both ask with the consumer's isolation level (``read_committed_only``). The two and
    the OffsetFetch go out at once: the three round trips would otherwise follow each other.

    ``through``: the watermarks are asked through this admin client instead. A broker answers
    the requests of one connection in turn, so a ListOffsets on the connection of a consumer
    that fetches waits behind its fetch, which the broker holds up to ``fetch.wait.max.ms``
    when there is nothing new: each of the two waited 100 ms while a member held partitions
    led by the same broker (docs/design-decisions.md). The committed offsets go to the group
    coordinator's own connection either way.

    ``fallback``: an admin client that asks, again in one request, what the consumer's
    answer lacks. The consumer answers all or nothing: one partition it cannot read costs
    every other its answer, where the admin client answers each partition on its own.

    ``second_reader``: see :func:`read_committed`.

    ``skip_unreadable``: a partition whose watermarks cannot be read now (its leader moved, or
    does not serve it yet) is left out of the answer, with a warning, instead of failing all
    of them; the partitions then asked one by one share ``ONE_BY_ONE_S`` in all: a topic just
    created with 5,000 partitions on one broker answered NOT_LEADER for each, one after the
    other, for tens of seconds.
    """
    partitions = list(wanted)
    if through is None:
        ranges, committed = _starts_from_consumer(consumer, partitions, timeout_s, second_reader)
    else:
        try:
            answers = ask_watermarks(
                through, partitions, timeout_s, read_committed_only=read_committed_only
            )
        except KafkaException:
            answers = dict  # each partition is asked on its own below
        committed = read_committed(consumer, partitions, timeout_s, second_reader=second_reader)
        ranges = answers()
    lacking = [tp for tp in partitions if tp not in ranges]
    if lacking and through is None and fallback is not None:
        with contextlib.suppress(KafkaException, KafkaClientError):  # then one by one
            ranges.update(
                ask_watermarks(
                    fallback, lacking, timeout_s, read_committed_only=read_committed_only
                )()
            )
    deadline_s = time.monotonic() + min(timeout_s, ONE_BY_ONE_S)
    unreadable: dict[TopicPartition, str] = {}
    for tp in partitions:
        if tp in ranges:
            continue
        left_s = deadline_s - time.monotonic() if skip_unreadable else timeout_s
        if left_s <= 0:
            unreadable[tp] = f"not asked: {ONE_BY_ONE_S:g} s went asking others one by one"
            continue
        # A partition the consumer's metadata does not know yet (added since it last looked),
        # or one the admin client got no answer for (no leader at that moment): the
        # per-partition query looks its leader up first, and may wait behind a fetch.
        try:
            ranges[tp] = consumer.get_watermark_offsets(kafka_tp(tp), timeout=left_s)
        except KafkaException as error:
            failed = from_kafka_exception(error, "reading offsets to start from")
            if not skip_unreadable:
                raise failed from error
            unreadable[tp] = str(failed)
    if unreadable:
        shown = sorted(unreadable)[:10]
        _log.warning(
            "offsets to start from could not be read; a later round asks for them again",
            count=len(unreadable), partitions=[str(tp) for tp in shown],
            error=unreadable[shown[0]],
        )  # fmt: skip
    return ranges, committed


def _starts_from_consumer(
    consumer: Consumer,
    partitions: list[TopicPartition],
    timeout_s: float,
    second_reader: SecondReader | None,
) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, int | None]]:
    def edge(spec: int) -> list[KafkaTopicPartition]:
        try:
            answer: list[KafkaTopicPartition] = consumer.offsets_for_times(
                [kafka_tp(tp, spec) for tp in partitions], timeout=timeout_s
            )
        except KafkaException:
            return []  # each partition is asked on its own (read_starts)
        return answer

    # From threads of their own: the client answers each call on its own.
    with concurrent.futures.ThreadPoolExecutor(
        2, thread_name_prefix="client-balance-starts"
    ) as pool:
        edges = [pool.submit(edge, spec) for spec in (OFFSET_BEGINNING, OFFSET_END)]
        committed = read_committed(consumer, partitions, timeout_s, second_reader=second_reader)
        low, high = (
            {(t.topic, t.partition): t.offset for t in e.result() if t.error is None} for e in edges
        )
    ranges = {}
    for tp in partitions:
        at = tp.topic, tp.partition
        if at in low and at in high:
            ranges[tp] = (low[at], high[at])
    return ranges, committed


def read_committed(
    consumer: Consumer,
    partitions: Iterable[TopicPartition],
    timeout_s: float,
    *,
    second_reader: SecondReader | None = None,
) -> dict[TopicPartition, int | None]:
    """The group's committed offset of each partition (one OffsetFetch); None: none committed.

    With ``second_reader``, a consumer that has not answered within ``COMMITTED_PATIENCE_S``
    is left waiting for its group coordinator and a new consumer of the group is asked.
    """
    wanted = [kafka_tp(tp) for tp in partitions]
    try:
        if second_reader is None or timeout_s <= COMMITTED_PATIENCE_S:
            answers = consumer.committed(wanted, timeout=timeout_s)
        else:
            answers = _committed_or_second(consumer, second_reader, wanted, timeout_s)
    except KafkaException as error:
        raise from_kafka_exception(error, "reading the group's committed offsets") from error
    failed = next((tp for tp in answers if tp.error is not None), None)
    if failed is not None:  # not "nothing committed": a start at the latest would skip messages
        doing = f"reading the group's committed offset of {failed.topic}:{failed.partition}"
        raise from_kafka_exception(KafkaException(failed.error), doing)
    return {
        TopicPartition(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None
        for tp in answers
    }


def _committed_or_second(
    consumer: Consumer,
    second_reader: SecondReader,
    wanted: list[KafkaTopicPartition],
    timeout_s: float,
) -> list[KafkaTopicPartition]:
    """``consumer``'s committed offsets, or a new reader's once it took COMMITTED_PATIENCE_S."""
    try:
        answers: list[KafkaTopicPartition] = consumer.committed(wanted, COMMITTED_PATIENCE_S)
        return answers
    except KafkaException as error:
        if error.args[0].code() != KafkaError._TIMED_OUT:
            raise
    _log.info("the group coordinator is slow to be found; asking a new client")
    reader = second_reader()
    try:
        return reader.committed(wanted, timeout=timeout_s - COMMITTED_PATIENCE_S)
    finally:
        reader.close()
