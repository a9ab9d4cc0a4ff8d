"""The ``client_balance`` source on a standalone Spark cluster (tests/spark/standalone.py).

One master and two workers on 127.0.0.1, one executor JVM per worker, against the session's real
Kafka broker: the nodes are read in different executor processes and every message exactly once,
every Spark test of test_source.py (written for ``local[2]``) passes here too, and the pipeline
example runs on the cluster as an application of its own.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from pyspark import cloudpickle

from client_balance.spark import SCHEMA, parse_options, register
from tests.spark import test_source
from tests.spark.standalone import WORKERS, StandaloneCluster
from tests.spark.test_source import produce, read

pytestmark = [pytest.mark.spark, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "examples" / "spark_pipeline.py"


@pytest.fixture(scope="module")
def spark(standalone_spark: Any) -> Any:
    """What test_source's tests take as ``spark``: here, the session on the cluster."""
    return standalone_spark


# test_source's tests that take ``spark`` run here again, on the cluster: pytest collects them
# from this module and hands them the fixture above. New ones join without a change here.
globals().update(
    (name, test)
    for name, test in vars(test_source).items()
    if name.startswith("test_") and "spark" in inspect.signature(test).parameters
)


def _registered(session: Any) -> Any:
    """The data source class ``register(session)`` hands to Spark."""
    registered: list[Any] = []
    session.dataSource = SimpleNamespace(register=registered.append)
    register(session)
    (source,) = registered
    return source


def test_register_carries_the_sessions_default_parallelism() -> None:
    """Without sourceCount the nodes are the registering session's default parallelism."""
    source = _registered(SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=7)))
    # Spark ships the class to the planning process pickled; the value goes with it by value.
    dumps: Any = cloudpickle.dumps  # untyped in pyspark
    shipped = cloudpickle.loads(dumps(source))
    assert shipped.default_parallelism == 7
    options = {"kafka.bootstrap.servers": "h:1", "topics": "t", "startingOffsets": "earliest"}
    reader = shipped(options).reader(SCHEMA)
    assert reader._options.nodes(10) == 7
    assert reader._options.nodes(3) == 3  # never more nodes than partitions by default
    given = parse_options({**options, "sourceCount": "5"}, default_source_count=7)
    assert given.nodes(3) == 5  # a given sourceCount is kept, even above the partitions


def test_without_a_spark_context_the_planners_cpu_count_is_the_default() -> None:
    """A session with no SparkContext (Spark Connect) leaves the planning process's CPU count."""
    source = _registered(SimpleNamespace())
    assert source.default_parallelism is None
    options = parse_options({"kafka.bootstrap.servers": "h:1", "topics": "t", "group.id": "g"})
    assert options.nodes(10_000) == min(os.cpu_count() or 1, 10_000)


def _where() -> Any:
    """A column: the pids of the executor JVM and of the Python worker that computed the row."""
    from pyspark.sql import functions as f

    def where() -> tuple[int, int]:
        # Defined here, so Spark ships it by value: the executors cannot import the tests. The
        # row's Python worker descends from PySpark's daemon, a child of the executor's JVM.
        pid = os.getpid()
        while pid > 1:
            with open(f"/proc/{pid}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{parent}/comm") as comm:
                if comm.read().strip() == "java":
                    return parent, os.getpid()
            pid = parent
        return -1, os.getpid()

    column = f.udf(where, "struct<jvm:long,python:long>", useArrow=False)
    return column.asNondeterministic()()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def test_each_node_is_read_by_its_own_executor_and_every_message_once(
    standalone_spark: Any, standalone_cluster: StandaloneCluster, kafka_bootstrap: str,
    new_topic: Callable[..., str],
) -> None:  # fmt: skip
    """Default sourceCount = the cluster's parallelism; each node on a different executor JVM."""
    parallelism = standalone_spark.sparkContext.defaultParallelism
    assert parallelism == WORKERS  # one core per executor, one executor per worker
    topic = new_topic(partitions=5)
    produce(kafka_bootstrap, topic, 2_000, partitions=5)
    frame = read(standalone_spark, kafka_bootstrap, topic, startingOffsets="earliest")
    rows = frame.select("node_id", "partition", "offset", "value", _where().alias("w")).collect()
    assert len(rows) == 2_000
    assert len({(row.partition, row.offset) for row in rows}) == 2_000
    assert {int(row.value) for row in rows} == set(range(2_000))
    jvms = {node: {row.w.jvm for row in rows if row.node_id == node} for node in range(parallelism)}
    pythons = {row.node_id: row.w.python for row in rows}
    assert set(pythons) == set(range(parallelism))
    assert all(len(found) == 1 for found in jvms.values()), jvms
    executors = {node: found.pop() for node, found in jvms.items()}
    assert len(set(executors.values())) == parallelism, executors
    assert len(set(pythons.values())) == parallelism, pythons
    # Each executor JVM is the child of a different worker that the cluster fixture started.
    parents = {_parent(jvm) for jvm in executors.values()}
    assert parents == set(standalone_cluster.worker_pids), (parents, executors)


PRODUCTS = [f"p{number}" for number in range(6)]


def _events(bootstrap: str, orders: str, stock: str) -> dict[str, dict[str, float]]:
    """Order and delivery events; what the pipeline should report per product."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    expected: dict[str, Counter[str]] = {p: Counter() for p in PRODUCTS}
    revenue = dict.fromkeys(PRODUCTS, 0.0)
    for number in range(600):
        product, qty = PRODUCTS[number % len(PRODUCTS)], 1 + number % 4
        price = 1.0 + number % 7
        event = {"product": product, "qty": qty, "price": price, "ts": 1_700_000_000 + number}
        producer.produce(orders, json.dumps(event).encode(), partition=number % 4)
        expected[product].update(orders=1, units=qty)
        revenue[product] += qty * price
        if number % 3 == 0:
            delivery = {"product": product, "qty": 5, "ts": 1_700_000_000 + number}
            producer.produce(stock, json.dumps(delivery).encode(), partition=number % 2)
            expected[product].update(delivered=5)
    assert producer.flush(30) == 0
    return {
        product: {"orders": counts["orders"], "units": counts["units"],
                  "delivered": counts["delivered"], "revenue": round(revenue[product], 2),
                  "stock_level": counts["delivered"] - counts["units"]}
        for product, counts in expected.items()
    }  # fmt: skip


@pytest.mark.timeout(300)
def test_the_pipeline_example_runs_on_the_cluster(
    standalone_cluster: StandaloneCluster, kafka_bootstrap: str, new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:  # fmt: skip
    """examples/spark_pipeline.py --master spark://... computes every product's figures there."""
    orders, stock = new_topic(partitions=4), new_topic(partitions=2)
    expected = _events(kafka_bootstrap, orders, stock)
    out = tmp_path / "pipeline"
    command = [
        sys.executable, str(PIPELINE), "--master", standalone_cluster.master_url,
        "--bootstrap", kafka_bootstrap, "--orders", orders, "--stock", stock,
        "--group", f"pipeline-{uuid.uuid4().hex[:8]}", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "SPARK_CONF_DIR": str(standalone_cluster.conf_dir)}  # JVM_OPTIONS
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env, check=False
    )
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n{standalone_cluster.logs()}"
    assert f"Parquet tables in {out}" in done.stdout
    levels = pq.read_table(out / "stock_levels").to_pylist()
    found = {
        row["product"]: {key: row[key] for key in ("orders", "units", "delivered", "stock_level")}
        | {"revenue": round(row["revenue"], 2)}
        for row in levels
    }
    assert found == expected
    per_minute = pq.read_table(out / "orders_per_minute").to_pylist()
    assert sum(row["orders"] for row in per_minute) == 600
    # The master ran it as an application of its own, beside the tests' session; the driver
    # tells the master it is done without waiting for an answer, so give the master a moment.
    deadline = time.monotonic() + 30
    while "client-balance-pipeline" not in (finished := _finished_apps(standalone_cluster)):
        assert time.monotonic() < deadline, f"the master lists no finished pipeline: {finished}"
        time.sleep(0.2)


def _finished_apps(cluster: StandaloneCluster) -> list[str]:
    return [app["name"] for app in cluster.state()["completedapps"]]
