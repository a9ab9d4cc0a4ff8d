import importlib
import importlib.metadata

import client_balance
import client_balance.broker


def _resolved_exports(module_name: str) -> list[str]:
    """The module's ``__all__``, after checking that every name in it resolves."""
    module = importlib.import_module(module_name)
    names: list[str] = list(module.__all__)
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == [], f"{module_name}.__all__ names what it lacks: {missing}"
    return names


def test_public_names_are_pinned() -> None:
    """The top-level namespace exports exactly these names, sorted."""
    assert client_balance.__all__ == [
        "RESUME_OFFSET",
        "Assigner",
        "AssignmentContext",
        "AsyncBatch",
        "AsyncClientBalanceConsumer",
        "Batch",
        "BrokerError",
        "BrokerFetchError",
        "BrokerStartError",
        "BrokerToolMissingError",
        "CallbackError",
        "ClientBalanceConsumer",
        "ClientBalanceError",
        "ClientBalanceSettings",
        "ConfigError",
        "ConfirmResult",
        "ConsumeResult",
        "DataLossError",
        "DecodedMessage",
        "DeserializationError",
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
        "MemberView",
        "NoMessageError",
        "NotStartedError",
        "OffsetInfo",
        "PartitionHook",
        "PartitionKey",
        "PartitionMeta",
        "PartitionNotFoundError",
        "PartitionOccupiedError",
        "PartitionUnsubscribableError",
        "PinConflictError",
        "RedeliveryLimitError",
        "StrategyContractError",
        "TooFrequentError",
        "TopicPartition",
        "__version__",
    ]
    for name in client_balance.__all__:
        assert hasattr(client_balance, name)


def test_version_comes_from_package_metadata() -> None:
    """client_balance.__version__ is the installed distribution's version."""
    assert client_balance.__version__ == importlib.metadata.version("client-balance")


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
    for name in client_balance.broker.__all__:
        assert hasattr(client_balance.broker, name)


def test_strategies_names_are_pinned() -> None:
    """client_balance.strategies exports the interface, its inputs, the registry and the check."""
    assert _resolved_exports("client_balance.strategies") == [
        "DEFAULT_STRATEGY",
        "Assignment",
        "Member",
        "PartitionRacks",
        "Rule",
        "Strategy",
        "TopicPartition",
        "check_strategy",
        "get_strategy",
        "java_string_hash",
        "register_strategy",
        "strategy_names",
        "unregister_strategy",
    ]


def test_admin_names_are_pinned() -> None:
    """client_balance.admin exports the group views and the admin calls on topics and offsets."""
    assert _resolved_exports("client_balance.admin") == [
        "GroupView",
        "MemberView",
        "PartitionView",
        "cluster_answers",
        "commit_offsets",
        "create_topics",
        "group_members",
        "list_groups",
        "partition_offsets",
        "reap_dead_members",
        "reset_offsets",
        "wait_for_group_coordinator",
    ]


def test_testing_names_are_pinned() -> None:
    """client_balance.testing exports the plugin's two fixtures and its broker variable's name."""
    assert _resolved_exports("client_balance.testing") == [
        "BROKER_ENV",
        "kafka_bootstrap",
        "new_topic",
    ]


def test_spark_names_are_pinned() -> None:
    """client_balance.spark (which imports pyspark) exports the data source and its options."""
    assert _resolved_exports("client_balance.spark") == [
        "SCHEMA",
        "ClientBalanceDataSource",
        "NodePartition",
        "SourceOptions",
        "kafka_connector_jars",
        "parse_options",
        "register",
    ]


def test_cli_names_are_pinned() -> None:
    """client_balance.cli exports the command's entry points only."""
    assert _resolved_exports("client_balance.cli") == ["main", "run"]
