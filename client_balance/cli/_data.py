"""The data commands of ``client-balance``: ``lag`` (how far a group is behind) and ``tail``.

``lag`` reads the group's holders from the status topic and its committed offsets and the high
watermarks from Kafka (:class:`~client_balance.admin.GroupView`); ``--topic`` adds topics no
live member reports, so a stopped group's backlog shows too. ``tail`` reads a topic the way a
Spark task does: assign-only, no group joined, nothing committed.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from client_balance import _kafka, admin
from client_balance.cli import _render
from client_balance.cli._groups import (
    add_cluster_options,
    add_watch_option,
    cluster_settings,
    given,
)
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition

__all__ = ["COMMANDS", "From", "add_parsers", "decode", "parse_from", "share"]

_CLI_GROUP: Final = "__client_balance_cli"
"""The group id of the command's own clients: they read offsets, never join or commit."""

_READ_IDLE_S: Final = 30.0
"""How long a bounded read waits for a message before it gives up on the cluster."""

DESERIALIZERS: Final = ("bytes", "str", "json")

_NULL: Final = "(null)"
"""How a null key or value (Kafka's null, not an empty one) is shown."""


# --- arguments ------------------------------------------------------------------------------


@dataclass(frozen=True)
class From:
    """Where ``tail`` starts: ``earliest``, ``latest`` (and follows), an ``offset``, or ``last``."""

    kind: str
    number: int = 0
    """The offset (``offset``) or how many of each partition's newest messages (``last``)."""


def parse_from(text: str) -> From:
    """``--from``: earliest, latest, an offset >= 0, or -N (each partition's last N, N >= 1)."""
    if text in ("earliest", "latest"):
        return From(text)
    body = text[1:] if text.startswith("-") else text
    if body.isascii() and body.isdigit() and (not text.startswith("-") or int(body) > 0):
        return From("last", int(body)) if text.startswith("-") else From("offset", int(body))
    raise argparse.ArgumentTypeError(
        f"{text!r} is not allowed; use earliest, latest, an offset (a whole number >= 0) or -N "
        "(the last N messages of each partition, N >= 1)"
    )


def _whole(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if text.isascii() and text.isdigit() and int(text) >= least:
            return int(text)
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; use a whole number >= {least}")

    return parse


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``lag`` and ``tail`` to the ``client-balance`` parser."""
    lag = commands.add_parser("lag", help="per partition: holder, offsets and lag of a group")
    lag.add_argument("--group", type=given, required=True)
    lag.add_argument(
        "--topic", action="append", default=[],
        help="a topic to show even if no live member reports it (repeatable)",
    )  # fmt: skip
    lag.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_watch_option(lag)
    add_cluster_options(lag)

    tail = commands.add_parser(
        "tail", help="show a topic's messages (joins no group, commits nothing)"
    )
    tail.add_argument("--topic", required=True)
    tail.add_argument(
        "--from", dest="start", type=parse_from, default=From("last", 10), metavar="WHERE",
        help="earliest, latest (wait for new messages), an offset, or -N: the last N of each "
        "partition (default -10)",
    )  # fmt: skip
    tail.add_argument("--partition", type=_whole(0), default=None, help="only this partition")
    tail.add_argument(
        "--count", type=_whole(1), default=10, help="show at most this many messages (default 10)"
    )
    for what, default in (("value", "str"), ("key", "str")):
        tail.add_argument(
            "--deserializer" if what == "value" else "--key-deserializer",
            choices=DESERIALIZERS, default=default,
            help=f"how to show the {what} (default {default}); bytes that do not decode are "
            "shown escaped",
        )  # fmt: skip
    add_cluster_options(tail)


# --- lag ------------------------------------------------------------------------------------


def _cell(value: int | str | None) -> str:
    return "-" if value is None else str(value)


def _lag_rows(partitions: Iterable[admin.PartitionView]) -> list[dict[str, Any]]:
    return [
        {
            "topic": p.topic,
            "partition": p.partition,
            "holder": p.holder,
            "position": p.position,
            "committed": p.committed,
            "high": p.high,
            "lag": p.lag,
        }
        for p in partitions
    ]


def _lag_frame(args: argparse.Namespace) -> _render.Renderable:
    settings = cluster_settings(args, args.group)
    view = admin.GroupView.load(settings, args.group)
    partitions = list(view.partitions)
    extra = sorted(set(args.topic) - {p.topic for p in partitions})
    if extra:  # topics no live member reports: Kafka's offsets alone, nobody holds them
        offsets = admin.partition_offsets(
            settings.bootstrap_servers, args.group, extra, kafka=settings.admin_config()
        )
        partitions += [
            admin.PartitionView(tp.topic, tp.partition, None, committed, high)
            for tp, (_, high, committed) in sorted(offsets.items())
        ]
    rows = _lag_rows(partitions)
    total = sum(row["lag"] or 0 for row in rows)
    held = {row["holder"] for row in rows if row["holder"] is not None}
    if args.json:
        return json.dumps({"group": args.group, "partitions": rows, "total_lag": total}, indent=2)
    summary = (
        f"group {args.group}: {len(rows)} partition(s), "
        f"{sum(row['holder'] is not None for row in rows)} held by {len(held)} member(s), "
        f"total lag {total}"
    )
    cells = [
        [row["topic"], str(row["partition"]), row["holder"] or "(nobody)",
         *(_cell(row[name]) for name in ("position", "committed", "high", "lag"))]
        for row in rows
    ]  # fmt: skip
    cells.append(["TOTAL", "", f"{len(held)} member(s)", "", "", "", str(total)])
    header = ["TOPIC", "PARTITION", "HOLDER", "POSITION", "COMMITTED", "HIGH", "LAG"]
    return _render.stack(summary, "", _render.table(header, cells, right_from=3))


def _lag(args: argparse.Namespace) -> int:
    if args.watch is not None:
        _render.watch(lambda: _lag_frame(args), args.watch)
    _render.show(_lag_frame(args))
    return _render.EXIT_OK


# --- tail -----------------------------------------------------------------------------------


def _escaped(raw: bytes) -> str:
    # Python's bytes literal without b'': printable ASCII as is, everything else \xNN or \n.
    return repr(raw)[2:-1]


def decode(raw: bytes | None, deserializer: str) -> tuple[str, bool]:
    """How ``tail`` shows ``raw``, and whether it decoded (if not, its bytes are escaped).

    The JSON decoding is the command's own; the library's deserializers can take its place.
    """
    if raw is None:
        return _NULL, True
    if deserializer == "bytes":
        return _escaped(raw), True
    try:
        if deserializer == "json":
            parsed = json.loads(raw)
            return _render.visible(
                json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
            ), True
        return _render.visible(raw.decode("utf-8")), True
    except (ValueError, RecursionError):  # not JSON or text; or nested deeper than json goes
        return _escaped(raw), False


def _stamp(message: _kafka.Message) -> str:
    _, stamp_ms = message.timestamp()
    if stamp_ms is None or stamp_ms < 0:
        return "-"
    moment = datetime.fromtimestamp(stamp_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp_ms % 1000:03d}Z"


def share(available: Mapping[TopicPartition, int], count: int) -> dict[TopicPartition, int]:
    """How many of ``count`` messages to take from each partition: as even as they allow."""
    taken = dict.fromkeys(available, 0)
    left = count
    open_ = sorted(tp for tp, size in available.items() if size > 0)
    while left and open_:
        each = max(left // len(open_), 1)
        for tp in list(open_):
            add = min(each, available[tp] - taken[tp], left)
            taken[tp] += add
            left -= add
            if taken[tp] == available[tp]:
                open_.remove(tp)
            if not left:
                break
    return taken


def _ranges(
    bounds: Mapping[TopicPartition, tuple[int, int]], start: From, count: int
) -> dict[TopicPartition, tuple[int, int]]:
    """The [first, end) to read of each partition for ``start``, ``count`` messages in all."""
    spans = {}
    for tp, (low, high) in bounds.items():
        if start.kind == "earliest":
            spans[tp] = (low, high)
        elif start.kind == "offset":
            spans[tp] = (min(max(start.number, low), high), high)
        else:  # last N
            spans[tp] = (max(low, high - start.number), high)
    takes = share({tp: end - first for tp, (first, end) in spans.items()}, count)
    newest = start.kind == "last"
    return {
        tp: (end - takes[tp], end) if newest else (first, first + takes[tp])
        for tp, (first, end) in spans.items()
        if takes[tp]
    }


class _Shown:
    """Turns messages into table cells and counts what did not decode."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._value_as: str = args.deserializer
        self._key_as: str = args.key_deserializer
        self.undecoded = 0

    def cells(self, message: _kafka.Message) -> list[str]:
        key, key_ok = decode(message.key(), self._key_as)
        value, value_ok = decode(message.value(), self._value_as)
        self.undecoded += (not key_ok) + (not value_ok)
        return [str(message.partition()), str(message.offset()), _stamp(message), key, value]

    def report(self) -> None:
        if self.undecoded:
            _render.say(
                f"{self.undecoded} key(s) or value(s) did not decode as asked: shown as escaped "
                "bytes"
            )


_TAIL_HEADER: Final = ["PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE"]


def _bounds(args: argparse.Namespace) -> tuple[dict[TopicPartition, tuple[int, int]], Any]:
    settings = cluster_settings(args, _CLI_GROUP)
    offsets = admin.partition_offsets(
        settings.bootstrap_servers, _CLI_GROUP, [args.topic], kafka=settings.admin_config()
    )
    bounds = {tp: (low, high) for tp, (low, high, _) in offsets.items()}
    if args.partition is not None:
        wanted = TopicPartition(args.topic, args.partition)
        if wanted not in bounds:
            raise ConfigError(
                f"--partition {args.partition} is not allowed; topic {args.topic!r} has "
                f"partitions 0 to {len(bounds) - 1}"
            )
        bounds = {wanted: bounds[wanted]}
    # Its own group id: committed offsets are never read or written with it.
    config = {**settings.consumer_config(), "group.id": f"{_CLI_GROUP}-tail-{uuid.uuid4().hex}"}
    return bounds, config


def _tail(args: argparse.Namespace) -> int:
    bounds, config = _bounds(args)
    shown = _Shown(args)
    try:
        if args.start.kind == "latest":
            starts = {tp: high for tp, (_, high) in bounds.items()}
            for number, message in enumerate(_kafka.follow(config, starts), start=1):
                _render.out("  ".join(shown.cells(message)))
                if number == args.count:
                    break
            return _render.EXIT_OK
        spans = _ranges(bounds, args.start, args.count)
        read: list[_kafka.Message] = []
        batches = _kafka.read_ranges(
            config, spans, batch_max_messages=args.count, idle_timeout_s=_READ_IDLE_S,
            on_data_loss=lambda _lost: None,  # deleted since the watermarks: what is left
        )  # fmt: skip
        for batch in batches:
            read += batch
        read.sort(key=lambda message: (message.partition(), message.offset()))
        _render.show(_render.table(_TAIL_HEADER, map(shown.cells, read)))
        if not read:
            _render.say(f"no message in {args.topic} from {_where(args.start)}")
        return _render.EXIT_OK
    finally:
        shown.report()


def _where(start: From) -> str:
    return {"offset": f"offset {start.number}", "last": f"the last {start.number}"}.get(
        start.kind, start.kind
    )


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"lag": _lag, "tail": _tail}
