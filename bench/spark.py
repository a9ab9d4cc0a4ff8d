"""Spark batch read: the ``client_balance`` source against Spark's own Kafka source.

Both read the same topic (``--messages`` messages of 100 bytes in 8 partitions, produced once)
into Spark's ``noop`` sink, in the same ``local[2]`` session, from the earliest offsets to the
end. Spark's source is ``spark-sql-kafka-0-10_2.13`` with its runtime dependencies
(``spark-token-provider-kafka-0-10_2.13``, ``kafka-clients``, ``commons-pool2``), fetched from
Maven Central once into ``~/.cache/client-balance/spark-kafka-<spark version>``. Ours: the
``client_balance`` data source with ``sourceCount`` = 2 (one node per core). Third figure: the
SDK's plain worker path, one ``ClientBalanceConsumer`` process reading the whole topic with
``get_message``/``confirm``, for scale.

Rows per second; the runs alternate, the first of each side is a warm-up (JIT, page cache), and
the figures are medians. One JSON line in the format of every bench script, ``ratio`` = ours /
Spark's (above 1: we are faster).

Not in ``make bench`` yet: the Maven Central this project can reach has no
``spark-sql-kafka-0-10_2.13`` 4.3.0 and no ``spark-token-provider-kafka-0-10_2.13`` of any 4.x
release, so Spark's own source cannot be put on the classpath here (the run stops with Maven's
"Could not find artifact" error). ``--connector`` picks another connector version where one
can be fetched.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from consumer import broker, produce  # bench/consumer.py: the benches' broker and data

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError

BENCH = "spark"
PARTITIONS = 8
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>bench</groupId><artifactId>spark-kafka</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""
# Spark's poms name a Google Cloud mirror of Maven Central first; send everything to Central.
_CENTRAL_ONLY = """<settings><mirrors><mirror>
  <id>central-only</id><mirrorOf>*</mirrorOf><url>https://repo.maven.apache.org/maven2</url>
</mirror></mirrors></settings>
"""
# Spark itself and what it already ships stay out of the extra classpath.
_SHIPPED = ("spark-core", "spark-sql_", "spark-catalyst", "scala-", "slf4j", "hadoop", "jackson")


def spark_kafka_jars(spark_version: str) -> list[str]:
    """The connector and its runtime dependencies, fetched with Maven the first time."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "client-balance" / f"spark-kafka-{spark_version}"
    if not any(folder.glob("spark-sql-kafka-*.jar")):
        build = Path(tempfile.mkdtemp(prefix="spark-kafka-pom-"))
        (build / "pom.xml").write_text(_POM.format(version=spark_version))
        (build / "settings.xml").write_text(_CENTRAL_ONLY)
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("mvn (Apache Maven) is not on PATH; it fetches the connector")
        done = subprocess.run(
            [mvn, "-B", "-q", "-U", "-s", str(build / "settings.xml"), "-f", str(build / "pom.xml"),
             "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={partial}"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        shutil.rmtree(build, ignore_errors=True)
        if done.returncode != 0:
            raise RuntimeError(f"Maven could not fetch the Spark Kafka connector:\n{done.stdout}")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    return sorted(str(jar) for jar in folder.glob("*.jar") if not jar.name.startswith(_SHIPPED))


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


def ours(spark: Any, bootstrap: str, topic: str) -> float:
    """The client_balance source, sourceCount 2."""
    frame = (
        spark.read.format("client_balance").option("kafka.bootstrap.servers", bootstrap)
        .option("topics", topic).option("startingOffsets", "earliest")
        .option("sourceCount", 2).load()
    )  # fmt: skip
    return timed_noop(frame)


def peer(spark: Any, bootstrap: str, topic: str) -> float:
    """Spark's own Kafka source."""
    frame = (
        spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic).option("startingOffsets", "earliest")
        .option("endingOffsets", "latest").load()
    )  # fmt: skip
    return timed_noop(frame)


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


def main(argv: list[str] | None = None) -> int:
    """Produce once, then alternate the sides; print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--connector",
        default=None,
        help="spark-sql-kafka version (default: PySpark's; Maven Central may lag a release)",
    )
    args = parser.parse_args(argv)
    import pyspark  # noqa: PLC0415 - the extra may be missing; only this bench needs it

    connector = args.connector or pyspark.__version__
    jars = spark_kafka_jars(connector)
    with broker() as (bootstrap, broker_name):
        print(json.dumps({"bench": BENCH, "broker": broker_name, "cores": os.cpu_count()}))
        topic = f"bench-spark-{args.messages}-{uuid.uuid4().hex[:6]}"
        produce(bootstrap, topic, PARTITIONS, args.messages, 100)
        spark = session(jars)
        try:
            ours(spark, bootstrap, topic)  # warm-up of both sides
            peer(spark, bootstrap, topic)
            our_runs, peer_runs = [], []
            for _ in range(args.runs):
                our_runs.append(args.messages / ours(spark, bootstrap, topic))
                peer_runs.append(args.messages / peer(spark, bootstrap, topic))
        finally:
            spark.stop()
        worker = args.messages / worker_path(bootstrap, topic, args.messages)
        ours_rate, peer_rate = statistics.median(our_runs), statistics.median(peer_runs)
        print(json.dumps({
            "bench": BENCH, "case": f"batch-read-{args.messages}x100b-{PARTITIONS}p-noop",
            "ours": round(ours_rate), "peer": round(peer_rate),
            "peer_name": f"spark-sql-kafka-0-10_2.13-{connector} on pyspark-{pyspark.__version__}",
            "unit": "rows/s",
            "ratio": round(ours_rate / peer_rate, 3),
            "ours_runs": [round(r) for r in our_runs], "peer_runs": [round(r) for r in peer_runs],
            "sdk_worker_path": round(worker), "spark": "local[2]", "runs": args.runs,
        }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
