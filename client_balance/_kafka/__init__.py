"""The Kafka layer: the only part of the package that imports confluent-kafka.

- ``_clients``: a factory for every client the SDK makes (settings merged in one place)
- ``_errors``: librdkafka errors -> :class:`~client_balance.errors.KafkaClientError`,
  ``timed_out()``, the transient codes
- ``_retry``: every retry and wait, declared on tenacity
- ``_admin``: readiness probes, group membership, partition leaders
- ``_topics``: creating topics, and ensuring the status topic exists as it must
- ``_metadata``: partition leaders and topic ids
- ``_offsets``: a group's offsets without joining it
- ``_ranges``: one-off reads of offset ranges (the Spark source's tasks)
- ``_follow``: one-off reads of partitions as messages arrive (``client-balance tail``)
- ``_schema_registry``: confluent-kafka's deserializers (the Schema Registry's Avro) as decoders

The rest of the package drives the clients these factories return and names confluent-kafka's
types through this namespace, so a grep for ``confluent_kafka`` finds only this folder (and
``broker/``, which has no need of it either).
"""

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from client_balance._kafka._admin import (
    ask_group_members,
    check_login,
    cluster_answers,
    group_members,
    partition_leader,
    topics_metadata,
    wait_for_brokers,
    wait_for_group_coordinator,
)
from client_balance._kafka._clients import (
    LIBRDKAFKA_DEFAULTS,
    AdminOwner,
    admin_client,
    commit_client,
    drop_queued,
    fetch_client,
    group_client,
    kafka_tp,
    producer_client,
    reader_client,
)
from client_balance._kafka._errors import (
    AUTHORIZATION_CODES,
    GROUP_IN_USE_CODES,
    TIMED_OUT,
    TRANSIENT_KAFKA_CODES,
    data_lost,
    from_kafka_exception,
    is_access_denied,
    is_transient,
    registry_unavailable,
    stopped,
    timed_out,
)
from client_balance._kafka._follow import follow
from client_balance._kafka._metadata import (
    PartitionLayout,
    TopicIds,
    TopicIdsAnswer,
    Watermarks,
    topic_layouts,
)
from client_balance._kafka._offsets import (
    COMMIT_REQUEST_BYTES,
    Committing,
    SecondReader,
    commit_batches,
    commit_offsets,
    commit_runs,
    offsets_for_times,
    offsets_for_timestamps,
    read_committed,
    read_starts,
)
from client_balance._kafka._ranges import read_ranges
from client_balance._kafka._retry import (
    BROKER_POLL_S,
    METADATA_POLL_S,
    backoff_s,
    call_until_transient_passes,
    retry_immediately,
    wait_until,
)
from client_balance._kafka._schema_registry import (
    MessageDecoder,
    is_confluent_deserializer,
    registry_avro,
    wrap_deserializer,
)
from client_balance._kafka._topics import TopicState, ask_topic_id, create_topics, ensure_topic
from client_balance._kafka._watermarks import partition_offsets

__all__ = [
    "AUTHORIZATION_CODES",
    "BROKER_POLL_S",
    "COMMIT_REQUEST_BYTES",
    "GROUP_IN_USE_CODES",
    "LIBRDKAFKA_DEFAULTS",
    "METADATA_POLL_S",
    "TIMED_OUT",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TRANSIENT_KAFKA_CODES",
    "AdminClient",
    "AdminOwner",
    "Committing",
    "Consumer",
    "KafkaError",
    "KafkaException",
    "KafkaTopicPartition",
    "Message",
    "MessageDecoder",
    "PartitionLayout",
    "SecondReader",
    "TopicIds",
    "TopicIdsAnswer",
    "TopicState",
    "Watermarks",
    "admin_client",
    "ask_group_members",
    "ask_topic_id",
    "backoff_s",
    "call_until_transient_passes",
    "check_login",
    "cluster_answers",
    "commit_batches",
    "commit_client",
    "commit_offsets",
    "commit_runs",
    "create_topics",
    "data_lost",
    "drop_queued",
    "ensure_topic",
    "fetch_client",
    "follow",
    "from_kafka_exception",
    "group_client",
    "group_members",
    "is_access_denied",
    "is_confluent_deserializer",
    "is_transient",
    "kafka_tp",
    "offsets_for_times",
    "offsets_for_timestamps",
    "partition_leader",
    "partition_offsets",
    "producer_client",
    "read_committed",
    "read_ranges",
    "read_starts",
    "reader_client",
    "registry_avro",
    "registry_unavailable",
    "retry_immediately",
    "stopped",
    "timed_out",
    "topic_layouts",
    "topics_metadata",
    "wait_for_brokers",
    "wait_for_group_coordinator",
    "wait_until",
    "wrap_deserializer",
]
