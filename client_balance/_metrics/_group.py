"""A whole group's lag for Prometheus, read from the status view at each scrape.

The figures ``client-balance status`` shows (``admin.GroupView``): per partition of the live
members' topics, the group's committed offset, the high watermark and their difference, and
who holds it; per group, its live members and orphaned partitions. Nothing joins the group.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from client_balance.admin import GroupView
from client_balance.errors import ClientBalanceError
from client_balance.settings import ClientBalanceSettings

__all__ = ["GroupLagCollector"]

_PARTITION = ["group", "topic", "partition"]


class GroupLagCollector(Collector):
    """Collects one group's view, once per scrape; ``client_balance_group_up`` 0 if it failed."""

    def __init__(self, settings: ClientBalanceSettings, group: str, timeout_s: float) -> None:
        self._settings = settings
        self._group = group
        self._timeout_s = timeout_s

    def describe(self) -> Iterator[Any]:
        """The families with no samples (so a registry refuses their names twice)."""
        return iter(_families().values())

    def collect(self) -> Iterator[Any]:
        """The group's view now."""
        families = _families()
        group = self._group
        try:
            view = GroupView.load(self._settings, group, timeout_s=self._timeout_s)
        except ClientBalanceError as error:
            families["up"].add_metric([group], 0)
            families["error"].add_metric([group, type(error).__name__], 1)
            return iter(families.values())
        families["up"].add_metric([group], 1)
        families["live"].add_metric([group], len(view.live_members))
        families["orphaned"].add_metric([group], len(view.orphaned))
        families["skipped"].add_metric([group], view.skipped_records)
        for partition in view.partitions:
            labels = [group, partition.topic, str(partition.partition)]
            if partition.lag is not None:
                families["lag"].add_metric(labels, partition.lag)
            if partition.committed is not None:
                families["committed"].add_metric(labels, partition.committed)
            if partition.high is not None:
                families["high"].add_metric(labels, partition.high)
            if partition.holder is not None:
                families["holder"].add_metric([*labels, partition.holder], 1)
        return iter(families.values())


def _families() -> dict[str, GaugeMetricFamily]:
    name = "client_balance_group_"
    return {
        "up": GaugeMetricFamily(
            f"{name}up", "1 if the last scrape read the group's view, else 0.", labels=["group"]
        ),
        "error": GaugeMetricFamily(
            f"{name}scrape_error",
            "1, labelled with the error's type, when the scrape could not read the view.",
            labels=["group", "error"],
        ),
        "live": GaugeMetricFamily(
            f"{name}live_members", "Members whose lease has not run out.", labels=["group"]
        ),
        "orphaned": GaugeMetricFamily(
            f"{name}orphaned_partitions",
            "Partitions of the live members' topics that no live member holds.",
            labels=["group"],
        ),
        "skipped": GaugeMetricFamily(
            f"{name}skipped_status_records",
            "Status records of the group not applied (malformed, unsigned, replayed).",
            labels=["group"],
        ),
        "lag": GaugeMetricFamily(
            f"{name}lag_messages",
            "High watermark minus the group's committed offset (all of it if none).",
            labels=_PARTITION,
        ),
        "committed": GaugeMetricFamily(
            f"{name}committed_offset", "The group's committed offset.", labels=_PARTITION
        ),
        "high": GaugeMetricFamily(
            f"{name}high_watermark", "The partition's high watermark.", labels=_PARTITION
        ),
        "holder": GaugeMetricFamily(
            f"{name}partition_holder",
            "1 for the live member holding the partition (label consumer).",
            labels=[*_PARTITION, "consumer"],
        ),
    }
