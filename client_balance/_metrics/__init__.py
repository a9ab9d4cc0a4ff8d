"""Metrics: what the consumer counts, and where the counts go (docs/metrics.md).

The engine reports to a :class:`Recorder` at most once per batch, per confirm and per round,
never per message. The default recorder, :data:`NO_METRICS`, records nothing: with metrics off
each report is one call of an empty method. :func:`recorder_for` gives the Prometheus recorder
(``_prometheus``) when the application asked for metrics; ``prometheus_client`` (the extra
``client-balance[metrics]``) is imported only then, so the base install works without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["NO_METRICS", "HeldLags", "Recorder", "check_metrics", "recorder_for"]

HeldLags = Callable[[], Iterable[tuple[TopicPartition, int | None, int | None]]]
"""The partitions a member holds now, each with its lag (None while its high is unknown) and
its committed position (None before this member's first commit of it)."""

RoundOnce = Callable[[bool], None]


class Recorder:
    """What the engine reports; this one records nothing (metrics off)."""

    enabled = False

    def delivered(self, partition: TopicPartition, messages: int, start: int) -> None:
        """A batch of ``messages`` starting at ``start`` was handed to the application."""

    def settled(self, partition: TopicPartition, consumed: bool, position: int) -> None:
        """A batch was confirmed (``consumed``) or rolled back to ``position``."""

    def set_aside(self, partition: TopicPartition) -> None:
        """A batch rolled back too often was skipped (``redelivery_policy``)."""

    def claimed(self, won: int, lost: int) -> None:
        """Claims on the status topic: how many were won, how many lost to a live holder."""

    def fenced(self) -> None:
        """The member fenced itself: no report landed within its lease."""

    def statistics(self, text: str) -> None:
        """A librdkafka statistics document of the fetching client."""

    def timed(self, round_once: RoundOnce) -> RoundOnce:
        """``round_once``, counting rounds, their failures and their duration."""
        return round_once

    def watch(self, held: HeldLags) -> None:
        """Read the held partitions and their lag from ``held`` whenever metrics are read."""

    def close(self) -> None:
        """Stop serving and forget this member's gauges (its counters stay)."""


NO_METRICS = Recorder()
"""The recorder of a consumer without metrics."""


def check_metrics(settings: ClientBalanceSettings, registry: Any) -> Any:
    """``registry``; refused if it is not prometheus_client's, as are statistics nobody reads."""
    if registry is not None:
        registry_type = _prometheus_module().CollectorRegistry
        if not isinstance(registry, registry_type):
            raise ConfigError(
                f"metrics_registry must be a prometheus_client CollectorRegistry, not "
                f"{type(registry).__name__}"
            )
    wanted = registry is not None or settings.metrics_port is not None
    if settings.statistics_interval_ms and not wanted:
        raise ConfigError(
            f"statistics_interval_ms={settings.statistics_interval_ms} feeds the metrics, "
            "which are off: set metrics_port, give the consumer a metrics_registry, or set "
            "statistics_interval_ms=0"
        )
    return registry


def recorder_for(settings: ClientBalanceSettings, consumer_id: str, registry: Any) -> Recorder:
    """The recorder of one member: :data:`NO_METRICS` unless metrics were asked for.

    With ``metrics_port`` set, it serves ``registry`` (a registry of its own if None) over HTTP
    until :meth:`Recorder.close`.
    """
    if registry is None and settings.metrics_port is None:
        return NO_METRICS
    from client_balance._metrics._prometheus import PrometheusRecorder  # noqa: PLC0415 - the optional extra, only when asked for

    return PrometheusRecorder(settings, consumer_id, registry)


def _prometheus_module() -> Any:
    try:
        import prometheus_client  # noqa: PLC0415 - the optional extra, only when asked for
    except ImportError:
        raise ConfigError(
            "metrics need prometheus_client: pip install 'client-balance[metrics]'"
        ) from None
    return prometheus_client
