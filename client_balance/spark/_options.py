"""The options of the ``client_balance`` data source, checked in one place.

Every mistake raises :class:`~client_balance.errors.ConfigError` naming the option, the value
and what is allowed. Offsets in JSON follow Spark's Kafka source: ``{"topic": {"0": 23}}``,
with -2 = earliest and -1 = latest; -3 = the group's committed offset (Flink's sentinel), which
is what ``startingOffsets=committed`` means for every partition.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from client_balance.errors import ConfigError
from client_balance.keys import check_topic_name
from client_balance.strategies import get_strategy

__all__ = ["COMMITTED", "EARLIEST", "LATEST", "SourceOptions", "parse_options"]

EARLIEST, LATEST, COMMITTED = -2, -1, -3
_NAMED = {"earliest": EARLIEST, "latest": LATEST, "committed": COMMITTED}
# librdkafka keys the source sets itself: the group id has its own option.
_OWNED = ("group.id", "enable.auto.commit", "bootstrap.servers")


@dataclass(frozen=True)
class SourceOptions:
    """The parsed options."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    group_id: str | None
    source_count: int | None
    """None: the driver's CPU count (Spark's default parallelism in local mode)."""
    strategy: str
    starting: dict[str, dict[int, int]] | int
    """A sentinel for every partition, or per topic -> partition -> offset or sentinel."""
    ending: dict[str, dict[int, int]] | int
    kafka: dict[str, str]
    batch_max_messages: int
    commit_to_kafka: bool = True
    """Streaming: commit each finished micro-batch's end to ``group_id``."""
    max_offsets_per_trigger: int | None = None
    """Streaming: most messages per micro-batch (None: all available)."""

    def kafka_config(self, group_id: str) -> dict[str, str]:
        """Librdkafka configuration of the task's reader."""
        return {**self.kafka, "bootstrap.servers": self.bootstrap_servers, "group.id": group_id}

    def nodes(self, partitions: int) -> int:
        """How many nodes (Spark tasks) read ``partitions`` partitions."""
        wanted = self.source_count or os.cpu_count() or 1
        return max(1, min(wanted, partitions)) if self.source_count is None else wanted


def _offsets(
    name: str, value: str | None, default: int, allowed: set[str]
) -> dict[str, dict[int, int]] | int:
    if value is None:
        return default
    text = value.strip()
    if text.lower() in allowed:
        return _NAMED[text.lower()]
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(
            f"{name}={value!r} is not allowed; use {', '.join(sorted(allowed))} or JSON such as "
            '{"orders": {"0": 23, "1": -2}} (-2 earliest, -1 latest, -3 committed)'
        )
    offsets: dict[str, dict[int, int]] = {}
    for topic, per_partition in parsed.items():
        if not isinstance(per_partition, dict):
            raise ConfigError(f"{name}: topic {topic!r} needs an object of partition -> offset")
        offsets[topic] = {}
        for number, offset in per_partition.items():
            if not str(number).isdecimal() or type(offset) is not int or offset < COMMITTED:
                raise ConfigError(
                    f"{name}: {topic!r} partition {number!r} offset {offset!r} is not allowed; "
                    "use partition numbers and offsets >= 0, or -2, -1, -3"
                )
            offsets[topic][int(number)] = offset
    return offsets


def _positive_int(name: str, value: str | None, default: int | None) -> int | None:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{name}={value!r} is not allowed; use a whole number >= 1")
    return number


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check the reader options (keys compared without case, as Spark does)."""
    given = {key.lower(): value for key, value in options.items()}
    servers = given.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise ConfigError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    topics = tuple(t.strip() for t in given.get("topics", "").split(",") if t.strip())
    if not topics:
        raise ConfigError("option topics is required: a comma-separated list of topics")
    for topic in topics:
        check_topic_name(topic)
    strategy = given.get("strategy", "modulo")
    # A registered name, an entry point's or a module:attr reference; ConfigError lists them.
    get_strategy(strategy)
    starting = _offsets("startingOffsets", given.get("startingoffsets"), COMMITTED, set(_NAMED))
    ending = _offsets("endingOffsets", given.get("endingoffsets"), LATEST, {"latest"})
    group_id = given.get("group.id") or None
    needs_group = starting == COMMITTED or (
        isinstance(starting, dict)
        and any(o == COMMITTED for per in starting.values() for o in per.values())
    )
    if needs_group and group_id is None:
        raise ConfigError(
            "option group.id is required with startingOffsets=committed (the default): it names "
            "the Kafka group whose committed offsets the read starts from"
        )
    kafka = {}
    for key, value in given.items():
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers":
            name = key.removeprefix("kafka.")
            if name in _OWNED:
                raise ConfigError(f"option {key} is not allowed; use the option group.id")
            kafka[name] = value
    return SourceOptions(
        bootstrap_servers=servers,
        topics=topics,
        group_id=group_id,
        source_count=_positive_int("sourceCount", given.get("sourcecount"), None),
        strategy=strategy,
        starting=starting,
        ending=ending,
        kafka=kafka,
        batch_max_messages=_positive_int("batchMaxMessages", given.get("batchmaxmessages"), 10_000)
        or 10_000,
        commit_to_kafka=_flag("commitToKafka", given.get("committokafka"), default=True),
        max_offsets_per_trigger=_positive_int(
            "maxOffsetsPerTrigger", given.get("maxoffsetspertrigger"), None
        ),
    )


def _flag(name: str, value: str | None, *, default: bool) -> bool:
    if value is None:
        return default
    if value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise ConfigError(f"{name}={value!r} is not allowed; use true or false")
