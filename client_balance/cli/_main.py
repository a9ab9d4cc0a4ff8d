"""The ``client-balance`` command itself, behind ``client_balance.cli`` (which checks for rich).

``main(argv) -> int`` does the work and returns the exit code (0 success, 1 failure, 2 usage,
130 a one-shot command interrupted by Ctrl-C).
One module per command group (``_broker``, ``_simulate``, ``_groups``, ``_data``,
``_exporter``) adds its parsers and handlers; everything they show goes through ``_render``.
Only this package sets up logging output: the library itself never does.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence

from client_balance.cli import _broker, _data, _exporter, _groups, _render, _simulate
from client_balance.errors import ClientBalanceError, ConfigError

__all__ = ["main"]

# The library's loggers are children of this one (client_balance._logging).
_LIBRARY_LOGGER = "client_balance"


@contextlib.contextmanager
def _logging_to_stderr(verbose: bool) -> Iterator[None]:
    # Undone on the way out: main() may run many times in one process (tests, a notebook), and
    # a handler left behind would write to a stream that is gone.
    logger = logging.getLogger(_LIBRARY_LOGGER)
    level, handler = logger.level, _render.log_handler()
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="client-balance",
        description="Client-balanced Kafka consumption: tools for users and operators.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (_broker, _simulate, _groups, _data, _exporter):
        group.add_parsers(commands)
    return parser


def _refuse_double_dash_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Exit 2 on ``--option=--``: argparse (3.11) drops that "--" and gives the option ``[]``.

    Unconverted by the option's type, the ``[]`` would reach a command as if it were a value.
    """
    for arg in argv:
        if arg == "--":  # what follows is positional
            return
        option, equals, value = arg.partition("=")
        if arg.startswith("--") and equals and value == "--":
            parser.error(f"argument {option}: '--' is not a value; give one after {option}=")


def _runs_until_interrupted(args: argparse.Namespace) -> bool:
    """Whether Ctrl-C is how the command is meant to end (then it exits 0)."""
    return (
        args.command == "exporter"
        or getattr(args, "watch", None) is not None
        or (args.command == "tail" and args.start.kind == "latest")
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = _parser()
    try:
        _refuse_double_dash_values(parser, sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help and on usage errors
        return int(exit_.code or 0)
    commands = {
        **_broker.COMMANDS, **_simulate.COMMANDS, **_groups.COMMANDS, **_data.COMMANDS,
        **_exporter.COMMANDS,
    }  # fmt: skip
    try:
        with _logging_to_stderr(args.verbose):
            return commands[args.command](args)
    except ConfigError as error:  # a bad argument or setting: one line, as argparse's are
        _render.say("error: " + " ".join(str(error).splitlines()))
        return _render.EXIT_FAILED
    except ClientBalanceError as error:  # may carry a log's tail: shown as it is
        _render.say(f"error: {error}")
        return _render.EXIT_FAILED
    except KeyboardInterrupt:
        if _runs_until_interrupted(args):
            return _render.EXIT_OK
        # A one-shot command cut short may have done part of its work (some offsets reset, some
        # tombstones written): a script must not read that as success.
        _render.say("interrupted")
        return _render.EXIT_INTERRUPTED
