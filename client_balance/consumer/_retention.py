"""Retention overtaking a held partition: restart at the log start, report what was lost.

The fetching client runs with ``auto.offset.reset=error``: librdkafka's own reset would jump
to "latest" (or "earliest") without a word, and the next confirm would commit over messages
that still existed and were never delivered. Instead the fetch error names the partition and
the position, and the fetcher restarts the partition at the log start itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial

from client_balance._kafka import Consumer, KafkaException, kafka_tp
from client_balance._logging import get_logger
from client_balance._secrets import scrub
from client_balance.consumer._buffers import HeldPartition
from client_balance.keys import TopicPartition

__all__ = ["restart_at_log_start", "restart_out_of_range"]

_log = get_logger("fetch")


def restart_at_log_start(
    consumer: Consumer,
    state: HeldPartition,
    position: int,
    timeout_s: float,
    *,
    cut: Callable[[int], None] | None = None,
) -> None:
    """Fetch ``state``'s partition again from its log start; count the offsets retention took.

    Called holding the client lock. Messages already buffered stay: they were read before the
    deletion. If the log start cannot be read now, the partition is assigned at ``position``
    again, which fails the same way and brings the fetcher back here on a later fetch.

    With ``cut``, the log was truncated under the partition: a new leader's log that ends
    below ``position``, where the application stands, is read on from its end, not its start
    (the start is for a topic made anew); what it lacks was delivered already. ``cut`` gets
    the restart, before the assign.
    """
    tp = kafka_tp(state.partition)
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
    except KafkaException as error:
        _log.warning(
            "could not read the log start", partition=str(state.partition), error=scrub(str(error))
        )
        low = high = position
    if position > high and cut is not None:
        restart = max(int(low), int(high))
        _log.warning(
            "the new log ends below where the application stands; reading on from its end",
            partition=str(state.partition),
            stands=position,
            restart_at=restart,
        )
    elif position > high:
        # Past the end: the log is another one now (its topic was deleted and created again).
        # Everything in it is new to us.
        _log.warning(
            "position beyond the end of the log; reading it from its start",
            partition=str(state.partition),
            position=position,
            restart_at=int(low),
        )
        restart = int(low)
    else:
        restart = max(int(low), position)
    if position > high:  # another log: what was counted of the old one says nothing here
        state.lost_counted_to = 0
    # Counted once: a rollback to before offsets counted already would count them again.
    lost = max(restart - max(position, state.lost_counted_to), 0)
    state.lost_counted_to = max(state.lost_counted_to, restart)
    if lost:
        state.lost_to_retention += lost
        _log.warning(
            "retention removed messages before they were delivered",
            partition=str(state.partition),
            first_lost=position,
            lost=lost,
            restart_at=restart,
        )
    if cut is not None:
        cut(restart)
    consumer.incremental_unassign([tp])
    consumer.incremental_assign([kafka_tp(state.partition, restart)])
    consumer.resume([tp])  # a pause survives unassign and assign (see Fetcher._hold)
    # Said so, or a full buffer would never pause it again. Every write of the flag is made
    # under the client lock, which the caller holds.
    state.paused = False


def restart_out_of_range(
    consumer: Consumer,
    held: Mapping[TopicPartition, HeldPartition],
    out_of_range: Iterable[tuple[str | None, int | None, int | None]],
    timeout_s: float,
    cut: Callable[[HeldPartition, int], None] = lambda _state, _restart: None,
) -> None:
    """Restart each held partition that a fetch found out of range (``FetchErrors.drop``).

    A reset without a position is librdkafka finding the log truncated (a new leader's log
    ends below what was fetched): it stopped fetching the partition. What was buffered may be
    the old leader's messages the new log no longer has, so it is dropped (``cut``, under the
    fetcher's lock, which also holds the partition's positions to the restart), and the
    partition restarts where the application stands: its confirmed position, or the end of the
    batch it has out; or the new log's end, if that is lower. Skipped, it stayed held and
    silent; restarted at its log start, the whole log came again.
    """
    for topic, number, position in out_of_range:
        if topic is None or number is None:
            continue
        state = held.get(TopicPartition(topic, number))
        if state is None or state.releasing or state.rewinding or state.evicted:
            continue
        if position is not None:
            restart_at_log_start(consumer, state, position, timeout_s)
            continue
        stands = state.batch.end if state.batch is not None else state.confirmed
        if state.cut_to is not None:  # cut once already under this batch: it stands there
            stands = min(stands, state.cut_to)
        _log.warning("log truncated under the partition; restarting it",
                     partition=str(state.partition), position=stands)  # fmt: skip
        restart_at_log_start(consumer, state, stands, timeout_s, cut=partial(cut, state))
