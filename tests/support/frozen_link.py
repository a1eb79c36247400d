"""A TCP relay between the app and a real server that can be frozen: the network of a
server that stopped answering (SIGSTOP, a frozen VM, a path that drops every packet), made
without stopping the shared server every test uses.

While frozen, the relay still accepts connections and reads what either side sends, as a
stopped server's kernel does, but passes nothing on, in either direction; thawed, it
passes on what it held. Everything it relays is the real server's own bytes."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

from support.services import LOCALHOST


class FrozenLink:
    """``with FrozenLink(host, port) as link:`` then connect to ``link.port``;
    ``link.freeze()`` / ``link.thaw()``."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.flowing = threading.Event()
        self.flowing.set()
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server((LOCALHOST, 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True, name="frozen-link").start()

    def freeze(self) -> None:
        self.flowing.clear()

    def thaw(self) -> None:
        self.flowing.set()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True,
                                 name="frozen-link-pump").start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = source.recv(65536)
                self.flowing.wait()  # frozen: held here, as a stopped server holds it
                if not data or self._closing.is_set():
                    break
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closing.set()
        self.flowing.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> FrozenLink:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["FrozenLink"]
