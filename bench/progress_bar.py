"""The long benchmarks' progress bar: rich, on stderr, and only when stderr is a terminal.

stdout carries the JSON lines (often into ``tee``), so the bar never writes there; and with
stderr in a file or a pipe there is no bar at all, so logs hold nothing but what they held.
Every JSON line goes out through :func:`emit`, which takes the bar off the screen for the
moment the line is written: a bar drawn over a line of the same terminal would garble it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["advance", "emit", "progress", "say"]

_active: list[tuple[Progress, TaskID, str]] = []
"""The bars shown now (the innermost last), their task and description."""


@contextmanager
def progress(description: str, total: int) -> Iterator[None]:
    """A bar of ``total`` steps for the block (none when stderr is not a terminal)."""
    console = Console(file=sys.stderr)
    if not console.is_terminal:
        yield
        return
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console, transient=True,
        redirect_stdout=False, redirect_stderr=False,
    )  # fmt: skip
    with bar:
        _active.append((bar, bar.add_task(description, total=total), description))
        try:
            yield
        finally:
            _active.pop()


def advance(step: str = "") -> None:
    """One step done; ``step`` (what was just done) is shown beside the bar."""
    if _active:
        bar, task, description = _active[-1]
        bar.update(task, advance=1, description=f"{description} {step}".rstrip())


def emit(line: str) -> None:
    """Print a JSON line to stdout (flushed), the bar off the screen while it is written."""
    _print(line, sys.stdout)


def say(message: str) -> None:
    """Print a message to stderr, the bar off the screen while it is written."""
    _print(message, sys.stderr)


def _print(text: str, stream: TextIO) -> None:
    if not _active:
        print(text, file=stream, flush=True)
        return
    bar = _active[-1][0]
    bar.stop()
    print(text, file=stream, flush=True)
    bar.start()
