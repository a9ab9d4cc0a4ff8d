"""The demo's exactly-once check and its view of a group (examples/_demo_*.py), without a broker."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))
from _demo_check import add_committed_tail, check_exactly_once  # noqa: E402 - not a package
from _demo_view import holders, relabel  # noqa: E402 - the examples folder is not a package

from client_balance.admin import GroupView, MemberView, PartitionView  # noqa: E402 - see above


def _report(node_id: int, **runs: list[list[int]]) -> dict[str, Any]:
    partitions = {
        key.replace("_", ":"): {"messages": sum(end - start for start, end in spans), "runs": spans}
        for key, spans in runs.items()
    }
    return {"node_id": node_id, "partitions": partitions}


def test_a_partition_split_between_two_workers_is_consumed_exactly_once() -> None:
    """A partition handed from one worker to the next at one offset passes the check."""
    reports = [_report(0, orders_0=[[0, 40]]), _report(1, orders_0=[[40, 100]])]
    assert check_exactly_once(reports, {"orders:0": (0, 100)}) == []


def test_the_check_names_offsets_twice_and_missing() -> None:
    """An overlap is named as offsets that came twice, a hole and a short end as never consumed."""
    reports = [_report(0, orders_0=[[0, 50]]), _report(1, orders_0=[[45, 60], [70, 90]])]
    assert check_exactly_once(reports, {"orders:0": (0, 100)}) == [
        "orders:0: offsets 45..49 came twice",
        "orders:0: offsets 60..69 were never consumed",
        "orders:0: offsets 90..99 were never consumed",
    ]


def test_a_killed_workers_commits_after_its_last_report_count_as_its_own() -> None:
    """The killed worker's report ends at 30, its commits at 45: [30, 45) is put back as its own."""
    killed = _report(1, orders_1=[[10, 30]])
    completed, tail, problems = add_committed_tail(
        killed, {"orders:1": 45, "stock:1": None}, {"orders:1": (10, 80), "stock:1": (0, 9)}
    )
    assert (tail, problems) == (15, [])
    assert completed["partitions"]["orders:1"] == {"messages": 35, "runs": [[10, 30], [30, 45]]}
    replacement = _report(3, orders_1=[[45, 80]], stock_1=[[0, 9]])
    expected = {"orders:1": (10, 80), "stock:1": (0, 9)}
    assert check_exactly_once([completed, replacement], expected) == []


def test_a_report_beyond_the_commits_is_a_problem() -> None:
    """Offsets reported but never committed come again to the replacement: the tail says so."""
    _, tail, problems = add_committed_tail(
        _report(1, orders_1=[[0, 30]]), {"orders:1": 20}, {"orders:1": (0, 80)}
    )
    assert (tail, problems) == (0, ["orders:1: reported up to 30 but committed 20"])


def _member(consumer_id: str, pid: int, node_id: int, holds: tuple[str, ...]) -> MemberView:
    return MemberView(
        consumer_id=consumer_id, host="h", pid=pid, node_id=node_id, source_count=3,
        mode="node", topics=("orders",), strategy="modulo", version="0", live=True,
        fenced=False, last_seen_s=0.0, holds=holds, lag=None,
    )  # fmt: skip


def test_relabel_names_members_by_pid_and_leaves_other_runs_out() -> None:
    """Members of this run get the demo's names everywhere; a member of an old run is left out."""
    view = GroupView(
        group="demo",
        members=(
            _member("demo_h-7-aaaa", 7, 1, ("orders:1",)),
            _member("demo_h-8-bbbb", 8, 1, ()),
            _member("demo_h-5-old", 5, 0, ()),
        ),
        partitions=(
            PartitionView("orders", 0, None, None, 10),
            PartitionView("orders", 1, "demo_h-7-aaaa", 3, 10),
        ),
        conflicts=("node_id 1 is held by 2 live members: demo_h-7-aaaa, demo_h-8-bbbb",),
    )
    named = relabel(view, {7: "node 1", 8: "node 1 (new)"})
    assert [m.consumer_id for m in named.members] == ["node 1", "node 1 (new)"]
    assert holders(named) == {"orders:0": None, "orders:1": "node 1"}
    assert named.conflicts == ("node_id 1 is held by 2 live members: node 1, node 1 (new)",)
