"""A local Apache Kafka 4.x (KRaft: combined broker and controller nodes on 127.0.0.1).

The official jars come from Maven Central through ``mvn`` into a cache folder once
(``~/.cache/client-balance/kafka-<version>/libs`` or ``$CLIENT_BALANCE_KAFKA_HOME/libs``);
:class:`LocalKafka` formats the log dirs, starts one broker (or ``brokers=3``, a cluster with
fault methods for tests) and waits until it is ready. Users with a cluster of their own set
``bootstrap_servers`` and never touch this module.
"""

from client_balance.broker._jars import (
    DEFAULT_KAFKA_VERSION,
    ensure_kafka_jars,
    find_java,
    kafka_home,
)
from client_balance.broker._local import LocalKafka, stop_pid

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "LocalKafka",
    "ensure_kafka_jars",
    "find_java",
    "kafka_home",
    "stop_pid",
]
