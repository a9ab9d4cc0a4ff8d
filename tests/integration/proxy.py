"""A TCP proxy on 127.0.0.1 that a test can cut: every connection through it, and new ones.

Used with ``LocalKafka(proxied=True)``: a member bootstrapped at the proxy's port is told that
port for every broker, so all of its traffic goes through the proxy, and ``cut()`` isolates
that member alone while the others keep their direct connections.
"""

from __future__ import annotations

import contextlib
import socket
import threading

_CHUNK = 65536


class TcpProxy:
    """Forwards ``127.0.0.1:listen_port`` to ``127.0.0.1:target_port`` until cut."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self._target_port = target_port
        self._server = socket.create_server(("127.0.0.1", listen_port), reuse_port=False)
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._cut = False
        self._held = False
        self._closed = False
        threading.Thread(target=self._accept, name="test-proxy", daemon=True).start()

    def cut(self) -> None:
        """Drop every connection, and every new one until :meth:`restore`."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def hold(self) -> None:
        """Keep every connection open and forward nothing: requests go out, no answer comes.

        A link that drops packets: the client waits out its own timeouts, as a cut (which
        closes the connections) does not make it.
        """
        with self._lock:
            self._held = True

    def restore(self) -> None:
        """Forward again; connections that lost data while held are dropped first."""
        with self._lock:
            held, self._held, self._cut = self._held, False, False
            sockets = set(self._sockets) if held else set()
            self._sockets -= sockets
        for sock in sockets:
            _close(sock)

    def close(self) -> None:
        """Stop listening and drop everything."""
        self._closed = True
        self.cut()
        _close(self._server)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                cut = self._cut
            if cut:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target_port), timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(_CHUNK):
                if not self._held:  # held: what comes is dropped, and the link stays up
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
