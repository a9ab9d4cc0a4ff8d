"""The Spark tests' fixtures: the standalone cluster of ``tests/spark/standalone.py``."""

from __future__ import annotations

import pytest

from tests.spark.standalone import standalone_cluster, standalone_spark, summary

__all__ = ["standalone_cluster", "standalone_spark"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say where the cluster tests ran and how long the cluster took to start."""
    note = summary()
    if note is not None:
        terminalreporter.write_line(note)
