"""bench/consumer.py: which lines time the raw loop with the SDK imported, and what they say."""

import argparse
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import load_bench_script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/consumer.py loaded as a module (it is a script, not part of the package)."""
    return load_bench_script("consumer")


def test_only_the_same_settings_lines_time_the_extra_raw_loops(bench: ModuleType) -> None:
    """The SDK-imported and the split raw loops run beside the two 100-byte same-settings lines."""
    cases = bench.plan(argparse.Namespace(kafka=None, batch=None))
    timed = [case.name for case in cases if case.times_extra_peers]
    assert timed == [
        "throughput-batch1000-fetch.queue.backoff.ms=10",
        "throughput-batch5000-fetch.queue.backoff.ms=10",
    ]
    assert set(bench.EXTRA_PEERS) == {"throughput-peer-sdk-imported", "throughput-peer-split"}
    assert set(bench.EXTRA_PEERS) <= set(bench.WORKERS)


def test_the_split_fields_set_ours_against_a_loop_of_per_partition_runs(
    bench: ModuleType,
) -> None:
    """split_share is split/raw, ratio_to_peer_split ours/split; none without runs."""
    runs = [{"rate": 850.0, "batches": 1130}, {"rate": 900.0, "batches": 1140}]
    fields = bench._split_fields(ours=792.0, peer=1000.0, split_runs=runs)
    assert fields == {
        "peer_split": 875,
        "peer_split_runs": [850, 900],
        "peer_split_batches": 1135,
        "split_share": 0.875,
        "ratio_to_peer_split": 0.905,
    }
    assert bench._split_fields(ours=1.0, peer=1.0, split_runs=[]) == {}


def test_the_sdk_imported_fields_split_the_gap_into_its_two_shares(bench: ModuleType) -> None:
    """The import's share is imported/raw; what remains is ours/imported; none without runs."""
    runs = [{"rate": 900.0}, {"rate": 950.0}, {"rate": 1000.0}]
    fields = bench._sdk_imported_fields(ours=855.0, peer=1000.0, imported_runs=runs)
    assert fields == {
        "peer_sdk_imported": 950,
        "peer_sdk_imported_runs": [900, 950, 1000],
        "sdk_import_share": 0.95,
        "ratio_to_peer_sdk_imported": 0.9,
    }
    assert bench._sdk_imported_fields(ours=1.0, peer=1.0, imported_runs=[]) == {}


def test_the_raw_loops_process_does_not_import_the_sdk() -> None:
    """Loading the bench script leaves client_balance out: the raw side carries none of it."""
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.bench_scripts import load_bench_script\n"
        "load_bench_script('consumer')\n"
        "print(sorted(name for name in sys.modules if name.startswith('client_balance')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_first_message_cases_time_start_runs_after_start_warmup(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first-message case warms up --start-warmup and times --start-runs pairs, alternating."""
    calls: list[str] = []

    def run_worker(name: str, *_: object) -> dict[str, float]:
        calls.append(name)
        return {"seconds": 0.02}

    monkeypatch.setattr(bench, "run_worker", run_worker)
    args = bench.make_parser().parse_args(["--start-warmup", "2", "--start-runs", "3"])
    case = bench.Case("first-message", kafka={"group.protocol": "consumer"})
    ours, peer, our_warmups, peer_warmups, _ = bench.alternate(args, "bootstrap", "topic", case)
    assert (len(ours), len(peer), len(our_warmups), len(peer_warmups)) == (3, 3, 2, 2)
    assert calls[4:] == ["first-message-ours", "first-message-peer"] * 3


def test_the_first_message_defaults_are_thirty_warm_ups_and_fifteen_runs(
    bench: ModuleType,
) -> None:
    """Without options a first-message line is 15 timed pairs after 30 warm-up pairs."""
    args = bench.make_parser().parse_args([])
    assert (args.start_warmup, args.start_runs, args.runs) == (30, 15, 5)
