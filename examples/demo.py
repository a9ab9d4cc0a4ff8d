"""The README's main job (``make demo``), in its first form.

Starts a local Apache Kafka (or uses ``CLIENT_BALANCE_BOOTSTRAP_SERVERS``), creates the seeds'
topics ``orders`` (7 partitions) and ``stock`` (5), produces sample order events and consumes
them with three nodes of one group. Until ``ClientBalanceConsumer`` lands (issue 4) the nodes
are plain assign-only consumers built from ``ClientBalanceSettings.consumer_config()`` that take
``partition % 3 == node``; then this script switches to the SDK's consumer.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from contextlib import ExitStack

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import ClientBalanceSettings, admin
from client_balance.broker import LocalKafka

TOPICS = {"orders": 7, "stock": 5}
MESSAGES_PER_TOPIC = 20_000
NODES = 3


def produce(bootstrap: str) -> int:
    """Write order and stock events with a small progress bar; return how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    rng = random.Random(7)
    total = MESSAGES_PER_TOPIC * len(TOPICS)
    for i in range(total):
        topic = "orders" if i % 2 == 0 else "stock"
        product = f"p{rng.randrange(50)}"
        event = {"product": product, "qty": rng.randrange(1, 5), "ts": time.time()}
        producer.produce(topic, json.dumps(event).encode(), key=product.encode())
        if i % 5000 == 0:
            producer.poll(0)
            done = i * 40 // total
            print(f"\rproducing [{'#' * done}{'.' * (40 - done)}] {i}/{total}", end="")
    producer.flush(60)
    print(f"\rproducing [{'#' * 40}] {total}/{total}")
    return total


def consume_as_node(settings: ClientBalanceSettings, node_id: int) -> dict[str, int]:
    """Drain this node's partitions, commit, and return messages read per partition."""
    mine = [
        KafkaTopicPartition(topic, partition)
        for topic, count in TOPICS.items()
        for partition in range(count)
        if partition % NODES == node_id
    ]
    consumer = Consumer(settings.consumer_config())
    counts: dict[str, int] = {f"{tp.topic}:{tp.partition}": 0 for tp in mine}
    try:
        consumer.assign(mine)
        ends = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, 10)[1] for tp in mine}
        positions = dict.fromkeys(ends, 0)
        while any(positions[key] < end for key, end in ends.items()):
            for message in consumer.consume(1000, timeout=1.0):
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                if (
                    message.error() is None
                    and topic
                    and partition is not None
                    and offset is not None
                ):
                    counts[f"{topic}:{partition}"] += 1
                    positions[topic, partition] = offset + 1
        commits = [KafkaTopicPartition(t, p, offset) for (t, p), offset in positions.items()]
        consumer.commit(offsets=commits, asynchronous=False)
    finally:
        consumer.close()
    return counts


def run(bootstrap: str) -> int:
    """Create topics, produce, consume with three nodes, print the table."""
    admin.create_topics(bootstrap, TOPICS, exist_ok=True)
    produced = produce(bootstrap)
    settings = ClientBalanceSettings(
        bootstrap_servers=bootstrap, group_id="demo", start_position="earliest"
    )
    consumed = 0
    print(f"\n{'node':<6}{'partitions':<44}{'messages':>10}")
    for node_id in range(NODES):
        counts = consume_as_node(settings, node_id)
        consumed += sum(counts.values())
        print(f"{node_id:<6}{', '.join(counts):<44}{sum(counts.values()):>10}")
    print(f"\nproduced {produced}, consumed {consumed}; offsets committed to group 'demo'")
    return 0 if consumed >= produced else 1


def main() -> int:
    """Run against CLIENT_BALANCE_BOOTSTRAP_SERVERS, else a LocalKafka started here."""
    with ExitStack() as stack:
        bootstrap = os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS")
        if not bootstrap:
            kafka = stack.enter_context(LocalKafka(progress=print))
            bootstrap = kafka.bootstrap_servers
            print(f"local Apache Kafka at {bootstrap} ready in {kafka.startup_s:.1f} s")
            print(f"its log and data: {kafka.data_dir} (removed when the demo ends)")
        return run(bootstrap)


if __name__ == "__main__":
    sys.exit(main())
