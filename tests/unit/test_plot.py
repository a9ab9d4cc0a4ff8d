"""bench/plot.py: benchmark JSON lines in, PNG charts out (on a small sample of each format)."""

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench_scripts import load_bench_script

PLOT = Path(__file__).resolve().parents[2] / "bench" / "plot.py"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

STRATEGIES: list[dict[str, Any]] = [
    {"bench": "strategies", "cores": 2, "machine": "x86_64"},  # a header: no case
    {"bench": "strategies", "case": "range-10k-x1000-fresh-vs-java", "ours": 0.0021,
     "peer": 0.0104, "peer_name": "java-4.3.1", "unit": "s", "ratio": 4.95},
    {"bench": "strategies", "case": "range-10k-x1000-fresh-vs-kafka-python", "ours": 0.0021,
     "peer": 1.93, "peer_name": "kafka-python-3.0.12", "unit": "s", "ratio": 919.0},
    {"bench": "strategies", "case": "sticky-1m-x2000-fresh-vs-java", "ours": None, "peer": None,
     "peer_name": "java-4.3.1", "unit": "s", "ratio": None, "error": "ours: not registered"},
]  # fmt: skip
CONSUMER: list[dict[str, Any]] = [
    {"bench": "consumer", "case": "throughput-4p-100b", "ours": 812000, "peer": 845000,
     "peer_name": "confluent-kafka-2.16.1", "unit": "msg/s", "ratio": 0.961,
     "peer_mode": "assign-only, consume(num_messages=batch), no commits"},
    {"bench": "consumer", "case": "first-message-kip848", "ours": 0.21, "peer": 0.55,
     "peer_name": "confluent-kafka-2.16.1", "unit": "s", "ratio": 2.6, "peer_mode": "kip848"},
]  # fmt: skip
ELASTIC: list[dict[str, Any]] = [
    {"bench": "elastic", "run": 0, "side": "ours", "leave": {"s": 0.4}},  # a single run
    {"bench": "elastic", "case": "group-of-8-leave", "ours": 0.41, "peer": 3.2,
     "peer_name": "confluent-kafka-2.16.1 KIP-848", "peer_mode": "kip848", "unit": "s",
     "ratio": 7.8},
    {"bench": "elastic", "case": "group-of-8-leave", "ours": 0.41, "peer": 5.0,
     "peer_name": "confluent-kafka-2.16.1 cooperative-sticky", "peer_mode": "classic",
     "unit": "s", "ratio": 12.2},
]  # fmt: skip
SCALE: list[dict[str, Any]] = [
    {"bench": "scale", "case": "members-startup", "members": 10, "ours": 0.3, "peer": None,
     "peer_name": None, "ratio": None, "unit": "s"},
    {"bench": "scale", "case": "members-cpu", "members": 10, "ours": 0.01, "peer": None,
     "peer_name": None, "ratio": None, "unit": "cpu_s/s"},
    {"bench": "scale", "case": "members-startup-growth", "unit": "log-log slope", "ours": 0.4,
     "peer": None, "peer_name": None, "ratio": None,
     "points": [[10, 0.3], [100, 0.5], [1000, 1.9]]},
    {"bench": "scale", "case": "members-round-growth", "unit": "log-log slope", "ours": 0.9,
     "peer": None, "peer_name": None, "ratio": None,
     "points": [[10, 0.01], [100, 0.04], [1000, 0.3]]},
    {"bench": "scale", "case": "partitions-round-growth", "unit": "log-log slope", "ours": 1.0,
     "peer": None, "peer_name": None, "ratio": None, "points": [[100, 0.002], [15000, 0.2]]},
]  # fmt: skip


def _lines(*groups: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for group in groups for line in group)


@pytest.fixture(scope="module")
def plot() -> ModuleType:
    """bench/plot.py as a module (bench/ is a folder of scripts, not a package)."""
    return load_bench_script("plot")


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(PLOT), *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)


def test_files_give_one_chart_per_bench_and_unit_and_the_scale_curves(tmp_path: Path) -> None:
    """Each bench gets a chart (per unit when it mixes them); scale gets its two curves."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "strategies.jsonl").write_text(_lines(STRATEGIES) + "not json\n")
    (results / "rest.jsonl").write_text(_lines(CONSUMER, ELASTIC, SCALE))
    out = tmp_path / "img"
    done = _run(str(results / "strategies.jsonl"), str(results / "rest.jsonl"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    names = {
        "bench-strategies.png", "bench-consumer-msg-s.png", "bench-consumer-s.png",
        "bench-elastic.png", "bench-scale-members.png", "bench-scale-partitions.png",
    }  # fmt: skip
    assert {path.name for path in out.iterdir()} == names
    assert sorted(done.stdout.split()) == sorted(str(out / name) for name in names)
    for name in names:
        assert (out / name).read_bytes().startswith(PNG_MAGIC)
    assert "skipped 1 line(s)" in done.stderr


def test_stdin_is_read_when_no_file_is_given(tmp_path: Path) -> None:
    """`bench/x.py | bench/plot.py` works: no file means stdin."""
    done = _run("--out", str(tmp_path), stdin=_lines(ELASTIC))
    assert done.returncode == 0, done.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["bench-elastic.png"]


def test_nothing_to_draw_is_an_error_that_says_so(tmp_path: Path) -> None:
    """Only headers and failed cases: exit 1, no file, and why."""
    done = _run("--out", str(tmp_path), stdin=_lines(STRATEGIES[:1], STRATEGIES[3:]))
    assert done.returncode == 1
    assert "no chart written" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    """A FILE that does not exist is a usage error naming it."""
    done = _run(str(tmp_path / "nope.jsonl"), "--out", str(tmp_path))
    assert done.returncode == 2
    assert "nope.jsonl" in done.stderr


def test_rows_pair_each_case_with_its_peers_named_with_their_mode(plot: ModuleType) -> None:
    """One row per case (its -vs-PEER suffixes merged); the peer mode joins a name lacking it."""
    charts = plot.comparisons([*STRATEGIES, *CONSUMER, *ELASTIC])
    strategies = charts[("strategies", "s")]
    assert list(strategies) == ["range-10k-x1000-fresh"]  # the failed case is left out
    assert set(strategies["range-10k-x1000-fresh"].peers) == {"java-4.3.1", "kafka-python-3.0.12"}
    assert set(charts[("elastic", "s")]["group-of-8-leave"].peers) == {
        "confluent-kafka-2.16.1 KIP-848",
        "confluent-kafka-2.16.1 cooperative-sticky (classic)",
    }
    assert list(charts[("consumer", "msg/s")]["throughput-4p-100b"].peers) == [
        "confluent-kafka-2.16.1 (assign-only, consume(num_messages=batch), no commits)"
    ]


def test_scale_points_prefer_the_growth_lines(plot: ModuleType) -> None:
    """The growth lines' points are the curves; per-point lines fill in where there are none."""
    points = plot.scale_points(SCALE)
    assert points[("members", "startup")] == [(10, 0.3), (100, 0.5), (1000, 1.9)]
    assert points[("members", "cpu")] == [(10, 0.01)]
    assert points[("partitions", "round")] == [(100, 0.002), (15000, 0.2)]


def test_a_growth_point_without_a_figure_is_left_out(plot: ModuleType) -> None:
    """A point whose runs had no round (null in the line) is skipped, not a crash."""
    line = {"bench": "scale", "case": "partitions-round-growth", "unit": "log-log slope",
            "ours": 0.8, "points": [[100, 0.01], [10000, 0.25], [100000, None]]}  # fmt: skip
    assert plot.scale_points([line])[("partitions", "round")] == [(100, 0.01), (10000, 0.25)]


def test_the_axis_turns_logarithmic_only_for_wide_ranges(plot: ModuleType) -> None:
    """Values spanning more than LOG_SPAN get a log axis; close ones a linear one."""
    assert plot._log_wanted([0.0021, 1.93])
    assert not plot._log_wanted([812000, 845000])
