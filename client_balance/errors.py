"""The one error tree of client-balance.

Every public error derives from :class:`ClientBalanceError`, carries TubeMQ's result code as
``.code`` where TubeMQ has one (``None`` otherwise), names the offending value in its message and
survives pickling (Spark ships exceptions between processes)::

    ClientBalanceError                      .code
    ├── ConfigError (also ValueError)       400  bad settings or arguments
    │   ├── InvalidPartitionKeyError        400  a partition key that does not parse
    │   ├── InvalidOffsetError              400  a bootstrap offset outside what is allowed
    │   ├── InvalidConfirmContextError      400  a confirm context malformed, stale or foreign
    │   └── StrategyContractError           400  a strategy's answer is invalid or impure
    ├── NotStartedError                     420  the consumer is not started or is shut down
    ├── NoMessageError                      406  no partition registered
    │                                       407  every partition is waiting for data
    │                                       408  every partition has a batch out unconfirmed
    ├── GroupInUseError                          the group id also has subscribe() members
    ├── RedeliveryLimitError                     a batch rolled back more than max_redeliveries
    ├── DeserializationError                     a key or value the deserializer cannot decode
    ├── PartitionNotFoundError              404  a key outside the partition meta set
    ├── PartitionOccupiedError              410  another live member holds the partition
    │   └── PinConflictError                410  another live member has pinned it
    ├── TooFrequentError                    421  retried too soon after a 410
    ├── PartitionUnsubscribableError        422  no leader, topic gone, or not authorized
    ├── CallbackError                            the assigner or a partition hook failed
    ├── DataLossError                            offsets a read was to read are gone from Kafka
    ├── GroupConflictError                       this member contradicts the live group
    │   ├── InconsistentTopicsError         425  other topics than the group's
    │   ├── InconsistentFiltersError        426  other filter sets than the group's
    │   ├── InconsistentStrategyError            another strategy (node mode)
    │   ├── InconsistentSourceCountError    429  source_count differs from the live group's
    │   └── DuplicateNodeIdError            430  node_id already held by a live member
    ├── KafkaClientError                         an error of the Kafka client, mapped in one place
    └── BrokerError                              the local Kafka launcher (client_balance.broker)
        ├── BrokerToolMissingError               java or mvn is not installed
        ├── BrokerFetchError                     Maven could not fetch the broker jars
        └── BrokerStartError                     the broker did not come up (log tail attached)

Errors of the underlying Kafka client are turned into :class:`KafkaClientError` only by
:func:`client_balance._kafka._errors.from_kafka_exception`, so no other module has to know
confluent-kafka's error types.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BrokerError",
    "BrokerFetchError",
    "BrokerStartError",
    "BrokerToolMissingError",
    "CallbackError",
    "ClientBalanceError",
    "ConfigError",
    "DataLossError",
    "DeserializationError",
    "DuplicateNodeIdError",
    "GroupConflictError",
    "GroupInUseError",
    "InconsistentFiltersError",
    "InconsistentSourceCountError",
    "InconsistentStrategyError",
    "InconsistentTopicsError",
    "InvalidConfirmContextError",
    "InvalidOffsetError",
    "InvalidPartitionKeyError",
    "KafkaClientError",
    "NoMessageError",
    "NotStartedError",
    "PartitionNotFoundError",
    "PartitionOccupiedError",
    "PartitionUnsubscribableError",
    "PinConflictError",
    "RedeliveryLimitError",
    "StrategyContractError",
    "TooFrequentError",
]


def _rebuild(cls: type[ClientBalanceError], args: Any, state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    Exception.__init__(error, *(args if isinstance(args, tuple) else (args,)))  # str: older pickles
    error.__dict__.update(state)
    return error


class ClientBalanceError(Exception):
    """Base of every error this package raises on purpose.

    ``code`` is TubeMQ's result code for the same condition, or ``None`` when TubeMQ has none.
    """

    code: int | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)

    @property
    def message(self) -> str:
        """The human-readable message (also ``str(error)``)."""
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's pickling drops keyword arguments; args that might not pickle go as text.
        plain = all(isinstance(arg, str | int | float | bool | None) for arg in self.args)
        return (_rebuild, (type(self), self.args if plain else self.message, dict(self.__dict__)))


class ConfigError(ClientBalanceError, ValueError):
    """A setting or argument has a value that is not allowed; the message says what is."""

    code = 400


class InvalidPartitionKeyError(ConfigError):
    """A partition key is not ``"<broker>:<topic>:<partition>"``, ``"<topic>:<partition>"``."""

    def __init__(self, message: str, *, key: object) -> None:
        super().__init__(message)
        self.key = key


class InvalidOffsetError(ConfigError):
    """A bootstrap offset is neither -1 (resume) nor an absolute offset >= 0."""

    def __init__(self, message: str, *, offset: object) -> None:
        super().__init__(message)
        self.offset = offset


class InvalidConfirmContextError(ConfigError):
    """A confirm context that does not parse, or names no batch that is out right now."""

    def __init__(self, message: str, *, context: object) -> None:
        super().__init__(message)
        self.context = context


class StrategyContractError(ConfigError):
    """A strategy broke its contract; ``violation`` says which part, ``strategy`` names it.

    ``violation`` is ``"valid"`` (the answer is not an assignment of every subscribed partition
    to exactly one subscriber), ``"raises"`` (the strategy raised), ``"deterministic"`` (the
    same input twice gave two answers), ``"order-independent"`` (the same input in another
    order gave another answer) or ``"same-in-every-process"`` (another Python process, with
    another hash seed, gave another answer).
    """

    def __init__(self, message: str, *, strategy: str, violation: str) -> None:
        super().__init__(message)
        self.strategy = strategy
        self.violation = violation


class NoMessageError(ClientBalanceError):
    """``get_message`` found no batch in time; ``.code`` says why (406, 407 or 408)."""

    NO_PARTITION = 406
    ALL_WAITING = 407
    ALL_IN_USE = 408

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


class GroupInUseError(ClientBalanceError):
    """Members that ``subscribe()`` use this group id, so Kafka rejects our commits."""

    def __init__(self, message: str, *, group_id: str) -> None:
        super().__init__(message)
        self.group_id = group_id


class RedeliveryLimitError(ClientBalanceError):
    """A batch was rolled back more than ``max_redeliveries`` times (policy ``"raise"``).

    Raised by the ``confirm(..., consumed=False)`` that went over the limit, after it rolled the
    batch back: ``key`` and ``offset`` name where the partition is stuck, ``rollbacks`` how often.
    """

    def __init__(self, message: str, *, key: str, offset: int, rollbacks: int) -> None:
        super().__init__(message)
        self.key = key
        self.offset = offset
        self.rollbacks = rollbacks


class DeserializationError(ClientBalanceError):
    """A key or value did not decode (``field``); its batch counts as rolled back.

    ``topic``, ``partition``, ``offset`` name the message; never its bytes (the decoder's error
    is the ``__cause__``). ``retriable``: the Schema Registry did not answer; not counted.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        field: str,
        deserializer: str,
        retriable: bool = False,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.field = field
        self.deserializer = deserializer
        self.retriable = retriable


class NotStartedError(ClientBalanceError):
    """The consumer is not started, or it is shut down (TubeMQ 420)."""

    code = 420


class PartitionNotFoundError(ClientBalanceError):
    """The key names a partition outside the partition meta set (TubeMQ 404)."""

    code = 404

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class PartitionOccupiedError(ClientBalanceError):
    """Another live member holds the partition (TubeMQ 410)."""

    code = 410

    def __init__(self, message: str, *, key: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.holder = holder


class PinConflictError(PartitionOccupiedError):
    """Another live member has pinned the partition: a partition has one pinning member."""


class CallbackError(ClientBalanceError):
    """The application's ``assigner`` or a partition hook raised, or the assigner answered badly.

    Raised from the application's next call; the reconcile thread goes on (keeping the
    previous target after an assigner failure). ``callback`` names it (``"assigner"``,
    ``"on_assigned"``, ``"on_revoked"``, ``"on_lost"``), ``round_number`` the reconcile
    round.
    """

    def __init__(self, message: str, *, callback: str, round_number: int | None = None) -> None:
        super().__init__(message)
        self.callback = callback
        self.round_number = round_number


class DataLossError(ClientBalanceError):
    """Offsets a read was to read are gone from Kafka: deleted by retention or ``delete_records``.

    ``partition`` is the partition's key (``"orders:3"``), and ``[lost_from, lost_to)`` the
    offsets it no longer has. A gap inside a partition that still has its data (a compacted
    record, a transaction marker) is no loss.
    """

    def __init__(self, message: str, *, partition: str, lost_from: int, lost_to: int) -> None:
        super().__init__(message)
        self.partition = partition
        self.lost_from = lost_from
        self.lost_to = lost_to


class TooFrequentError(ClientBalanceError):
    """The same partition was asked for again too soon after it was refused (TubeMQ 421)."""

    code = 421

    def __init__(self, message: str, *, key: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.key = key
        self.retry_after_s = retry_after_s


class PartitionUnsubscribableError(ClientBalanceError):
    """The partition has no leader, its topic is gone, or it is not authorized (TubeMQ 422)."""

    code = 422

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class GroupConflictError(ClientBalanceError):
    """A member contradicts the live members that joined before it.

    Raised by ``start()``; found later, the member stops (releases, leaves) and every call but
    ``confirm()`` raises it, while the earlier members run on.
    """


class InconsistentTopicsError(GroupConflictError):
    """The topics of this member differ from the live group's (TubeMQ 425)."""

    code = 425

    def __init__(self, message: str, *, ours: list[str], group: list[str]) -> None:
        super().__init__(message)
        self.ours = ours
        self.group = group


class InconsistentFiltersError(GroupConflictError):
    """The filter sets of this member differ from the live group's (TubeMQ 426)."""

    code = 426

    def __init__(
        self, message: str, *, ours: dict[str, list[str]], group: dict[str, list[str]]
    ) -> None:
        super().__init__(message)
        self.ours = ours
        self.group = group


class InconsistentStrategyError(GroupConflictError):
    """In node mode, the strategy of this node differs from the live group's."""

    def __init__(self, message: str, *, ours: str, group: str) -> None:
        super().__init__(message)
        self.ours = ours
        self.group = group


class InconsistentSourceCountError(GroupConflictError):
    """The ``source_count`` of this node differs from the live group's (TubeMQ 429)."""

    code = 429

    def __init__(self, message: str, *, ours: int, group: int) -> None:
        super().__init__(message)
        self.ours = ours
        self.group = group


class DuplicateNodeIdError(GroupConflictError):
    """A live member of the group already has this ``node_id`` (TubeMQ 430)."""

    code = 430

    def __init__(self, message: str, *, node_id: int, holder: str) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.holder = holder


class KafkaClientError(ClientBalanceError):
    """The Kafka client failed; ``kafka_code`` and ``kafka_name`` are librdkafka's error."""

    def __init__(
        self, message: str, *, kafka_code: int, kafka_name: str, retriable: bool = False
    ) -> None:
        super().__init__(message)
        self.kafka_code = kafka_code
        self.kafka_name = kafka_name
        self.retriable = retriable


class BrokerError(ClientBalanceError):
    """The local Kafka broker launcher failed."""


class BrokerToolMissingError(BrokerError):
    """A program the launcher needs (``java`` 17+, ``mvn``) is not installed."""

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class BrokerFetchError(BrokerError):
    """Maven could not fetch the broker jars; ``output_tail`` has the end of its output."""

    def __init__(self, message: str, *, output_tail: str) -> None:
        super().__init__(message)
        self.output_tail = output_tail


class BrokerStartError(BrokerError):
    """The broker did not come up; ``log_tail`` has the last lines of its log."""

    def __init__(self, message: str, *, log_tail: str, log_path: str | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail
        self.log_path = log_path
