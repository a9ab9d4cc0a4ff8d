"""``make demo`` end to end: examples/demo.py --quick against the session's broker, in a log.

The same steps as the demo on a fifth of its data: three nodes, one SIGKILLed and replaced after
its lease, an elastic group growing from 3 to 4, the Spark pipeline. Its stdout is a pipe here,
as in CI, so the live view must come out as plain lines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


@pytest.mark.timeout(300)
def test_the_demo_runs_end_to_end_and_every_check_passes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Exactly once through a crash and an elastic join, Spark's tables, paths named, no escapes."""
    prefix = f"demo-{uuid.uuid4().hex[:8]}-"
    command = [sys.executable, str(DEMO), "--quick", "--prefix", prefix, "--out", str(tmp_path)]
    env = {**os.environ, "CLIENT_BALANCE_BOOTSTRAP_SERVERS": kafka_bootstrap}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=280, env=env, check=False
    )
    out = done.stdout
    assert done.returncode == 0, f"{out[-5000:]}\n{done.stderr[-3000:]}"
    assert "\x1b[" not in out, "a log got terminal escape codes"
    assert f"group {prefix}demo: 3 live" in out, "no plain summary line of the group view"
    # Node 1's share depends on the topic names (the prefix is random): 3 to 5 of the 12.
    killed = re.search(r"SIGKILL node 1 \(pid \d+\), a crash: it releases nothing; its (\d+) ", out)
    taken = re.search(r"the replacement holds ((?:\S+:\d+, )*\S+:\d+): it resumes from", out)
    assert killed, "no kill of node 1"
    assert taken, "no takeover by the replacement"
    assert len(taken.group(1).split(", ")) == int(killed.group(1)) > 0
    assert "OK: all 30,000 events consumed exactly once across the group" in out
    assert "the group grew to 4: sticky moved 3 of 12 partitions" in out
    assert "OK: 3 partitions moved and" in out
    assert "FAILED" not in out
    for table in ("orders_per_minute", "stock_levels"):
        assert (tmp_path / table).is_dir()
        assert str(tmp_path / table) in out
    assert str(tmp_path / "workers") in out
