"""bench/strategies.py: kafka-python's assignors are timed in a process apart from ours."""

import argparse
import functools
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from client_balance.strategies import get_strategy
from tests.bench_scripts import load_bench_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/strategies.py loaded as a module (it is a script, not part of the package)."""
    return load_bench_script("strategies")


@pytest.fixture(scope="module")
def measure() -> ModuleType:
    """bench/measure.py, the timing helpers the bench scripts share."""
    return load_bench_script("measure")


def test_a_peer_process_answers_from_another_process_and_keeps_it(measure: ModuleType) -> None:
    """Calls run in one process that is not the bench's; after close() a new one starts."""
    peer = measure.PeerProcess()
    try:
        first, second = peer.call(os.getpid), peer.call(os.getpid)
        peer.close()
        third = peer.call(os.getpid)
    finally:
        peer.close()
    assert first != os.getpid()
    assert first == second
    assert third not in (first, os.getpid())


class _RecordingProcess:
    """Stands in for the peer's process: records what it is asked to run, answers for it."""

    def __init__(self, answer: tuple[list[float], dict[str, list[tuple[str, int]]]]) -> None:
        self.answer = answer
        self.called: list[Callable[..., Any]] = []

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        self.called.append(function)
        return self.answer

    def close(self) -> None:
        pass


def test_the_kafka_python_line_is_timed_through_the_peers_process(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its times and answer come from time_kafka_python run in the peer's process, not here."""
    monkeypatch.setattr(bench, "kafka_clients_version", lambda: "4.3.1")
    monkeypatch.setattr(bench, "kafka_python_version", lambda: "3.0.12")
    args = argparse.Namespace(runs=5, warmup=3, peer_runs=3, budget=60.0, java_heap="1g")
    runner = bench.Bench(args)
    scenario = bench.Scenario("sticky", bench.SMALL, "fresh")
    group = bench.make_group(scenario)
    ours = get_strategy("sticky").assign(group.topics, bench.our_members(group, {}))
    answer = {member: [(tp.topic, tp.partition) for tp in tps] for member, tps in ours.items()}
    process = _RecordingProcess(([0.3, 0.1, 0.2], answer))
    runner._kafka_python_process = process

    line = runner._kafka_python_line(scenario, group, {})

    (called,) = process.called
    assert isinstance(called, functools.partial)
    assert called.func.__name__ == "time_kafka_python"
    assert called.args[0] == "sticky"
    assert called.keywords["runs"] == 3  # --peer-runs caps kafka-python's runs
    assert line["peer_name"] == "kafka-python-3.0.12"
    assert line["peer_runs_s"] == [0.3, 0.1, 0.2]
    assert line["peer_s"] == 0.2
    assert line["peer_valid"] is True
