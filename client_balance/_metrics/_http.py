"""An HTTP endpoint serving one prometheus_client registry (``/metrics``, any path)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from client_balance.errors import ConfigError

__all__ = ["Endpoint", "serve"]


@dataclass
class Endpoint:
    """A running endpoint: where it listens, and how to stop it."""

    host: str
    port: int
    _server: Any
    _thread: threading.Thread

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def serve(registry: CollectorRegistry, host: str, port: int, names: str = "--") -> Endpoint:
    """Serve ``registry`` at ``http://host:port/metrics`` from a daemon thread.

    ``port`` 0 picks a free one (``Endpoint.port``). ``names`` prefixes the option names in a
    refusal: ``"metrics_"`` (settings) or ``"--"`` (the command line).
    """
    try:
        server, thread = start_http_server(port, host, registry)
    except OSError as error:
        raise ConfigError(
            f"cannot serve metrics on {names}host={host} {names}port={port}: {error.strerror}; "
            "choose a free port and an address of this machine"
        ) from None
    return Endpoint(host, int(server.server_address[1]), server, thread)
