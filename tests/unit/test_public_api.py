import client_balance
import client_balance.broker


def test_public_names_are_pinned() -> None:
    """The top-level namespace exports exactly these names, sorted."""
    assert client_balance.__all__ == [
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
        "GroupInUseError",
        "InconsistentSourceCountError",
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
        "TooFrequentError",
        "TopicPartition",
        "__version__",
    ]
    for name in client_balance.__all__:
        assert hasattr(client_balance, name)


def test_broker_names_are_pinned() -> None:
    """client_balance.broker exports the launcher and its helpers."""
    assert client_balance.broker.__all__ == [
        "DEFAULT_KAFKA_VERSION",
        "LocalKafka",
        "ensure_kafka_jars",
        "find_java",
        "kafka_home",
        "stop_pid",
    ]
