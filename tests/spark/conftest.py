"""The Spark tests' fixtures: a ``local[2]`` session and the cluster of ``standalone.py``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from client_balance.spark import register
from tests.spark.standalone import standalone_cluster, standalone_spark, summary

__all__ = ["spark", "standalone_cluster", "standalone_spark"]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] session per module with the source registered; workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind to this machine only
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("client-balance-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    register(session)
    yield session
    session.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say where the cluster tests ran and how long the cluster took to start."""
    note = summary()
    if note is not None:
        terminalreporter.write_line(note)
