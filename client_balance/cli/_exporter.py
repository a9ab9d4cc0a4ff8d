"""``client-balance exporter``: a group's lag over HTTP for Prometheus, until interrupted.

Each scrape reads the group's status view and committed offsets, as ``client-balance status``
does (``_metrics._group``). Nothing joins the group, so one exporter serves a group of any size.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable

from client_balance._metrics._group import GroupLagCollector
from client_balance._metrics._http import serve
from client_balance.cli import _render
from client_balance.cli._groups import add_cluster_options, cluster_settings, given
from client_balance.errors import ConfigError

__all__ = ["COMMANDS", "add_parsers", "serve_group"]

_DEFAULT_HOST = "127.0.0.1"
_MAX_PORT = 65_535


def _port(text: str) -> int:
    """--port: 0 (a free port, printed) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= _MAX_PORT:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; use a port number from 1 to {_MAX_PORT} (0 picks a free one)"
        )
    return port


def _timeout(text: str) -> float:
    """--timeout-s: a number of seconds > 0 (and at most 300, librdkafka's limit)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 300:  # noqa: PLR2004 - librdkafka's longest request timeout
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; use seconds > 0, at most 300")
    return seconds


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``exporter`` to the ``client-balance`` parser."""
    exporter = commands.add_parser(
        "exporter", help="serve a group's lag for Prometheus over HTTP (until Ctrl-C)"
    )
    exporter.add_argument("--group", type=given, required=True)
    exporter.add_argument("--port", type=_port, required=True, help="port (0: a free one)")
    exporter.add_argument(
        "--host", default=_DEFAULT_HOST, help=f"address to listen on (default {_DEFAULT_HOST})"
    )
    exporter.add_argument(
        "--timeout-s", type=_timeout, default=10.0, help="bound on one scrape's reads (s)"
    )
    add_cluster_options(exporter)


def serve_group(args: argparse.Namespace, stop: threading.Event) -> int:
    """Serve ``args.group``'s lag until ``stop`` is set."""
    from prometheus_client import CollectorRegistry  # noqa: PLC0415 - the optional extra

    settings = cluster_settings(args, args.group)
    registry = CollectorRegistry()
    registry.register(GroupLagCollector(settings, args.group, args.timeout_s))
    endpoint = serve(registry, args.host, args.port)
    try:
        _render.say(
            f"serving the lag of group {args.group} at "
            f"http://{_url_host(endpoint.host)}:{endpoint.port}/metrics (Ctrl-C stops)"
        )
        stop.wait()
    finally:
        endpoint.close()
    return _render.EXIT_OK


def _exporter(args: argparse.Namespace) -> int:
    try:
        import prometheus_client  # noqa: F401, PLC0415 - checks the optional extra is there
    except ImportError:
        raise ConfigError(
            "the exporter needs prometheus_client: pip install 'client-balance[metrics]'"
        ) from None
    return serve_group(args, threading.Event())  # until Ctrl-C: main() returns 0 then


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"exporter": _exporter}


def _url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets (``http://[::1]:9100``)."""
    return f"[{host}]" if ":" in host else host
