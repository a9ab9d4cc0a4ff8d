"""Spark reads: the ``client_balance`` source against Spark's own Kafka source.

Both read the same topic (``--messages`` messages of 100 bytes in 8 partitions, produced once)
into Spark's ``noop`` sink, in the same ``local[2]`` session, from the earliest offsets to the
end. Spark's source is ``spark-sql-kafka-0-10_2.13`` with its runtime dependencies
(``spark-token-provider-kafka-0-10_2.13``, ``kafka-clients``, ``commons-pool2``), fetched from
Maven Central once into ``~/.cache/client-balance/spark-kafka-<version>`` by
``client_balance.spark.kafka_connector_jars`` (the Spark tests use it too); ``--connector``
picks the version, by default 4.2.0, the newest that resolves there (it runs on PySpark 4.3).
Ours: the ``client_balance`` data source with ``sourceCount`` = 2 (one node per core) and its
default options. Spark's source runs with its defaults too (one task per Kafka partition).

Cases, one JSON line each in the format of every bench script (``bench``, ``case``, ``ours``,
``peer``, ``peer_name``, ``unit``, ``ratio`` = ours / peer, above 1: we are faster):

- ``batch-read-<N>x100b-8p-noop``, for each ``--messages`` N: ``spark.read`` of the whole
  topic, rows per second of the ``noop`` write (planning included, as a user waits for it).
  The line also carries ``sdk_worker_path``: one ``ClientBalanceConsumer`` process reading the
  whole topic with ``get_message``/``confirm``, for scale.
- ``stream-available-now-<N>x100b-8p-noop`` (``--stream-messages``): ``spark.readStream`` with
  ``trigger(availableNow=True)`` and a fresh checkpoint each run, rows per second from
  ``start()`` to the end of ``awaitTermination()``: everything in one micro-batch, the peer's
  strongest streaming mode. ``...-max<M>-...`` (``--stream-max-offsets``, 500,000 unless 0):
  both sides with ``maxOffsetsPerTrigger`` = M, so the same rows in several micro-batches.

Each side gets one untimed warm-up per case (the JVM's JIT, the Python workers, the page
cache), then the sides alternate for ``--runs``; the figures are medians, the single runs and
the 1-minute load average before and after the case are in the line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from consumer import broker, produce  # bench/consumer.py: the benches' broker and data

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError

BENCH = "spark"
PARTITIONS = 8


def session(jars: list[str]) -> Any:
    """local[2], Spark's Kafka connector on the classpath, our source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession  # noqa: PLC0415 - after the environment is set

    from client_balance.spark import register  # noqa: PLC0415 - imports pyspark

    spark = (
        SparkSession.builder.master("local[2]").appName("bench-spark")
        .config("spark.jars", ",".join(jars)).config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "2g").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def timed_noop(frame: Any) -> float:
    """Seconds to write ``frame`` into the noop sink."""
    began = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - began


def timed_stream(frame: Any) -> float:
    """Seconds for an ``availableNow`` query of ``frame`` into the noop sink, fresh checkpoint."""
    checkpoint = tempfile.mkdtemp(prefix="bench-spark-checkpoint-")
    try:
        began = time.perf_counter()
        query = (
            frame.writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        elapsed = time.perf_counter() - began
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        return elapsed
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def ours(reader: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """The client_balance source, sourceCount 2, on ``spark.read`` or ``spark.readStream``."""
    return (
        reader.format("client_balance").option("kafka.bootstrap.servers", bootstrap)
        .option("topics", topic).option("startingOffsets", "earliest")
        .option("sourceCount", 2).options(**options).load()
    )  # fmt: skip


def peer(reader: Any, bootstrap: str, topic: str, *, stream: bool = False, **options: str) -> Any:
    """Spark's own Kafka source, with its defaults."""
    reader = (
        reader.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic).option("startingOffsets", "earliest").options(**options)
    )  # fmt: skip
    if not stream:
        reader = reader.option("endingOffsets", "latest")
    return reader.load()


def worker_path(bootstrap: str, topic: str, messages: int) -> float:
    """One ClientBalanceConsumer reading the whole topic; seconds."""
    settings = ClientBalanceSettings(
        bootstrap_servers=bootstrap, group_id=f"bench-spark-worker-{uuid.uuid4().hex}",
        start_position="earliest", batch_max_messages=10_000,
    )  # fmt: skip
    count = 0
    began = time.perf_counter()
    with ClientBalanceConsumer(settings) as consumer:
        consumer.start([topic], source_count=1, node_id=0)
        while count < messages:
            try:
                batch = consumer.get_message(timeout_s=30)
            except NoMessageError:
                continue
            count += len(batch.messages)
            consumer.confirm(batch.confirm_context)
    return time.perf_counter() - began


def load() -> float:
    """The 1-minute load average (the machine is shared)."""
    return round(os.getloadavg()[0], 2)


def alternate(our_side: Any, peer_side: Any, messages: int, runs: int) -> dict[str, Any]:
    """One warm-up of each side, then ``runs`` alternating timed runs: rates and medians."""
    before = load()
    our_side()
    peer_side()
    our_runs, peer_runs = [], []
    for _ in range(runs):
        our_runs.append(messages / our_side())
        peer_runs.append(messages / peer_side())
    ours_rate, peer_rate = statistics.median(our_runs), statistics.median(peer_runs)
    return {
        "ours": round(ours_rate), "peer": round(peer_rate), "unit": "rows/s",
        "ratio": round(ours_rate / peer_rate, 3),
        "ours_runs": [round(r) for r in our_runs], "peer_runs": [round(r) for r in peer_runs],
        "load": [before, load()],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Produce once per size, then alternate the sides; one JSON line per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--messages", type=int, action="append", help="batch case sizes (default 2M and 5M)"
    )
    parser.add_argument("--stream-messages", type=int, default=2_000_000, help="0: no stream")
    parser.add_argument(
        "--stream-max-offsets", type=int, default=500_000, help="0: no case with a read limit"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connector", default="4.2.0", help="spark-sql-kafka-0-10 version")
    parser.add_argument("--no-worker-path", action="store_true", help="skip the SDK figure")
    args = parser.parse_args(argv)
    import pyspark  # noqa: PLC0415 - the extra may be missing; only this bench needs it

    from client_balance.spark import kafka_connector_jars  # noqa: PLC0415 - imports pyspark

    sizes = args.messages or [2_000_000, 5_000_000]
    jars = kafka_connector_jars(args.connector)
    peer_name = f"spark-sql-kafka-0-10_2.13-{args.connector} on pyspark-{pyspark.__version__}"
    common = {"peer_name": peer_name, "spark": "local[2]", "runs": args.runs}
    with broker() as (bootstrap, broker_name):
        print(json.dumps({
            "bench": BENCH, "broker": broker_name, "cores": os.cpu_count(), "load": load(),
        }), flush=True)  # fmt: skip
        topics = {}
        for size in sorted({*sizes, args.stream_messages} - {0}):
            topics[size] = f"bench-spark-{size}-{uuid.uuid4().hex[:6]}"
            produce(bootstrap, topics[size], PARTITIONS, size, 100)
        worker: dict[int, int | None] = {  # before Spark starts: nothing else runs beside it
            size: None
            if args.no_worker_path
            else round(size / worker_path(bootstrap, topics[size], size))
            for size in sizes
        }
        spark = session(jars)
        try:
            for size in sizes:
                topic = topics[size]
                figures = alternate(
                    lambda topic=topic: timed_noop(ours(spark.read, bootstrap, topic)),
                    lambda topic=topic: timed_noop(peer(spark.read, bootstrap, topic)),
                    size, args.runs,
                )  # fmt: skip
                print(json.dumps({
                    "bench": BENCH, "case": f"batch-read-{size}x100b-{PARTITIONS}p-noop",
                    **figures, **common, "mode": "spark.read",
                    "sdk_worker_path": worker[size],
                }), flush=True)  # fmt: skip
            size = args.stream_messages
            limits = [0, args.stream_max_offsets] if size else []
            for limit in sorted(set(limits)):
                topic = topics[size]
                options = {"maxOffsetsPerTrigger": str(limit)} if limit else {}
                figures = alternate(
                    lambda topic=topic, options=options: timed_stream(
                        ours(spark.readStream, bootstrap, topic, **options)
                    ),
                    lambda topic=topic, options=options: timed_stream(
                        peer(spark.readStream, bootstrap, topic, stream=True, **options)
                    ),
                    size, args.runs,
                )  # fmt: skip
                cut = f"-max{limit}" if limit else ""
                print(json.dumps({
                    "bench": BENCH,
                    "case": f"stream-available-now{cut}-{size}x100b-{PARTITIONS}p-noop",
                    **figures, **common,
                    "mode": "spark.readStream, trigger(availableNow=True)"
                    + (f", maxOffsetsPerTrigger={limit}" if limit else ""),
                }), flush=True)  # fmt: skip
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
