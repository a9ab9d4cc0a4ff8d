"""Checks of the offsets a read asks for against the partitions it has, when they are applied.

Spark's own Kafka source asserts that offset JSON names exactly the partitions it reads, and
that no range ends before it starts. This source lets partitions be left out of the JSON
(docs/spark.md), but a topic or partition named that the read does not have is a typo that
would otherwise read everything, and an end before its start would read nothing: both are a
:class:`~client_balance.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition
from client_balance.spark._option_values import Offsets, shown

__all__ = ["refuse_reversed", "refuse_unknown"]

_SHOWN = 5  # topics or partitions named in an error; the count says how many more


def refuse_unknown(
    option: str, chosen: Offsets | None, read: Iterable[TopicPartition], *, left_out: str
) -> None:
    """Refuse ``chosen`` (JSON of ``option``) naming a topic or partition not in ``read``.

    ``left_out`` says what becomes of a partition the JSON leaves out, which stays allowed.
    """
    if not isinstance(chosen, Mapping):
        return
    have: dict[str, list[int]] = {}
    for tp in sorted(read):
        have.setdefault(tp.topic, []).append(tp.partition)
    topics = sorted(topic for topic in chosen if topic not in have)
    partitions = sorted(
        TopicPartition(topic, number)
        for topic, numbers in chosen.items()
        if topic in have
        for number in numbers
        if number not in have[topic]
    )
    if not topics and not partitions:
        return
    named = []
    if topics:
        named.append(_noun("topic", [shown(topic) for topic in topics]))
    if partitions:
        named.append(_noun("partition", [str(tp) for tp in partitions]))
    reads = "; ".join(f"{topic}:{_runs(numbers)}" for topic, numbers in sorted(have.items()))
    raise ConfigError(
        f"{option} names {' and '.join(named)}, which the read does not have (it reads "
        f"{_cut(reads.split('; '), '; ') if have else 'no partition'}); name only partitions "
        f"the read has, or leave a partition out {left_out}"
    )


def refuse_reversed(tp: TopicPartition, start: int, end: int, high: int) -> None:
    """Refuse a batch read of ``tp`` whose ``end`` comes before its ``start``.

    Both as asked, offsets and sentinels resolved; one above the high watermark means the high
    watermark, as everywhere in a read (it reads up to it), so that is no reversal.
    """
    if min(start, high) > min(end, high):
        raise ConfigError(
            f"the read of {tp} would end at offset {end}, before its start {start}; the end "
            "(endingOffsets or an ending timestamp) must not come before the start "
            "(startingOffsets, a starting timestamp or the group's committed offset)"
        )


def _noun(noun: str, names: list[str]) -> str:
    return f"{noun}{'s' if len(names) > 1 else ''} {_cut(names, ', ')}"


def _cut(names: list[str], separator: str) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return separator.join(names[:_SHOWN]) + more


def _runs(numbers: list[int]) -> str:
    """Sorted partition numbers as runs: ``0-3,5``."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
