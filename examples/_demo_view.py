"""The demo's screen: a live group view while it acts on the group, plain lines in a log.

On a terminal, :class:`GroupWatch` redraws ``client-balance status``'s view (the admin
``GroupView`` drawn by the CLI's ``group_view``) every second under a bar of what the group has
consumed, and the demo's notes scroll above it. When stdout is not a terminal (CI logs) it
prints the notes and one summary line every few seconds instead: no escape codes, no redraws.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from client_balance import ClientBalanceError, ClientBalanceSettings
from client_balance.admin import GroupView
from client_balance.cli._render import group_view

Ranges = dict[str, tuple[int, int]]
"""``topic:partition`` -> ``[first, end)`` offsets."""


def relabel(view: GroupView, labels: Mapping[int, str]) -> GroupView:
    """The view with each member named by ``labels`` (by pid); members of other runs left out.

    A consumer id is some 55 characters; "node 1" and "node 1 (replacement)" fit a terminal.
    """
    names = {m.consumer_id: labels[m.pid] for m in view.members if m.pid in labels}
    members = tuple(
        sorted(
            (replace(m, consumer_id=names[m.consumer_id]) for m in view.members if m.pid in labels),
            key=lambda m: m.consumer_id,
        )
    )
    partitions = tuple(
        replace(p, holder=names.get(p.holder, p.holder)) if p.holder else p for p in view.partitions
    )
    conflicts = []
    for conflict in view.conflicts:
        named = conflict
        for consumer_id, name in names.items():
            named = named.replace(consumer_id, name)
        conflicts.append(named)
    return replace(view, members=members, partitions=partitions, conflicts=tuple(conflicts))


def holders(view: GroupView) -> dict[str, str | None]:
    """``topic:partition`` -> the member holding it (None: nobody)."""
    return {f"{p.topic}:{p.partition}": p.holder for p in view.partitions}


def consumed_of(view: GroupView, expected: Ranges) -> int:
    """Messages of ``expected`` below the group's committed offsets."""
    done = 0
    for p in view.partitions:
        first, end = expected.get(f"{p.topic}:{p.partition}", (0, 0))
        if p.committed is not None:
            done += max(0, min(p.committed, end) - first)
    return done


@contextmanager
def stderr_into(path: Path) -> Iterator[None]:
    """Send file descriptor 2 to ``path`` for a while.

    librdkafka writes its notices there, past Python; one line on the terminal tears the view.
    """
    saved = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


class GroupWatch:
    """Reload a group's view every ``every_s`` and show it; :meth:`note` tells what happens."""

    def __init__(
        self,
        console: Console,
        settings: ClientBalanceSettings,
        title: str,
        expected: Ranges,
        labels: Mapping[int, str],
        *,
        every_s: float = 1.0,
        plain_every_s: float = 5.0,
    ) -> None:
        self._console = console
        self._settings = settings
        self._title = title
        self._expected = expected
        self._labels = labels  # the demo adds workers as it starts them
        self._every_s = every_s
        self._plain_every_s = plain_every_s
        self._began = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-view", daemon=True)
        self._live: Live | None = None
        self.view: GroupView | None = None
        self.loads = 0
        """Views loaded so far: a waiter compares it to see a view newer than its action."""

    def __enter__(self) -> GroupWatch:
        self._began = time.monotonic()
        if self._console.is_terminal:
            self._live = Live(console=self._console, auto_refresh=False, transient=False)
            self._live.start()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        if self._live is not None:
            self._live.stop()
        elif self.view is not None:
            self._console.print(Text(self._line(self.view)))

    def note(self, message: str) -> None:
        """A line above the view (or in the log) at the seconds since the watch began."""
        stamp = Text(f"{time.monotonic() - self._began:5.1f}s  ", style="cyan")
        self._console.print(stamp + Text(message))

    def wait_for(
        self, condition: Callable[[GroupView], bool], timeout_s: float, what: str
    ) -> GroupView:
        """The first view loaded from now on for which ``condition`` holds.

        TimeoutError if none comes within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        seen = self.loads
        while time.monotonic() < deadline:
            if self.loads > seen and self.view is not None and condition(self.view):
                return self.view
            time.sleep(0.1)
        raise TimeoutError(f"{what}: not within {timeout_s:g} s")

    def _run(self) -> None:
        last_line = 0.0
        while True:
            try:
                loaded = GroupView.load(self._settings, timeout_s=5.0)
            except ClientBalanceError as error:
                self.note(f"(the view could not be read this time: {error})")
            else:
                self.view = relabel(loaded, dict(self._labels))
                self.loads += 1
                if self._live is not None:
                    self._live.update(self._frame(self.view), refresh=True)
                elif time.monotonic() - last_line >= self._plain_every_s:
                    last_line = time.monotonic()
                    self._console.print(Text(self._line(self.view)))
            if self._stop.wait(self._every_s):
                return

    def _frame(self, view: GroupView) -> RenderableType:
        total = sum(end - first for first, end in self._expected.values())
        done = consumed_of(view, self._expected)
        bar = Table.grid(padding=(0, 2))
        bar.add_row(
            ProgressBar(total=max(total, 1), completed=done, width=40),
            Text(f"{done:,} of {total:,} committed, lag {view.total_lag:,}"),
        )
        return Group(Text(""), Text(self._title, style="bold"), bar, group_view(view))

    def _line(self, view: GroupView) -> str:
        members = [
            f"{m.consumer_id}: {len(m.holds)} partitions, lag {m.lag or 0:,}"
            for m in view.members
            if m.live
        ]
        return (
            f"{time.monotonic() - self._began:5.1f}s  group {view.group}: "
            f"{len(view.live_members)} live, {len(view.orphaned)} orphaned, lag "
            f"{view.total_lag:,}" + "".join(f" | {member}" for member in members)
        )


def show_workers(
    console: Console, rows: Sequence[tuple[str, int, dict[str, Any]]], title: str
) -> None:
    """Worker, its pid, the partitions it consumed and how many messages."""
    table = Table(title=title)
    for column in ("worker", "pid", "partitions consumed"):
        table.add_column(column)
    table.add_column("messages", justify="right")
    for name, pid, report in rows:
        keys = [key for key, p in report["partitions"].items() if p["messages"]]
        messages = sum(p["messages"] for p in report["partitions"].values())
        table.add_row(name, str(pid), ", ".join(keys), f"{messages:,}")
    console.print(table)


def verdict(console: Console, problems: Sequence[str], success: str) -> None:
    """The check's result, in green or in red."""
    if problems:
        console.print(Text("FAILED:\n  " + "\n  ".join(problems), style="bold red"))
    else:
        console.print(Text(f"OK: {success}", style="bold green"))
