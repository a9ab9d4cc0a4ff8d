"""The operator commands of ``client-balance``: ``status``, ``groups``, ``reset-offsets``, ``reap``.

They read the status topic through :mod:`client_balance.admin`. The cluster is
``--bootstrap-servers``, else ``CLIENT_BALANCE_BOOTSTRAP_SERVERS``, else the broker that
``client-balance broker start`` left running.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from typing import Any, Final

from client_balance import admin
from client_balance.admin._reset import parse_reset_target
from client_balance.cli import _render
from client_balance.cli._broker import running_broker_address
from client_balance.errors import ConfigError
from client_balance.settings import ClientBalanceSettings

__all__ = [
    "COMMANDS",
    "add_cluster_options",
    "add_parsers",
    "add_watch_option",
    "cluster_settings",
    "given",
    "watch_seconds",
]

_MAX_WATCH_S: Final = 86_400.0
"""The longest --watch period: a day (time.sleep overflows somewhere past 292 years)."""


def watch_seconds(text: str) -> float:
    """--watch: seconds between refreshes, finite and > 0 (nan, inf and 0 would never refresh)."""
    seconds = _number(text)
    if not 0 < seconds <= _MAX_WATCH_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; use a finite number of seconds > 0 (at most "
            f"{_MAX_WATCH_S:g})"
        )
    return seconds


def given(text: str) -> str:
    """A value that names something (a group, a cluster, a topic): not empty or blank.

    An empty ``--bootstrap-servers "$PROD"`` with ``PROD`` unset must not fall back to another
    cluster, nor an empty ``--status-topic`` to the default one.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; give a non-empty value")
    return text


def _age_seconds(text: str) -> float:
    """--older-than-s: a finite number of seconds >= 0."""
    seconds = _number(text)
    if not 0 <= seconds < math.inf:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; use a finite number of seconds >= 0"
        )
    return seconds


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None


_MAX_STATUS_PARTITIONS: Final = 10_000
"""The setting status_topic_partitions' own bound."""


def _status_partitions(text: str) -> int:
    """--status-topic-partitions: the members' status_topic_partitions, 1 to 10,000."""
    count = int(text) if text.isascii() and text.isdecimal() else 0
    if not 1 <= count <= _MAX_STATUS_PARTITIONS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; use a whole number from 1 to {_MAX_STATUS_PARTITIONS:,} "
            "(the members' status_topic_partitions)"
        )
    return count


def _reset_target(text: str) -> str:
    """--to: earliest, latest or ms since the epoch; never a negative number (Kafka's sentinels)."""
    try:
        parse_reset_target(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; use earliest, latest or a time in milliseconds since the "
            "epoch (a whole number >= 0)"
        ) from None
    return text


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-servers``, ``--status-topic`` and ``--status-topic-partitions``.

    :func:`cluster_settings` reads them.
    """
    parser.add_argument(
        "--bootstrap-servers",
        type=given,
        default=None,
        help="Kafka cluster (default: $CLIENT_BALANCE_BOOTSTRAP_SERVERS, else the broker "
        "started with 'client-balance broker start')",
    )
    parser.add_argument(
        "--status-topic", type=given, default=None, help="status topic, if not default"
    )
    parser.add_argument(
        "--status-topic-partitions", type=_status_partitions, default=None, metavar="N",
        help="the members' status_topic_partitions (default: found from where the group's "
        "records are)",
    )  # fmt: skip


def add_watch_option(parser: argparse.ArgumentParser) -> None:
    """``--watch [SECONDS]``: refresh a view until Ctrl-C."""
    parser.add_argument(
        "--watch", type=watch_seconds, nargs="?", const=2.0, default=None, metavar="SECONDS",
        help="refresh every SECONDS (> 0, default 2) until Ctrl-C",
    )  # fmt: skip


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the operator commands to the ``client-balance`` parser."""
    status = commands.add_parser("status", help="members, partitions and lag of a group")
    status.add_argument("--group", type=given, required=True)
    status.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_watch_option(status)
    add_cluster_options(status)

    groups = commands.add_parser("groups", help="client-balanced groups in the status topic")
    groups.add_argument("--json", action="store_true")
    add_cluster_options(groups)

    reset = commands.add_parser(
        "reset-offsets", help="commit a group's offsets (refused while it has live members)"
    )
    reset.add_argument("--group", type=given, required=True)
    reset.add_argument(
        "--to", required=True, type=_reset_target,
        help="earliest, latest, or a time in ms since the epoch (>= 0)",
    )  # fmt: skip
    reset.add_argument(
        "--topic", action="append", default=[], help="topic to reset (default: those reported)"
    )
    add_cluster_options(reset)

    reap = commands.add_parser(
        "reap", help="tombstone the status records of a group's long-dead members"
    )
    reap.add_argument("--group", type=given, required=True)
    reap.add_argument(
        "--older-than-s", type=_age_seconds, default=None, metavar="SECONDS",
        help="dead this long past their lease (default: the setting reap_after_s, 3600)",
    )  # fmt: skip
    add_cluster_options(reap)


def cluster_settings(args: argparse.Namespace, group: str) -> ClientBalanceSettings:
    """Settings for ``group`` on the cluster that :func:`add_cluster_options`' options name."""
    servers = args.bootstrap_servers
    if servers is None:
        servers = os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS") or running_broker_address()
    if not servers:
        raise ConfigError(
            "no cluster given: pass --bootstrap-servers, set CLIENT_BALANCE_BOOTSTRAP_SERVERS, "
            "or start one with 'client-balance broker start'"
        )
    values: dict[str, Any] = {"bootstrap_servers": servers, "group_id": group}
    if args.status_topic is not None:
        values["status_topic"] = args.status_topic
    # getattr: callers that build their own Namespace (the exporter's tests) predate the flag.
    partitions = getattr(args, "status_topic_partitions", None)
    if partitions is not None:  # given, it decides between partitions
        values["status_topic_partitions"] = partitions
    return ClientBalanceSettings(**values)


def _status(args: argparse.Namespace) -> int:
    settings = cluster_settings(args, args.group)

    def frame() -> _render.Renderable:
        view = admin.GroupView.load(settings, args.group)
        return json.dumps(view.to_dict(), indent=2) if args.json else _render.group_view(view)

    if args.watch is not None:
        _render.watch(frame, args.watch)
    _render.show(frame())
    return _render.EXIT_OK


def _groups(args: argparse.Namespace) -> int:
    settings = cluster_settings(args, "__client_balance_cli")
    groups = admin.list_groups(settings)
    if args.json:
        _render.out(json.dumps(groups, indent=2))
    elif not groups:
        _render.out(f"no client-balanced groups in {settings.status_topic}")
    else:
        rows = [[group, str(members)] for group, members in groups.items()]
        _render.show(_render.table(["GROUP", "MEMBERS"], rows))
    return _render.EXIT_OK


def _reset(args: argparse.Namespace) -> int:
    settings = cluster_settings(args, args.group)
    done = admin.reset_offsets(settings, args.group, args.to, topics=tuple(args.topic))
    for key, offset in done.items():
        _render.out(f"{key} -> {offset}")
    _render.say(f"reset {len(done)} partition(s) of group {args.group}")
    return _render.EXIT_OK


def _reap(args: argparse.Namespace) -> int:
    settings = cluster_settings(args, args.group)
    reaped = admin.reap_dead_members(settings, args.group, older_than_s=args.older_than_s)
    for consumer_id in reaped:
        _render.out(consumer_id)
    _render.say(f"reaped {len(reaped)} dead member(s) of group {args.group}")
    return _render.EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": _status,
    "groups": _groups,
    "reset-offsets": _reset,
    "reap": _reap,
}
