"""One side of the ownership race in test_status.py (run as a process).

    python -m tests.integration.race_worker --bootstrap B --group G --topic T --rounds N
        --dir D --name NAME

Writes ``ready <consumer id>`` to ``D/NAME.out`` once started, then for each round ``r`` waits
for the file ``D/go-r``, tries ``connect("T:0")`` and writes ``r lost <holder>`` on a 410, or,
holding the partition, takes a batch, writes ``r won <first offset> <count>``, waits for
``D/release-r``, disconnects and writes ``r released``. The 421 of TubeMQ's "asked again too
soon" is turned off: each round, both sides claim.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceSettings,
    PartitionOccupiedError,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Race for partition 0, round by round; the exit code."""
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--group", "--topic", "--dir", "--name"):
        parser.add_argument(name, required=True)
    parser.add_argument("--rounds", type=int, required=True)
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    settings = ClientBalanceSettings(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        start_position="earliest",
        reconcile_interval_s=60.0,
        batch_max_messages=5,
        refused_connect_wait_s=0,  # no refusal without a claim: every round is contested
    )
    key = f"{args.topic}:0"
    with (
        ClientBalanceConsumer(settings) as consumer,
        (folder / f"{args.name}.out").open("a") as out,
    ):
        consumer.start([args.topic], source_count=0)
        out.write(f"ready {consumer.consumer_id}\n")
        out.flush()
        for round_ in range(args.rounds):
            go = folder / f"go-{round_}"
            while not go.exists():
                time.sleep(0.001)
            try:
                consumer.connect(key)
            except PartitionOccupiedError as occupied:
                out.write(f"{round_} lost {occupied.holder}\n")
                out.flush()
                continue
            batch = consumer.get_message(timeout_s=10)
            out.write(f"{round_} won {batch.messages[0].offset()} {len(batch.messages)}\n")
            out.flush()
            consumer.confirm(batch.confirm_context, consumed=False)  # the next winner reads them
            release = folder / f"release-{round_}"
            while not release.exists():
                time.sleep(0.001)
            consumer.disconnect(key)
            out.write(f"{round_} released\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
