"""``ClientBalanceSettings``: every knob of the SDK in one validated, immutable object.

Values come from keyword arguments, else from ``CLIENT_BALANCE_*`` environment variables (the
``kafka`` dict as JSON in ``CLIENT_BALANCE_KAFKA``), else the defaults. Anything invalid raises
:class:`~client_balance.errors.ConfigError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, Literal

from client_balance._callbacks import guarded
from client_balance._secrets import CALLBACK_KEYS, SecretStr, masked, reveal
from client_balance._settings_checks import (
    check_buffered_bytes,
    check_group_id,
    check_servers,
    check_status_secret,
    kafka_values,
)
from client_balance._settings_decoding import DecodingSettings
from client_balance._settings_model import (
    REQUIRED,
    choice,
    flag,
    integer,
    number,
    optional,
    secret,
    setting,
    text,
)
from client_balance.errors import ConfigError
from client_balance.keys import PartitionKey, check_bootstrap_offset, check_topic_name
from client_balance.strategies import get_strategy

__all__ = ["ClientBalanceSettings", "GroupMode", "KafkaSetting", "KafkaValue"]


class GroupMode(StrEnum):
    """Who decides a member's partitions (docs/consumer.md, "Group modes").

    - ``node``: node ``node_id`` of ``source_count`` nodes; the strategy (or the ``assigner``
      callback) over the full configured partition set. TubeMQ's ``sourceCount > 0``.
    - ``manual``: the application, through the ``assigner`` callback or its own ``connect`` /
      ``disconnect``. TubeMQ's ``sourceCount <= 0`` (seed 004: -1 turns assignment off).
    - ``elastic``: the members are the live elastic reporters of the status topic, sorted by
      id; a join or leave moves only what the strategy must move.
    """

    NODE = "node"
    MANUAL = "manual"
    ELASTIC = "elastic"


KafkaValue = str | int | float | bool
"""A librdkafka configuration value, passed through verbatim."""

KafkaSetting = KafkaValue | SecretStr | Callable[..., Any]
"""A value of the ``kafka`` setting: secrets held as ``SecretStr``, callbacks as callables."""

# librdkafka properties the SDK owns, and what to use instead. Setting them in `kafka` would
# either contradict a field or make librdkafka join a consumer group, which the SDK never does.
_OWNED_KAFKA_KEYS = {
    "bootstrap.servers": "set bootstrap_servers instead",
    "metadata.broker.list": "set bootstrap_servers instead",
    "group.id": "set group_id instead",
    "auto.offset.reset": "set start_position ('earliest' or 'latest') instead",
    "enable.auto.offset.store": "the SDK stores offsets only for confirmed batches",
    "group.instance.id": "static membership only applies to a joined group; the SDK never joins",
    "partition.assignment.strategy": "the SDK assigns partitions itself; set strategy instead",
    "group.remote.assignor": "the SDK assigns partitions itself; set strategy instead",
}
_FALSE_VALUES = {False, "false", "False", "FALSE", "0"}
_DAY_S = 86_400.0
_MAX_LEASE_S = 600.0
_MAX_REQUEST_S = 300.0  # librdkafka's socket.timeout.ms and request timeouts stop at 300,000 ms
_MIB = 1024 * 1024


def _kafka(value: Any) -> dict[str, KafkaSetting]:
    checked = kafka_values(value)
    for key, item in checked.items():
        if key in _OWNED_KAFKA_KEYS:
            raise ValueError(f"{key} is managed by client-balance: {_OWNED_KAFKA_KEYS[key]}")
        if key == "enable.auto.commit" and item not in _FALSE_VALUES:
            raise ValueError(
                f"enable.auto.commit={item!r} is not allowed: it would commit messages that "
                "were never confirmed; only false is accepted (commits follow confirm())"
            )
        if key == "group.protocol" and item != "classic":
            raise ValueError(
                f"group.protocol={item!r} is not allowed: the SDK never joins a group, and "
                "only 'classic' commits without joining"
            )
    # Unknown keys and mistyped values fail here, not at start(): librdkafka checks them.
    from client_balance._kafka._config_check import librdkafka_refuses  # noqa: PLC0415 - _kafka imports settings

    problem = librdkafka_refuses(
        {k: reveal(v) for k, v in checked.items() if k not in CALLBACK_KEYS}
    )
    if problem is not None:
        raise ValueError(problem)
    return checked  # type: ignore[return-value]  # kafka_values allowed only these


def _strategy(value: Any) -> str:
    return get_strategy(text(value)).name


def _pinned(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ValueError(f"give a dict of partition key -> offset, got {type(value).__name__}")
    normalized: dict[str, int] = {}
    for key, offset in value.items():
        identity = str(PartitionKey.parse(text(key)).topic_partition)
        if identity in normalized:
            raise ValueError(f"partition {identity} is pinned twice (as {key!r})")
        normalized[identity] = check_bootstrap_offset(integer(offset))
    return normalized


def _topic(value: Any) -> str:
    return check_topic_name(text(value))


def _mode(value: Any) -> GroupMode:
    try:
        return GroupMode(value)
    except ValueError:
        raise ValueError("give 'node', 'manual' or 'elastic'") from None


class ClientBalanceSettings(DecodingSettings):
    """Settings of a client-balanced consumer group member (decoding: ``DecodingSettings``).

    >>> s = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9092", group_id="billing")
    >>> s.start_position, s.strategy, s.reconcile_interval_s
    ('latest', 'modulo', 10.0)
    """

    bootstrap_servers: str = setting(
        check_servers,
        default=REQUIRED,  # or from the environment: an error only when neither gives it
        in_errors="masked",  # a pasted SASL URL's password must not reach an error
        description="Comma-separated host:port list of Kafka brokers (env "
        "CLIENT_BALANCE_BOOTSTRAP_SERVERS).",
    )
    group_id: str = setting(
        check_group_id,
        default=REQUIRED,
        description="Kafka group id whose committed offsets this group uses. Never use it with "
        "subscribe() consumers: Kafka then rejects the SDK's commits.",
    )
    kafka: dict[str, KafkaSetting] = setting(
        _kafka,
        env="json",
        in_errors="keys",  # librdkafka values may be secrets: an error names the keys only
        in_json=masked,
        default_factory=dict,
        description="librdkafka properties passed through verbatim (security, fetch tuning); "
        "secrets (sasl.password, ssl.key.password, any ...password/...secret) are held as "
        "SecretStr and shown as '**********'; oauth_cb, stats_cb, error_cb and throttle_cb take "
        "callables, from code only.",
    )
    start_position: Literal["earliest", "latest"] = setting(
        choice("earliest", "latest"),
        default="latest",
        description="Where a partition with no committed offset starts (TubeMQ's default is "
        "latest).",
    )
    strategy: str = setting(
        _strategy,
        default="modulo",
        description="The assignment strategy: a built-in or registered name, an entry point of "
        "the group client_balance.strategies, or a 'module:attr' reference to a rule.",
    )
    pinned: dict[str, int] = setting(
        _pinned,
        env="json",
        default_factory=dict,
        description="Partitions always held by this member: key -> bootstrap offset (-1 resumes).",
    )
    reconcile_interval_s: float = setting(
        number, default=10.0, gt=0, le=_DAY_S, description="Reconcile period."
    )
    report_interval_s: float = setting(
        number, default=10.0, gt=0, le=_MAX_LEASE_S, description="Status report period."
    )
    lease_timeout_s: float = setting(
        number,
        default=30.0,
        gt=0,
        le=_MAX_LEASE_S,
        description="Silence after which a member is dead and its claims lapse (at most 600 s: "
        "status readers refuse longer leases, which would lock partitions after a crash).",
    )
    commit: Literal["sync", "interval"] = setting(
        choice("sync", "interval"),
        default="interval",
        description="'sync' commits at every confirm; 'interval' every commit_interval_s (and "
        "always on disconnect and shutdown).",
    )
    commit_interval_s: float = setting(
        number, default=5.0, gt=0, le=_DAY_S, description="Commit flush period."
    )
    batch_max_messages: int = setting(
        integer,
        default=1000,
        ge=1,
        le=1_000_000,
        description="Most messages in one get_message batch.",
    )
    max_buffered_bytes: int = setting(
        integer,
        check=check_buffered_bytes,
        default=64 * _MIB,
        description="Most value bytes buffered ahead of get_message().",
    )
    request_timeout_s: float = setting(
        number,
        default=10.0,
        gt=0,
        le=_MAX_REQUEST_S,
        description="Bound on every blocking Kafka call (at most 300 s, librdkafka's limit).",
    )
    status_topic: str = setting(
        _topic,
        default="__client_balance_status",
        description="Compacted topic holding member reports and ownership claims.",
    )
    mode: GroupMode | None = setting(
        optional(_mode),
        default=None,
        description="Group mode (node, manual, elastic); None = node when source_count > 0, "
        "else manual. start(..., mode=...) overrides it.",
    )
    max_redeliveries: int | None = setting(
        optional(integer),
        default=None,
        ge=0,
        description="Rollbacks of the same batch allowed before redelivery_policy applies "
        "(None: redeliver forever).",
    )
    redelivery_policy: Literal["raise", "skip", "dead-letter"] = setting(
        choice("raise", "skip", "dead-letter"),
        default="raise",
        description="Past max_redeliveries: raise RedeliveryLimitError from confirm, skip the "
        "batch (logged), or produce it to dead_letter_topic and go on.",
    )
    dead_letter_topic: str | None = setting(
        optional(_topic),
        default=None,
        description="Where redelivery_policy='dead-letter' sends batches.",
    )
    reap_after_s: float = setting(
        number,
        default=3600.0,
        gt=0,
        le=30 * _DAY_S,
        description="Members dead this long past their lease have their status records "
        "tombstoned by the group's earliest live member.",
    )
    refused_connect_wait_s: float = setting(
        number,
        default=5.0,
        ge=0,
        le=_DAY_S,
        description="connect() of a partition refused with 410 less than this long ago raises "
        "TooFrequentError (421), as TubeMQ does (5 s); 0 turns it off.",
    )
    status_topic_partitions: int = setting(
        integer,
        default=1,
        ge=1,
        le=10_000,
        description="Partitions the status topic spreads groups over (crc32(group) % n); the "
        "same for every member. Adding partitions to the topic moves no group.",
    )
    status_topic_single_replica_ok: bool = setting(
        flag,
        default=False,
        description="Accept a status topic with one replica on a multi-broker cluster (one "
        "broker's loss then fences every group).",
    )
    filter_header: str = setting(
        text,
        default="type",
        min_length=1,
        description="Message header compared against a topic's filter set.",
    )
    status_secret: SecretStr | None = setting(
        optional(secret),
        check=check_status_secret,  # refused when made, not at start() after round trips
        in_errors="nothing",
        default=None,
        shown=False,
        description="Shared by a group's members: every status record is signed with it (HMAC) "
        "and records without a valid signature are ignored, so a client without it can neither "
        "forge claims nor delete holdings. None: records are not signed.",
    )

    statistics_interval_ms: int = setting(
        integer,
        default=0,
        ge=0,
        le=86_400_000,
        description="librdkafka statistics period; 0 = off.",
    )
    metrics_port: int | None = setting(
        optional(integer),
        default=None,
        ge=1,
        le=65_535,
        description="HTTP port of the metrics; None = none.",
    )
    metrics_host: str = setting(text, default="127.0.0.1", min_length=1, description="Its address.")

    def __init__(self, **values: Any) -> None:
        # Any value, as the type checker sees it: a wrong one is a ConfigError saying why, and
        # the environment may give what the call leaves out.
        super().__init__(**values)

    def _check_across_fields(self) -> Iterable[ValueError | ConfigError]:
        yield from super()._check_across_fields()
        if self.lease_timeout_s < 2 * self.report_interval_s:  # under 1.5x it fenced each round
            yield ValueError(
                f"lease_timeout_s={self.lease_timeout_s} must be at least twice "
                f"report_interval_s={self.report_interval_s}: a member stops fetching when no "
                "report got through for most of its lease, so closer values make a healthy "
                "member stop between two reports and a single failed report lapse its lease; "
                "raise lease_timeout_s or lower report_interval_s"
            )
        if self.redelivery_policy == "dead-letter" and self.dead_letter_topic is None:
            yield ValueError(
                "redelivery_policy='dead-letter' needs dead_letter_topic: name the topic the "
                "batches go to"
            )
        if self.dead_letter_topic == self.status_topic:  # every member reads that topic
            yield ValueError(
                f"dead_letter_topic={self.dead_letter_topic!r} is the status topic: dead letters "
                "would be written among the member reports and claims that every member reads; "
                "name a topic of their own"
            )
        if self.request_timeout_s * 2 > self.lease_timeout_s:
            yield ValueError(
                f"request_timeout_s={self.request_timeout_s} must be at most half of "
                f"lease_timeout_s={self.lease_timeout_s}: a status report that takes that long "
                "to write leaves too little of the lease to notice a lapse; lower "
                "request_timeout_s or raise lease_timeout_s"
            )

    def consumer_config(self) -> dict[str, Any]:
        """The librdkafka configuration of an assign-only consumer with these settings."""
        return {
            **_CLIENT_DEFAULTS,
            **self._revealed(),
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "group.protocol": "classic",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Never librdkafka's own reset: it would skip messages that still exist without a
            # word. Starts are chosen explicitly; a position that retention deleted is
            # restarted at the log start by the fetcher, which reports what was lost.
            "auto.offset.reset": "error",
        }

    def admin_config(self) -> dict[str, Any]:
        """The librdkafka configuration of an admin client or producer for these settings."""
        consumer_only = ("fetch.", "queued.", "enable.auto.commit", "group.", "session.timeout")
        kafka = self._revealed()
        passthrough = {k: v for k, v in kafka.items() if not k.startswith(consumer_only)}
        return {**_CLIENT_DEFAULTS, **passthrough, "bootstrap.servers": self.bootstrap_servers}

    def _revealed(self) -> dict[str, Any]:
        # The one place secrets leave their SecretStr (and callbacks get their guard).
        return {key: guarded(key, reveal(value)) for key, value in self.kafka.items()}


_CLIENT_DEFAULTS: dict[str, KafkaValue] = {
    # librdkafka drops its bootstrap connection once it knows the brokers and holds the next
    # connection back for up to this long (100 ms, about 50 ms on average with its jitter):
    # every new client paid it on its second request, several times on the way from start()
    # to the first message. 10 ms still grows exponentially to reconnect.backoff.max.ms.
    "reconnect.backoff.ms": 10,
}
"""librdkafka settings of every client the SDK makes (docs/settings.md); ``kafka`` overrides."""
