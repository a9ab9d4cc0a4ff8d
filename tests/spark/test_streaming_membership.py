"""A Spark streaming query in its group's status view, next to SDK workers (``local[2]``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings
from client_balance.admin import GroupView
from client_balance.cli import main as cli_main
from tests.integration.workers import produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {what}")
        time.sleep(0.2)


def _start(spark: Any, bootstrap: str, topic: str, group: str, checkpoint: Path) -> Any:
    frame = (
        spark.readStream.format("client_balance")
        .option("kafka.bootstrap.servers", bootstrap).option("topics", topic)
        .option("group.id", group).option("startingOffsets", "earliest").load()
    )  # fmt: skip
    return (
        frame.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_a_streaming_query_is_a_group_member_that_workers_leave_alone(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A query is a spark member with its lag, workers skip its partitions until it stops."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 100, partitions=2)
    group = f"stream-member-{uuid.uuid4().hex[:8]}"
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap, group_id=group, reconcile_interval_s=1.0
    )

    def view() -> GroupView:
        return GroupView.load(settings)

    def spark_members() -> list[Any]:
        return [m for m in view().live_members if m.mode == "spark"]

    query = _start(spark, kafka_bootstrap, topic, group, tmp_path / "checkpoint")
    try:
        query.processAllAvailable()
        _wait(
            lambda: (
                [(m.holds, m.lag) for m in spark_members()] == [((f"{topic}:0", f"{topic}:1"), 0)]
            ),
            60,
            "the query holds both partitions and has read them all",
        )
        produce(kafka_bootstrap, topic, 20, partitions=2)
        assert cli_main(["status", "--group", group, "--bootstrap-servers", kafka_bootstrap]) == 0
        assert "spark" in capsys.readouterr().out
        with ClientBalanceConsumer(settings) as worker:
            worker.start([topic], 1, 0)
            _wait(lambda: len(view().live_members) == 2, 30, "the worker joined")
            time.sleep(3 * settings.reconcile_interval_s)  # rounds in which it could take them
            assert not worker.registered_partitions()
            query.stop()
            _wait(
                lambda: len(worker.registered_partitions()) == 2,
                60,
                "the worker takes the partitions once the query stopped",
            )
            assert spark_members() == []
        restarted = _start(spark, kafka_bootstrap, topic, group, tmp_path / "checkpoint")
        try:
            restarted.processAllAvailable()
            _wait(lambda: len(spark_members()) == 1, 60, "the restarted query joined")
        finally:
            restarted.stop()
    finally:
        query.stop()
