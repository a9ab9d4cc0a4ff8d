"""``failOnDataLoss``: offsets a read needs that Kafka no longer has, on the driver and in tasks.

The driver finds a requested start below a partition's log start when it plans the read; a
task finds offsets deleted after that (``_kafka._ranges``). Either way, ``failOnDataLoss=true``
raises :class:`~client_balance.errors.DataLossError` naming the partition and the lost range,
and ``false`` reads on from where the log starts, with a warning that counts what was lost.

A stream's planner also finds partitions of its last offsets that are gone (their topic was
deleted) and partitions whose log now ends below where the stream stands (the topic deleted
and re-created, or the log truncated): Spark's own Kafka source counts both as data loss too.
"""

from __future__ import annotations

from collections.abc import Mapping

from client_balance._logging import get_logger
from client_balance.errors import DataLossError
from client_balance.keys import TopicPartition

__all__ = ["report_gone", "report_loss", "report_reset"]

_log = get_logger("spark")
_SHOWN = 5  # partitions named in a message; the count says how many more


def report_loss(error: DataLossError, *, fail: bool) -> None:
    """Raise ``error`` (with how to read on anyway) if ``fail``, else log it as a warning."""
    if fail:
        raise DataLossError(
            f"{error.message}; set the option failOnDataLoss=false to read on from offset "
            f"{error.lost_to} instead",
            partition=error.partition,
            lost_from=error.lost_from,
            lost_to=error.lost_to,
        )
    _log.warning(
        "data lost, reading on (failOnDataLoss=false)",
        partition=error.partition,
        lost_from=error.lost_from,
        lost_to=error.lost_to,
        lost_messages=error.lost_to - error.lost_from,
    )


def report_gone(gone: Mapping[TopicPartition, int], *, fail: bool) -> None:
    """Partitions of the stream's last offsets that Kafka no longer has: their topic was deleted.

    Raises ``DataLossError`` if ``fail``: what was written after the stream's offset before the
    deletion cannot be known, so ``lost_from`` and ``lost_to`` are both that offset (the first
    partition's). Otherwise warns; the stream goes on with the partitions that exist.
    """
    ordered = sorted(gone.items())
    if fail:
        shown = ", ".join(f"{tp} at offset {offset}" for tp, offset in ordered[:_SHOWN])
        more = f" and {len(ordered) - _SHOWN} more" if len(ordered) > _SHOWN else ""
        first, offset = ordered[0]
        raise DataLossError(
            f"planning the next micro-batch: partitions the stream has read are gone from "
            f"Kafka (their topic was deleted): {shown}{more}; messages written to them after "
            "those offsets may never have been read; set the option failOnDataLoss=false to go "
            "on with the partitions that exist",
            partition=str(first),
            lost_from=offset,
            lost_to=offset,
        )
    _log.warning(
        "partitions gone from Kafka, going on without them (failOnDataLoss=false)",
        partitions=[str(tp) for tp, _ in ordered],
        offsets=[offset for _, offset in ordered],
    )


def report_reset(
    tp: TopicPartition, checkpointed: int, high: int, *, low: int | None, fail: bool
) -> None:
    """``tp``'s log ends at ``high``, below the stream's ``checkpointed`` offset.

    Its topic was deleted and re-created, or its log truncated: the old log's messages after
    ``checkpointed`` may never have been read, and the offsets now name other messages. Raises
    ``DataLossError`` (``[lost_from, lost_to)`` is ``[high, checkpointed)``: offsets the stream
    counted that the log no longer has) if ``fail``; otherwise warns, and the caller reads the
    partition again from its log start (``low``, None where not asked), as Spark's source
    reports "offset was changed from X to Y".
    """
    start = "its log start" if low is None else f"its log start, offset {low}"
    if fail:
        raise DataLossError(
            f"planning the next micro-batch: {tp} (topic {tp.topic!r}, partition "
            f"{tp.partition}) ends at offset {high}, below offset {checkpointed} where the "
            "stream's checkpoint stands: the topic was deleted and re-created, or the log "
            "truncated, so messages of the old log may never have been read; set the option "
            f"failOnDataLoss=false to read the partition again from {start}",
            partition=str(tp),
            lost_from=high,
            lost_to=checkpointed,
        )
    _log.warning(
        "offset was changed, reading the partition again from its log start (failOnDataLoss=false)",
        partition=str(tp),
        changed_from=checkpointed,
        changed_to=high,
        read_from=low,
    )
