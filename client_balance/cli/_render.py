"""What ``client-balance`` shows, and the one place it is drawn: rich, on stdout.

Every table of the command is :func:`table`. Every line the command writes to stdout goes through
:func:`show` or :func:`out`; messages for the user go to stderr through :func:`say`. All of them
escape control characters (:func:`visible`): hosts, ids and versions come from status records
that any client may write, and an ESC among them would drive the operator's terminal. When stdout
is not a terminal (a pipe, a file, a test's capture) the output is plain text: no colour codes,
and no line wrapped, so that it can be grepped, diffed and pasted into documents.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import IO, Any, Final, NoReturn, TypeAlias

import structlog
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.logging import RichHandler
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from client_balance import admin
from client_balance.cli._escape import lines as _lines
from client_balance.cli._escape import visible
from client_balance.errors import ClientBalanceError, ConfigError
from client_balance.keys import TopicPartition
from client_balance.strategies.simulation import (
    MembershipChange,
    MemberSpec,
    Round,
    SimulationPlan,
    format_partition,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "MOVED_MARK",
    "Renderable",
    "describe_change",
    "group_view",
    "log_handler",
    "out",
    "say",
    "show",
    "simulation_comparison",
    "simulation_rounds",
    "stack",
    "table",
    "visible",
    "watch",
]

Renderable: TypeAlias = RenderableType
"""What :func:`show` prints: a ``str``, a :func:`table`, or a view built here."""

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
"""A one-shot command stopped by Ctrl-C: 128 + SIGINT, as a shell reports it."""

MOVED_MARK: Final = "*"
"""Suffix of a partition whose owner changed since the previous round."""

# Output to a pipe or a file is for tools and documents, where a wrapped table row is a broken
# one: this is wider than any row in practice (2 members x 100,000 partitions: 0.8 MB a row),
# and rich pads nothing out to it, so it costs nothing.
_PIPE_WIDTH: Final = 10_000_000


def _is_terminal(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream is no terminal
        return False


def _console(stream: IO[str]) -> Console:
    # Decided here rather than by rich's environment guesses (FORCE_COLOR, Jupyter): colour and
    # terminal width only where a terminal reads the output, plain unwrapped text elsewhere.
    terminal = _is_terminal(stream)
    return Console(
        file=stream,
        force_terminal=terminal,
        force_jupyter=False,
        color_system="auto" if terminal else None,
        width=None if terminal else _PIPE_WIDTH,
        markup=False,
        emoji=False,
        highlight=False,
    )


def _plain(renderable: Renderable) -> RenderableType:
    # A str is shown as written: rich would read "[red]" in a member id as markup.
    return Text(_lines(renderable)) if isinstance(renderable, str) else renderable


def show(*renderables: Renderable) -> None:
    """Print tables and views to stdout; a ``str`` goes out as :func:`out` prints it."""
    # sys.stdout is looked up at each call: tests and callers may have replaced it since import.
    console = _console(sys.stdout)
    for renderable in renderables:
        if isinstance(renderable, str):
            console.out(_lines(renderable), highlight=False)
        else:
            console.print(renderable)


def out(text: str) -> None:
    """Print ``text`` to stdout as it is (JSON, an address), never wrapped or cropped."""
    show(text)


def say(message: str) -> None:
    """Tell the user something on stderr, apart from the command's output."""
    print(_lines(message), file=sys.stderr)


def watch(frame: Callable[[], Renderable], every_s: float) -> NoReturn:
    """Show ``frame()`` every ``every_s`` seconds, under the time it was taken, until Ctrl-C.

    On a terminal the view is redrawn in place; a pipe or a file gets each view after the last.
    A refresh that fails shows its error in place of the view, and the next one tries again: a
    leader election or a broker restart must not end the watch. A :class:`ConfigError` (a bad
    argument or setting, which no refresh mends) ends it.
    """
    console = _console(sys.stdout)

    def stamped() -> Group:
        try:
            shown = frame()
        except ConfigError:
            raise
        except ClientBalanceError as error:
            shown = f"error: {error}"
        return Group(Text(time.strftime("%H:%M:%S")), _plain(shown))

    if not console.is_terminal:
        while True:
            console.print(stamped())
            console.print()
            time.sleep(every_s)
    with Live(console=console, auto_refresh=False) as live:
        while True:
            live.update(stamped(), refresh=True)
            time.sleep(every_s)


class _Trimmed:
    """A table without the blanks rich pads its last column with, so plain text stays clean."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.table, options, pad=False):
            while line and not line[-1].control and not line[-1].text.strip():
                line.pop()
            if line:
                text, style, control = line[-1]
                line[-1] = Segment(text.rstrip(), style, control)
            yield from line
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table)


def table(
    header: Sequence[str], rows: Iterable[Sequence[str]], *, right_from: int | None = None
) -> RenderableType:
    """THE table of the command: a header and rows of text, columns two spaces apart.

    Columns from index ``right_from`` on are right-aligned (numbers); the others left-aligned.
    Every cell is :func:`visible`: its text may come from any client's status record.
    """
    drawn = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
    for index, title in enumerate(header):
        numeric = right_from is not None and index >= right_from
        drawn.add_column(visible(title), justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        drawn.add_row(*map(visible, row))
    return _Trimmed(drawn)


def stack(*parts: Renderable) -> RenderableType:
    """``parts`` one under the other, as one view (for :func:`watch`); a ``str`` is a line."""
    return Group(*map(_plain, parts))


def _text(*lines: str) -> list[RenderableType]:
    # Text, not str: a member id or a topic like "[red]" must show as written, never as markup.
    return [Text(visible(line)) for line in lines]


# --- status ----------------------------------------------------------------------------------


def group_view(view: admin.GroupView) -> RenderableType:
    """The group view: a summary line, the members, the partitions and any conflicts."""
    summary = (
        f"group {view.group}: {len(view.live_members)} live member(s), "
        f"{len(view.partitions)} partition(s), {len(view.orphaned)} orphaned, "
        f"total lag {view.total_lag}"
    )
    member_rows = [
        [
            m.mode,
            str(m.node_id) if m.mode == "node" else "-",
            f"{m.host}:{m.pid}",
            "live" if m.live else "dead" if not m.fenced else "fenced",
            f"{m.last_seen_s:g}s",
            str(len(m.holds)),
            "-" if m.lag is None else str(m.lag),
            m.consumer_id,
        ]
        for m in view.members
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
    parts = [
        *_text(summary, ""),
        table(["MODE", "NODE", "HOST:PID", "STATE", "SEEN", "HOLDS", "LAG", "MEMBER"], member_rows),
        *_text(""),
        table(["PARTITION", "HOLDER", "COMMITTED", "HIGH", "LAG"], partition_rows),
    ]
    if view.conflicts:
        parts += _text("", "CONFLICTS:", *(f"  {conflict}" for conflict in view.conflicts))
    return Group(*parts)


# --- simulate --------------------------------------------------------------------------------


def describe_change(change: MembershipChange) -> str:
    """``"C3 leaves"``, ``"C4, C5 join"``, or both joined by ``"; "``."""
    parts = []
    if change.leaving:
        verb = "leaves" if len(change.leaving) == 1 else "leave"
        parts.append(f"{', '.join(change.leaving)} {verb}")
    if change.joining:
        verb = "joins" if len(change.joining) == 1 else "join"
        parts.append(f"{', '.join(member.id for member in change.joining)} {verb}")
    return "; ".join(parts)


def _topics_line(topics: Mapping[str, int]) -> str:
    return " ".join(f"{topic}:{count}" for topic, count in topics.items())


def _assignment_table(
    topics: Mapping[str, int],
    members: Sequence[MemberSpec],
    assignment: Mapping[str, Sequence[TopicPartition]],
    moved: frozenset[TopicPartition],
) -> RenderableType:
    unequal = any(member.topics != frozenset(topics) for member in members)
    header = ["member", *(["subscribes"] if unequal else []), "partitions", "count"]
    rows = []
    for member in members:
        parts = assignment[member.id]
        cells = [
            format_partition(partition) + (MOVED_MARK if partition in moved else "")
            for partition in parts
        ]
        subscribes = ["+".join(sorted(member.topics))] if unequal else []
        rows.append([member.id, *subscribes, " ".join(cells) or "-", str(len(parts))])
    return table(header, rows, right_from=len(header) - 1)


def _round_change(round_: Round) -> str:
    if round_.change is None:
        return "members " + ", ".join(member.id for member in round_.members)
    return describe_change(round_.change)


def _round_title(round_: Round) -> str:
    what = _round_change(round_)
    generations = [rebalance.generation for rebalance in round_.rebalances]
    if len(generations) == 1:
        return f"round {round_.number} (generation {generations[0]}): {what}"
    return (
        f"round {round_.number} (generations {generations[0]}-{generations[-1]}, "
        f"{len(generations)} rebalances): {what}"
    )


def _moves_line(round_: Round) -> str:
    taken = len(round_.taken_from_survivors)
    freed = len(round_.moved) - taken
    return (
        f"moves {len(round_.moved)}: {taken} taken from members that stayed, "
        f"{freed} freed by members that left"
    )


def simulation_rounds(
    plan: SimulationPlan, strategy_name: str, rounds: Sequence[Round]
) -> RenderableType:
    """The assignment table of every round, moved partitions marked, for one strategy."""
    parts = _text(f"strategy {strategy_name}; topics {_topics_line(plan.topics)}")
    if len(rounds) > 1:
        parts += _text(f"{MOVED_MARK} = moved: the owner changed since the previous round")
    for round_ in rounds:
        moved = frozenset(round_.moved)
        parts += _text("", _round_title(round_))
        for index, rebalance in enumerate(round_.rebalances, start=1):
            if len(round_.rebalances) > 1:
                parts += _text(f"rebalance {index} (generation {rebalance.generation})")
            parts.append(
                _assignment_table(plan.topics, round_.members, rebalance.assignment, moved)
            )
            if rebalance.withheld:
                withheld = " ".join(map(format_partition, rebalance.withheld))
                parts += _text(f"withheld until the next rebalance: {withheld}")
        counts = round_.counts.values()
        parts += _text(f"balance {round_.balance} (counts {min(counts)} to {max(counts)})")
        if round_.number > 1:
            parts += _text(_moves_line(round_))
    return Group(*parts)


def simulation_comparison(
    plan: SimulationPlan, results: Mapping[str, Sequence[Round]]
) -> RenderableType:
    """Per round, one row per strategy: member counts, balance, moves, taken, rebalances."""
    names = sorted(results)
    parts = _text(
        f"topics {_topics_line(plan.topics)}; strategies {', '.join(names)}",
        "counts per member; balance = max - min; moves = partitions whose owner changed; "
        "taken = moves from members that stayed",
    )
    for index, round_ in enumerate(results[names[0]] if names else ()):
        parts += _text("", f"round {round_.number}: {_round_change(round_)}")
        member_ids = [member.id for member in round_.members]
        header = ["strategy", *member_ids, "balance", "moves", "taken", "rebalances"]
        rows = []
        for name in names:
            this = results[name][index]
            first = this.number == 1
            rows.append(
                [
                    name,
                    *(str(this.counts[member_id]) for member_id in member_ids),
                    str(this.balance),
                    "-" if first else str(len(this.moved)),
                    "-" if first else str(len(this.taken_from_survivors)),
                    str(len(this.rebalances)),
                ]
            )
        parts.append(table(header, rows, right_from=1))
    return Group(*parts)


# --- logging ---------------------------------------------------------------------------------


def _event_line(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> str:
    fields = " ".join(
        f"{key}={value}" for key, value in event.items() if key != "event" and key[0] != "_"
    )
    # A field may quote a status record anyone who can write the topic forged (an ESC in it).
    return visible(f"{event['event']} {fields}".rstrip())


def log_handler() -> logging.Handler:
    """A stderr handler for the library's log records: rich on a terminal, plain lines if not."""
    handler: logging.Handler
    line = "%(message)s"
    if _is_terminal(sys.stderr):
        handler = RichHandler(console=_console(sys.stderr), show_path=False)
    else:
        handler = logging.StreamHandler(sys.stderr)
        line = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    # The library's events carry their fields as record attributes; show them after the event.
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.ExtraAdder()], processors=[_event_line], fmt=line
        )
    )
    return handler
