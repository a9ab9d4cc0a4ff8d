"""client-balance: consume Apache Kafka with the partition assignment decided by the clients.

A worker states its topics, how many nodes the group has (``source_count``) and which one it is
(``node_id``); it then holds exactly its partitions, consumes them in confirmed batches and
resumes where the group left off. No broker-side group rebalance ever runs.
"""

from client_balance._version import __version__
from client_balance.consumer import (
    Assigner,
    Batch,
    ClientBalanceConsumer,
    ConfirmResult,
    ConsumeResult,
    NodeContext,
    OffsetInfo,
    PartitionMeta,
)
from client_balance.errors import (
    BrokerError,
    BrokerFetchError,
    BrokerStartError,
    BrokerToolMissingError,
    ClientBalanceError,
    ConfigError,
    DuplicateNodeIdError,
    GroupConflictError,
    GroupInUseError,
    InconsistentFiltersError,
    InconsistentSourceCountError,
    InconsistentStrategyError,
    InconsistentTopicsError,
    InvalidConfirmContextError,
    InvalidOffsetError,
    InvalidPartitionKeyError,
    KafkaClientError,
    NoMessageError,
    NotStartedError,
    PartitionNotFoundError,
    PartitionOccupiedError,
    PartitionUnsubscribableError,
    RedeliveryLimitError,
    StrategyContractError,
    TooFrequentError,
)
from client_balance.keys import RESUME_OFFSET, PartitionKey, TopicPartition
from client_balance.settings import ClientBalanceSettings, GroupMode

__all__ = [
    "RESUME_OFFSET",
    "Assigner",
    "Batch",
    "BrokerError",
    "BrokerFetchError",
    "BrokerStartError",
    "BrokerToolMissingError",
    "ClientBalanceConsumer",
    "ClientBalanceError",
    "ClientBalanceSettings",
    "ConfigError",
    "ConfirmResult",
    "ConsumeResult",
    "DuplicateNodeIdError",
    "GroupConflictError",
    "GroupInUseError",
    "GroupMode",
    "InconsistentFiltersError",
    "InconsistentSourceCountError",
    "InconsistentStrategyError",
    "InconsistentTopicsError",
    "InvalidConfirmContextError",
    "InvalidOffsetError",
    "InvalidPartitionKeyError",
    "KafkaClientError",
    "NoMessageError",
    "NodeContext",
    "NotStartedError",
    "OffsetInfo",
    "PartitionKey",
    "PartitionMeta",
    "PartitionNotFoundError",
    "PartitionOccupiedError",
    "PartitionUnsubscribableError",
    "RedeliveryLimitError",
    "StrategyContractError",
    "TooFrequentError",
    "TopicPartition",
    "__version__",
]
