"""The ``client-balance`` command.

``main(argv) -> int`` runs a command line and returns the exit code (0 success, 1 failure, 2
usage), so tests call it directly; ``run()`` is the console-script entry point. The commands
themselves are in ``_main``.

The command draws with rich, which is the ``cli`` extra (``pip install 'client-balance[cli]'``)
rather than a dependency of the library: structlog imports rich whenever it is installed, and
that took 37-45 ms of the first start of every process that logs the SDK's events
(docs/design-decisions.md). Without rich, ``main`` says what to install and returns 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main", "run"]

_NEEDS_RICH = (
    "error: the client-balance command needs rich, its one extra dependency; "
    "install it with: pip install 'client-balance[cli]'\n"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    try:
        from client_balance.cli._main import main as run_command  # noqa: PLC0415 - rich, above
    except ModuleNotFoundError as missing:
        if missing.name is None or missing.name.partition(".")[0] != "rich":
            raise
        sys.stderr.write(_NEEDS_RICH)
        return 1
    return run_command(argv)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
