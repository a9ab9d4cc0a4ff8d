"""The options of the ``client_balance`` data source, checked in one place.

Every mistake raises :class:`~client_balance.errors.ConfigError` naming the option, the value
and what is allowed; the value of a ``kafka.`` option is never shown (it may be a password),
and the ``kafka.`` options are kept in a :class:`~client_balance._secrets.MaskedConfig`, so no
repr of the options or of a task's partition shows a secret. Offsets in JSON follow Spark's
Kafka source: ``{"topic": {"0": 23}}``, with -2 = earliest and -1 = latest; -3 = the group's
committed offset (Flink's sentinel), which is what ``startingOffsets=committed`` means for
every partition.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from client_balance._secrets import MaskedConfig
from client_balance.errors import ConfigError
from client_balance.keys import check_topic_name
from client_balance.strategies import get_strategy

__all__ = ["COMMITTED", "EARLIEST", "LATEST", "SourceOptions", "parse_options"]

EARLIEST, LATEST, COMMITTED = -2, -1, -3
_NAMED = {"earliest": EARLIEST, "latest": LATEST, "committed": COMMITTED}
# librdkafka keys the source sets itself: the group id has its own option.
_OWNED = ("group.id", "enable.auto.commit", "bootstrap.servers")
_MAX_SOURCE_COUNT: Final = 10_000
"""Most nodes (Spark tasks) of one read."""
_MAX_BATCH_MESSAGES: Final = 1_000_000
"""librdkafka's ``consume()`` takes at most this many messages at once."""
_MAX_LONG: Final = 2**63 - 1
"""Kafka offsets and Spark's read limits are Java longs."""
_MAX_PARTITION: Final = 2**31 - 1
_MAX_GROUP_ID_LENGTH: Final = 255
_SHOWN_CHARS: Final = 80


def _shown(value: str) -> str:
    """``value``'s repr for a message, cut short: an option may be megabytes of JSON."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 5]}...{text[-2:]}"


@dataclass(frozen=True)
class SourceOptions:
    """The parsed options."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    group_id: str | None
    source_count: int | None
    """As given; None: ``default_source_count``, at most one node per partition."""
    strategy: str
    starting: dict[str, dict[int, int]] | int
    """A sentinel for every partition, or per topic -> partition -> offset or sentinel."""
    ending: dict[str, dict[int, int]] | int
    kafka: Mapping[str, str]
    """The ``kafka.`` options without the prefix, as a :class:`MaskedConfig` (see ``repr``)."""
    batch_max_messages: int
    commit_to_kafka: bool = True
    """Streaming: commit each finished micro-batch's end to ``group_id``."""
    max_offsets_per_trigger: int | None = None
    """Streaming: most messages per micro-batch (None: all available)."""
    read_held_partitions: bool = False
    """Read partitions that live SDK members of ``group_id`` hold (read-only: no commits)."""
    status_topic: str = "__client_balance_status"
    """Where the group's live members are looked up (``statusTopic``)."""
    default_source_count: int | None = None
    """The nodes when ``sourceCount`` is not given: the default parallelism of the session the
    source was registered in (``client_balance.spark.register`` reads it on the driver). None
    (registered by hand, or through Spark Connect): the CPU count where the read is planned."""

    def __post_init__(self) -> None:
        # Whoever builds the options, their repr (in Spark's plans and logs) shows no secret.
        if not isinstance(self.kafka, MaskedConfig):
            object.__setattr__(self, "kafka", MaskedConfig(self.kafka))

    def kafka_config(self, group_id: str) -> MaskedConfig:
        """Librdkafka configuration of the task's reader (masked in its repr, real in a pickle)."""
        return MaskedConfig(
            {**self.kafka, "bootstrap.servers": self.bootstrap_servers, "group.id": group_id}
        )

    def nodes(self, partitions: int) -> int:
        """How many nodes (Spark tasks) read ``partitions`` partitions."""
        if self.source_count is not None:
            return self.source_count
        wanted = self.default_source_count or os.cpu_count() or 1
        return max(1, min(wanted, partitions))


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
    except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(
            f"{name}={_shown(value)} is not allowed; use {', '.join(sorted(allowed))} or JSON "
            'such as {"orders": {"0": 23, "1": -2}} (-2 earliest, -1 latest, -3 committed)'
        )
    offsets: dict[str, dict[int, int]] = {}
    for topic, per_partition in parsed.items():
        if not isinstance(per_partition, dict):
            raise ConfigError(
                f"{name}: topic {_shown(topic)} needs an object of partition -> offset"
            )
        offsets[topic] = {}
        for number, offset in per_partition.items():
            partition = _whole_number(number, _MAX_PARTITION)
            if partition is None or type(offset) is not int or not COMMITTED <= offset <= _MAX_LONG:
                raise ConfigError(
                    f"{name}: {_shown(topic)} partition {_shown(number)} offset "
                    f"{offset if type(offset) is int else type(offset).__name__} is not allowed; "
                    "use partition numbers and offsets >= 0, or -2, -1, -3"
                )
            offsets[topic][partition] = offset
    return offsets


def _whole_number(text: str, most: int) -> int | None:
    """``text`` as a number from 0 to ``most`` in ASCII digits, else None."""
    text = text.strip()
    if not (text.isascii() and text.isdecimal()) or len(text) > len(str(most)):
        return None
    number = int(text)
    return number if number <= most else None


def _positive_int(name: str, value: str | None, default: int | None, most: int) -> int | None:
    if value is None:
        return default
    number = _whole_number(value, most)
    if number is None or number < 1:
        raise ConfigError(
            f"{name}={_shown(value)} is not allowed; use a whole number from 1 to {most}"
        )
    return number


def _strings(options: Mapping[str, str]) -> dict[str, str]:
    """The options by lowercased name, each name and value a string and each name once."""
    given: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ConfigError(f"option names are strings, not {type(key).__name__}")
        # Never the value: a kafka. option may hold a password.
        if not isinstance(value, str):
            raise ConfigError(
                f"option {_shown(key)} is of type {type(value).__name__}; options are strings"
            )
        if key.lower() in given:
            raise ConfigError(f"option {_shown(key)} is given twice (option names ignore case)")
        given[key.lower()] = value
    return given


def _kafka_options(given: Mapping[str, str]) -> MaskedConfig:
    kafka: dict[str, str] = {}
    for key, value in given.items():
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers":
            name = key.removeprefix("kafka.")
            if not name.strip():
                raise ConfigError(f"option {_shown(key)} names no property; use kafka.<property>")
            if name in _OWNED:
                raise ConfigError(f"option {key} is not allowed; use the option group.id")
            kafka[name] = value
    return MaskedConfig(kafka)


def _group_id(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not value.strip() or len(value) > _MAX_GROUP_ID_LENGTH:
        raise ConfigError(
            f"group.id={_shown(value)} is not allowed; use a Kafka group id (1 to "
            f"{_MAX_GROUP_ID_LENGTH} characters, not blank)"
        )
    return value


def parse_options(
    options: Mapping[str, str], *, default_source_count: int | None = None
) -> SourceOptions:
    """Check the reader options (keys compared without case, as Spark does).

    ``default_source_count`` is the node count without ``sourceCount`` (see
    :attr:`SourceOptions.default_source_count`).
    """
    given = _strings(options)
    kafka = _kafka_options(given)
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
    group_id = _group_id(given.get("group.id"))
    needs_group = starting == COMMITTED or (
        isinstance(starting, dict)
        and any(o == COMMITTED for per in starting.values() for o in per.values())
    )
    if needs_group and group_id is None:
        raise ConfigError(
            "option group.id is required with startingOffsets=committed (the default): it names "
            "the Kafka group whose committed offsets the read starts from"
        )
    read_held = _flag("readHeldPartitions", given.get("readheldpartitions"), default=False)
    return SourceOptions(
        bootstrap_servers=servers,
        topics=topics,
        group_id=group_id,
        source_count=_positive_int(
            "sourceCount", given.get("sourcecount"), None, _MAX_SOURCE_COUNT
        ),
        strategy=strategy,
        starting=starting,
        ending=ending,
        kafka=kafka,
        batch_max_messages=_positive_int(
            "batchMaxMessages", given.get("batchmaxmessages"), 10_000, _MAX_BATCH_MESSAGES
        )
        or 10_000,
        # Reading what live workers hold is read-only: a commit would overwrite their positions.
        commit_to_kafka=not read_held
        and _flag("commitToKafka", given.get("committokafka"), default=True),
        read_held_partitions=read_held,
        status_topic=_status_topic(given.get("statustopic")),
        max_offsets_per_trigger=_positive_int(
            "maxOffsetsPerTrigger", given.get("maxoffsetspertrigger"), None, _MAX_LONG
        ),
        default_source_count=default_source_count,
    )


def _status_topic(value: str | None) -> str:
    if value is None:
        return "__client_balance_status"
    try:
        return check_topic_name(value.strip())
    except ConfigError as error:
        raise ConfigError(f"statusTopic={_shown(value)} is not allowed: {error}") from None


def _flag(name: str, value: str | None, *, default: bool) -> bool:
    if value is None:
        return default
    if value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise ConfigError(f"{name}={_shown(value)} is not allowed; use true or false")
