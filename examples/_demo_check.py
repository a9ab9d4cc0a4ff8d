"""The demo's proof: the group's offsets, and "every event consumed exactly once" from reports.

Each worker (``examples/worker.py --report``) writes what it confirmed per partition as offset
runs, at each summary line and at exit. A SIGKILLed worker writes nothing at its death: its
last report can miss the batches it confirmed after it, which its commits (``commit="sync"``:
one at every confirm) show. :func:`add_committed_tail` puts those back, so that the check
covers the killed worker too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

Ranges = dict[str, tuple[int, int]]
"""``topic:partition`` -> ``[first, end)`` offsets."""

Report = dict[str, Any]
"""A worker's report: ``node_id``, ``partitions`` -> ``{"messages", "runs"}`` ..."""


class GroupOffsets:
    """A group's committed offsets and the partitions' watermarks, read without joining."""

    def __init__(self, bootstrap: str, group: str, topics: Mapping[str, int]) -> None:
        # committed() only reads the group's offsets; this consumer never joins the group.
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self._partitions = [
            KafkaTopicPartition(topic, number)
            for topic, count in topics.items()
            for number in range(count)
        ]

    def committed(self) -> dict[str, int | None]:
        """``topic:partition`` -> committed offset, or None when nothing is committed."""
        answers = self._consumer.committed(self._partitions, timeout=10)
        return {
            f"{tp.topic}:{tp.partition}": tp.offset if tp.offset >= 0 else None for tp in answers
        }

    def watermarks(self) -> Ranges:
        """``topic:partition`` -> (low, high) watermarks."""
        ranges = {}
        for tp in self._partitions:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=10)
            ranges[f"{tp.topic}:{tp.partition}"] = (low, high)
        return ranges

    def expected(self, ends: Mapping[str, int] | None = None) -> Ranges:
        """What the group reads: from its committed offset (else the low watermark) to the end.

        The end is ``ends``' offset, or the high watermark without ``ends``.
        """
        committed, ranges = self.committed(), {}
        for key, (low, high) in self.watermarks().items():
            first = committed[key]
            ranges[key] = (low if first is None else first, high if ends is None else ends[key])
        return ranges

    def close(self) -> None:
        """Close the client."""
        self._consumer.close()


def add_committed_tail(
    report: Report, committed: Mapping[str, int | None], expected: Ranges
) -> tuple[Report, int, list[str]]:
    """The killed worker's report with what it committed after its last one; the tail's size.

    For each partition the worker held, the runs it reported end at ``X``; the group's
    committed offset ``C`` (read after the kill, before anyone else held the partition) is where
    its confirms reached. ``[X, C)`` was confirmed and committed by it alone. ``C < X`` would
    mean it reported offsets it never committed, which its replacement then reads again.
    """
    problems: list[str] = []
    tail = 0
    partitions = {key: dict(value) for key, value in report.get("partitions", {}).items()}
    for key, offset in committed.items():
        first = expected.get(key, (0, 0))[0]
        runs = [list(run) for run in partitions.get(key, {}).get("runs", [])]
        reported_end = max((end for _, end in runs), default=first)
        reached = first if offset is None else offset
        if reached < reported_end:
            problems.append(f"{key}: reported up to {reported_end} but committed {reached}")
        elif reached > reported_end:
            runs.append([reported_end, reached])
            tail += reached - reported_end
            entry = partitions.setdefault(key, {"messages": 0, "runs": []})
            entry["messages"] = entry.get("messages", 0) + reached - reported_end
            entry["runs"] = runs
    return {**report, "partitions": partitions}, tail, problems


def check_exactly_once(reports: Sequence[Mapping[str, Any]], expected: Ranges) -> list[str]:
    """Problems with "each offset of each expected range consumed by exactly one worker, once".

    A partition may pass from one worker to another (a replacement, an elastic move): its
    offsets must then split between them, with nothing twice and nothing missing.
    """
    problems = []
    seen: dict[str, list[tuple[int, int]]] = {key: [] for key in expected}
    for report in reports:
        for key, partition in report["partitions"].items():
            seen.setdefault(key, []).extend((start, end) for start, end in partition["runs"])
    for key, runs in sorted(seen.items()):
        first, end = expected.get(key, (0, 0))
        position = first
        for start, stop in sorted(runs):
            if start < position:
                problems.append(f"{key}: offsets {start}..{min(stop, position) - 1} came twice")
            elif start > position:
                problems.append(f"{key}: offsets {position}..{start - 1} were never consumed")
            position = max(position, stop)
        if position < end:
            problems.append(f"{key}: offsets {position}..{end - 1} were never consumed")
        if position > end:
            problems.append(f"{key}: offsets beyond the end {end} were consumed")
    return problems
