"""The operator commands of ``client-balance``: ``status``, ``groups`` and ``reset-offsets``.

They read the status topic through :mod:`client_balance.admin`. The cluster is
``--bootstrap-servers``, else ``CLIENT_BALANCE_BOOTSTRAP_SERVERS``, else the broker that
``client-balance broker start`` left running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from client_balance import admin
from client_balance.errors import ConfigError
from client_balance.settings import ClientBalanceSettings

__all__ = ["GROUP_COMMANDS", "add_group_parsers", "render_view"]


def add_group_parsers(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    bootstrap_default: Callable[[], str | None],
) -> None:
    """Add the operator commands to the ``client-balance`` parser."""

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--bootstrap-servers",
            default=None,
            help="Kafka cluster (default: $CLIENT_BALANCE_BOOTSTRAP_SERVERS, else the broker "
            "started with 'client-balance broker start')",
        )
        parser.add_argument("--status-topic", default=None, help="status topic, if not default")
        parser.set_defaults(bootstrap_default=bootstrap_default)

    status = commands.add_parser("status", help="members, partitions and lag of a group")
    status.add_argument("--group", required=True)
    status.add_argument("--json", action="store_true", help="print JSON instead of tables")
    status.add_argument(
        "--watch", type=float, nargs="?", const=2.0, default=None, metavar="SECONDS",
        help="refresh every SECONDS (default 2) until Ctrl-C",
    )  # fmt: skip
    common(status)

    groups = commands.add_parser("groups", help="client-balanced groups in the status topic")
    groups.add_argument("--json", action="store_true")
    common(groups)

    reset = commands.add_parser(
        "reset-offsets", help="commit a group's offsets (refused while it has live members)"
    )
    reset.add_argument("--group", required=True)
    reset.add_argument(
        "--to", required=True, help="earliest, latest, or a time in ms since the epoch"
    )
    reset.add_argument(
        "--topic", action="append", default=[], help="topic to reset (default: those reported)"
    )
    common(reset)


def _settings(args: argparse.Namespace, group: str) -> ClientBalanceSettings:
    servers = (
        args.bootstrap_servers
        or os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS")
        or args.bootstrap_default()
    )
    if not servers:
        raise ConfigError(
            "no cluster given: pass --bootstrap-servers, set CLIENT_BALANCE_BOOTSTRAP_SERVERS, "
            "or start one with 'client-balance broker start'"
        )
    values: dict[str, Any] = {"bootstrap_servers": servers, "group_id": group}
    if args.status_topic:
        values["status_topic"] = args.status_topic
    return ClientBalanceSettings(**values)


def render_view(view: admin.GroupView) -> str:
    """The group view as two tables and a summary line."""
    live = view.live_members
    lines = [
        f"group {view.group}: {len(live)} live member(s), {len(view.partitions)} partition(s), "
        f"{len(view.orphaned)} orphaned, total lag {view.total_lag}"
    ]
    member_rows = [
        [
            "node" if m.source_count > 0 else "elastic" if m.source_count < 0 else "manual",
            str(m.node_id) if m.source_count > 0 else "-",
            f"{m.host}:{m.pid}",
            "live" if m.live else "dead" if not m.fenced else "fenced",
            f"{m.last_seen_s:g}s",
            str(len(m.holds)),
            "-" if m.lag is None else str(m.lag),
            m.consumer_id,
        ]
        for m in view.members
    ]
    lines += [
        "",
        *_table(
            ["MODE", "NODE", "HOST:PID", "STATE", "SEEN", "HOLDS", "LAG", "MEMBER"], member_rows
        ),
    ]
    partition_rows = [
        [
            f"{p.topic}:{p.partition}",
            p.holder or "(orphaned)",
            "-" if p.committed is None else str(p.committed),
            "-" if p.high is None else str(p.high),
            "-" if p.lag is None else str(p.lag),
        ]
        for p in view.partitions
    ]
    lines += ["", *_table(["PARTITION", "HOLDER", "COMMITTED", "HIGH", "LAG"], partition_rows)]
    if view.conflicts:
        lines += ["", "CONFLICTS:", *(f"  {conflict}" for conflict in view.conflicts)]
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def _status(args: argparse.Namespace) -> int:
    settings = _settings(args, args.group)
    while True:
        view = admin.GroupView.load(settings, args.group)
        text = json.dumps(view.to_dict(), indent=2) if args.json else render_view(view)
        if args.watch:
            print("\033[2J\033[H" + time.strftime("%H:%M:%S") + "\n" + text, flush=True)
            time.sleep(args.watch)
            continue
        print(text)
        return 0


def _groups(args: argparse.Namespace) -> int:
    settings = _settings(args, "__client_balance_cli")
    groups = admin.list_groups(settings)
    if args.json:
        print(json.dumps(groups, indent=2))
    elif not groups:
        print(f"no client-balanced groups in {settings.status_topic}")
    else:
        print("\n".join(_table(["GROUP", "MEMBERS"], [[g, str(n)] for g, n in groups.items()])))
    return 0


def _reset(args: argparse.Namespace) -> int:
    settings = _settings(args, args.group)
    done = admin.reset_offsets(settings, args.group, args.to, topics=tuple(args.topic))
    for key, offset in done.items():
        print(f"{key} -> {offset}")
    print(f"reset {len(done)} partition(s) of group {args.group}", file=sys.stderr)
    return 0


GROUP_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": _status,
    "groups": _groups,
    "reset-offsets": _reset,
}
