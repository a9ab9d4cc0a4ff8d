"""The options of the ``client_balance`` data source, checked in one place.

Every mistake raises :class:`~client_balance.errors.ConfigError` naming the option, the value
and what is allowed; the value of a ``kafka.`` option is never shown (it may be a password),
and the ``kafka.`` options are kept in a :class:`~client_balance._secrets.MaskedConfig`, so no
repr of the options or of a task's partition shows a secret. Offsets in JSON follow Spark's
Kafka source: ``{"topic": {"0": 23}}``, with -2 = earliest and -1 = latest; -3 = the group's
committed offset (Flink's sentinel), which is what ``startingOffsets=committed`` means for
every partition. The values are parsed by ``_option_values``; docs/spark.md compares every
option with Spark's own Kafka source.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from client_balance._kafka._clients import LIBRDKAFKA_DEFAULTS
from client_balance._kafka._config_check import librdkafka_refuses
from client_balance._secrets import MaskedConfig
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition, check_topic_name
from client_balance.spark._option_values import (
    COMMITTED,
    EARLIEST,
    LATEST,
    MAX_LONG,
    NAMED,
    Offsets,
    assigned_partitions,
    flag,
    offsets,
    pattern,
    positive_int,
    refuse_earliest_ending,
    shown,
    timestamp,
    timestamps,
    uses_committed,
)
from client_balance.strategies import get_strategy

__all__ = [
    "COMMITTED",
    "EARLIEST",
    "LATEST",
    "SourceOptions",
    "include_headers",
    "parse_options",
]

# librdkafka keys the source sets itself, and what to use instead.
_OWNED: Final = {
    "group.id": "use the option group.id",
    "enable.auto.commit": "the source commits itself (commitToKafka)",
    "bootstrap.servers": "use kafka.bootstrap.servers",
    "auto.offset.reset": (
        "use startingOffsets (where a read starts) and failOnDataLoss (offsets that are gone)"
    ),
}
# Spark's Kafka source options this source does not have (lowercased), and why: given
# silently, the user would believe them in effect.
_NOT_HERE: Final = {
    "groupidprefix": (
        "groupIdPrefix",
        "tasks read with no group of their own and commit only to group.id: use group.id",
    ),
    "minoffsetspertrigger": (
        "minOffsetsPerTrigger",
        "not built: PySpark's stream reader takes one read limit, use maxOffsetsPerTrigger",
    ),
    "maxtriggerdelay": ("maxTriggerDelay", "not built: it comes with minOffsetsPerTrigger"),
    "kafkaconsumer.polltimeoutms": (
        "kafkaConsumer.pollTimeoutMs",
        "a task gives up after 60 s without a message; kafka.* options tune the fetch",
    ),
    "fetchoffset.numretries": (
        "fetchOffset.numRetries",
        "the driver's offset queries wait up to 30 s for the cluster (no retry count)",
    ),
    "fetchoffset.retryintervalms": (
        "fetchOffset.retryIntervalMs",
        "the driver's offset queries wait up to 30 s for the cluster (no retry interval)",
    ),
}
_SUBSCRIPTIONS: Final = {
    "topics": "topics",
    "subscribe": "subscribe",  # Spark's name for topics: a read written for it works here
    "subscribepattern": "subscribePattern",
    "assign": "assign",
}
_BATCH_ONLY: Final = {
    "endingoffsets": "endingOffsets",
    "endingtimestamp": "endingTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
}
_KNOWN: Final = (
    "topics", "subscribe", "subscribePattern", "assign", "strategy", "group.id",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "readHeldPartitions", "sourceCount",
    "batchMaxMessages", "commitToKafka", "statusTopic", "maxOffsetsPerTrigger",
    "failOnDataLoss", "includeHeaders", "minPartitions", "path",
)  # fmt: skip
"""Every option name this source reads, besides ``kafka.*`` (``path``: what ``load(path)``
passes, unused)."""
_BY_TIMESTAMP_STRATEGIES: Final = ("error", "latest")
_MAX_SOURCE_COUNT: Final = 10_000
"""Most nodes (Spark tasks) of one read; also the most tasks ``minPartitions`` asks for."""
_MAX_BATCH_MESSAGES: Final = 1_000_000
"""librdkafka's ``consume()`` takes at most this many messages at once."""
_MAX_GROUP_ID_LENGTH: Final = 255
_STATUS_TOPIC: Final = "__client_balance_status"


@dataclass(frozen=True)
class SourceOptions:
    """The parsed options."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    """``topics``; empty when ``assign`` or ``subscribePattern`` says what is read."""
    group_id: str | None
    source_count: int | None
    """As given; None: ``default_source_count``, at most one node per partition."""
    strategy: str
    starting: Offsets
    """A sentinel for every partition, or per topic -> partition -> offset or sentinel."""
    ending: Offsets
    kafka: Mapping[str, str]
    """The ``kafka.`` options without the prefix, as a :class:`MaskedConfig` (see ``repr``)."""
    batch_max_messages: int
    commit_to_kafka: bool = True
    """Streaming: commit each finished micro-batch's end to ``group_id``."""
    max_offsets_per_trigger: int | None = None
    """Streaming: most messages per micro-batch (None: all available)."""
    read_held_partitions: bool = False
    """Read partitions that live SDK members of ``group_id`` hold (read-only: no commits)."""
    status_topic: str = _STATUS_TOPIC
    """Where the group's live members are looked up (``statusTopic``)."""
    default_source_count: int | None = None
    """The nodes when ``sourceCount`` is not given: the default parallelism of the session the
    source was registered in (``client_balance.spark.register`` reads it on the driver). None
    (registered by hand, or through Spark Connect): the CPU count where the read is planned."""
    assign: tuple[TopicPartition, ...] | None = None
    """``assign``: exactly these partitions, sorted (instead of ``topics``)."""
    subscribe_pattern: str | None = None
    """``subscribePattern``: every topic whose whole name matches (``re.fullmatch``)."""
    starting_times: Offsets | None = None
    """Timestamps (ms) to start at, which win over ``starting``: one for every partition
    (``startingTimestamp``) or per partition (``startingOffsetsByTimestamp``)."""
    ending_times: Offsets | None = None
    """Batch: timestamps (ms) to end at, which win over ``ending``."""
    by_timestamp_strategy: str = "latest"
    """A starting timestamp no message reaches: ``latest`` (the end) or ``error``."""
    fail_on_data_loss: bool = True
    """Raise :class:`~client_balance.errors.DataLossError` for offsets that are gone; else
    read on from the log's start with a warning."""
    include_headers: bool = True
    """The ``headers`` column (Spark's Kafka source leaves it out by default)."""
    min_partitions: int | None = None
    """Split the ranges so a read has at least this many Spark tasks (None: one per node)."""

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


def _strings(options: Mapping[str, str]) -> dict[str, str]:
    """The options by lowercased name, each name and value a string and each name once."""
    given: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ConfigError(f"option names are strings, not {type(key).__name__}")
        # Never the value: a kafka. option may hold a password.
        if not isinstance(value, str):
            raise ConfigError(
                f"option {shown(key)} is of type {type(value).__name__}; options are strings"
            )
        if key.lower() in given:
            raise ConfigError(f"option {shown(key)} is given twice (option names ignore case)")
        given[key.lower()] = value
    return given


def _kafka_options(given: Mapping[str, str]) -> MaskedConfig:
    kafka: dict[str, str] = {}
    for key, value in given.items():
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers":
            name = key.removeprefix("kafka.")
            if not name.strip():
                raise ConfigError(f"option {shown(key)} names no property; use kafka.<property>")
            if name in _OWNED:
                raise ConfigError(f"option {key} is not allowed; {_OWNED[name]}")
            kafka[name] = value
    return MaskedConfig(kafka)


def _refuse_sparks_only(given: Mapping[str, str], *, streaming: bool) -> None:
    known = {name.lower(): name for name in _KNOWN}
    for key in sorted(given):
        if key in _NOT_HERE:
            name, why = _NOT_HERE[key]
            raise ConfigError(f"option {name} of Spark's Kafka source is not supported: {why}")
        if key not in known and not key.startswith("kafka."):  # a typo is never ignored
            near = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {known[near[0]]}?" if near else ""
            raise ConfigError(
                f"option {shown(key)} is not one of this source's{hint} (they are "
                f"{', '.join(sorted(_KNOWN, key=str.lower))}, and kafka.* for librdkafka)"
            )
        if streaming and key in _BATCH_ONLY:
            raise ConfigError(
                f"option {_BATCH_ONLY[key]} is not allowed in a streaming read (batch only: a "
                "stream has no end)"
            )


def _subscription(
    given: Mapping[str, str],
) -> tuple[tuple[str, ...], tuple[TopicPartition, ...] | None, str | None]:
    """(topics, assign, subscribePattern): exactly one of the three options, as Spark asks."""
    chosen = [name for key, name in _SUBSCRIPTIONS.items() if key in given]
    if not chosen:
        raise ConfigError(
            "option topics is required (a comma-separated list of topics; subscribe is the "
            "same), or instead subscribePattern or assign: exactly one of them"
        )
    if len(chosen) > 1:
        raise ConfigError(
            f"options {' and '.join(chosen)} are both given; give exactly one of topics "
            "(or subscribe), subscribePattern and assign"
        )
    if "assign" in given:
        return (), assigned_partitions("assign", given["assign"]), None
    if "subscribepattern" in given:
        return (), None, pattern("subscribePattern", given["subscribepattern"])
    name = "topics" if "topics" in given else "subscribe"
    topics = tuple(t.strip() for t in given[name].split(",") if t.strip())
    if not topics:
        raise ConfigError(
            f"{name}={shown(given[name])} is not allowed; use a comma-separated list of topics"
        )
    for topic in topics:
        check_topic_name(topic)
    return topics, None, None


def _times(given: Mapping[str, str], side: str) -> Offsets | None:
    """``<side>Timestamp`` (one for all), else ``<side>OffsetsByTimestamp``; Spark's order."""
    one = timestamp(f"{side}Timestamp", given.get(f"{side}timestamp"))
    by_partition = timestamps(f"{side}OffsetsByTimestamp", given.get(f"{side}offsetsbytimestamp"))
    return one if one is not None else by_partition


def _group_id(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not value.strip() or len(value) > _MAX_GROUP_ID_LENGTH:
        raise ConfigError(
            f"group.id={shown(value)} is not allowed; use a Kafka group id (1 to "
            f"{_MAX_GROUP_ID_LENGTH} characters, not blank)"
        )
    return value


def _by_timestamp_strategy(value: str | None) -> str:
    if value is None:
        return "latest"
    if value.strip().lower() in _BY_TIMESTAMP_STRATEGIES:
        return value.strip().lower()
    raise ConfigError(
        f"startingOffsetsByTimestampStrategy={shown(value)} is not allowed; use error or latest"
    )


def include_headers(options: Mapping[str, str]) -> bool:
    """Whether the schema has the ``headers`` column (``includeHeaders``, default true).

    For ``DataSource.schema()``, which Spark asks before any reader is made.
    """
    given = {str(key).lower(): value for key, value in options.items()}
    value = given.get("includeheaders")
    return flag("includeHeaders", value if isinstance(value, str) else None, default=True)


def parse_options(
    options: Mapping[str, str],
    *,
    default_source_count: int | None = None,
    streaming: bool = False,
) -> SourceOptions:
    """Check the reader options (keys compared without case, as Spark does).

    ``default_source_count`` is the node count without ``sourceCount`` (see
    :attr:`SourceOptions.default_source_count`); ``streaming`` refuses the batch-only options.
    """
    given = _strings(options)
    kafka = _kafka_options(given)
    _refuse_sparks_only(given, streaming=streaming)
    servers = given.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise ConfigError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    topics, assign, subscribe_pattern = _subscription(given)
    strategy = given.get("strategy", "modulo")
    # A registered name, an entry point's or a module:attr reference; ConfigError lists them.
    get_strategy(strategy)
    starting = offsets("startingOffsets", given.get("startingoffsets"), COMMITTED, set(NAMED))
    ending = offsets("endingOffsets", given.get("endingoffsets"), LATEST, {"latest"})
    refuse_earliest_ending(ending)
    starting_times, ending_times = _times(given, "starting"), _times(given, "ending")
    group_id = _group_id(given.get("group.id"))
    # A timestamp wins over its side's offsets, as in Spark: then that side needs no group.
    if group_id is None and starting_times is None and uses_committed(starting):
        raise ConfigError(
            "option group.id is required with startingOffsets=committed (the default): it names "
            "the Kafka group whose committed offsets the read starts from"
        )
    if group_id is None and ending_times is None and uses_committed(ending):
        raise ConfigError(
            "option group.id is required with -3 (committed) in endingOffsets: it names the "
            "Kafka group whose committed offsets the read ends at"
        )
    read_held = flag("readHeldPartitions", given.get("readheldpartitions"), default=False)
    made = SourceOptions(
        bootstrap_servers=servers,
        topics=topics,
        group_id=group_id,
        source_count=positive_int("sourceCount", given.get("sourcecount"), None, _MAX_SOURCE_COUNT),
        strategy=strategy,
        starting=starting,
        ending=ending,
        kafka=kafka,
        batch_max_messages=positive_int(
            "batchMaxMessages", given.get("batchmaxmessages"), 10_000, _MAX_BATCH_MESSAGES
        )
        or 10_000,
        # Reading what live workers hold is read-only: a commit would overwrite their positions.
        commit_to_kafka=not read_held
        and flag("commitToKafka", given.get("committokafka"), default=True),
        read_held_partitions=read_held,
        status_topic=_status_topic(given.get("statustopic")),
        max_offsets_per_trigger=positive_int(
            "maxOffsetsPerTrigger", given.get("maxoffsetspertrigger"), None, MAX_LONG
        ),
        default_source_count=default_source_count,
        assign=assign,
        subscribe_pattern=subscribe_pattern,
        starting_times=starting_times,
        ending_times=ending_times,
        by_timestamp_strategy=_by_timestamp_strategy(
            given.get("startingoffsetsbytimestampstrategy")
        ),
        fail_on_data_loss=flag("failOnDataLoss", given.get("failondataloss"), default=True),
        include_headers=flag("includeHeaders", given.get("includeheaders"), default=True),
        min_partitions=positive_int(
            "minPartitions", given.get("minpartitions"), None, _MAX_SOURCE_COUNT
        ),
    )
    # Last, so that the options' own mistakes are named first; a typo in a kafka. property
    # is the option's error here, not a raw KafkaException when a task makes its client.
    # As the tasks make their clients: with the SDK's own settings, which may clash with one.
    refused = librdkafka_refuses({**LIBRDKAFKA_DEFAULTS, **kafka}) if kafka else None
    if refused is not None:
        raise ConfigError(f"the kafka.* options: {refused}")
    return made


def _status_topic(value: str | None) -> str:
    if value is None:
        return _STATUS_TOPIC
    try:
        return check_topic_name(value.strip())
    except ConfigError as error:
        raise ConfigError(f"statusTopic={shown(value)} is not allowed: {error}") from None
