"""The standalone cluster's helpers (tests/spark/standalone.py), without starting Spark."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.standalone import Daemon, StandaloneCluster


class _HtmlPage(http.server.BaseHTTPRequestHandler):
    """Answers every path with an HTML page, as a master's UI does while it starts."""

    def do_GET(self) -> None:
        """The page."""
        body = b"<!DOCTYPE html><html><body>Spark Master</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def html_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that answers HTML only; its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HtmlPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_master_answering_html_counts_as_not_ready(html_server: str, tmp_path: Path) -> None:
    """An HTML answer to ``/json/`` is a master still starting: no worker yet, no error."""
    master = Daemon("master", None, tmp_path / "master.log")  # type: ignore[arg-type]  # not run
    cluster = StandaloneCluster(tmp_path, "spark://127.0.0.1:1", html_server, master)
    assert cluster.alive_workers() == 0
