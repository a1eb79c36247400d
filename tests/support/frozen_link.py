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

from support.relay import Relay


class FrozenLink(Relay):
    """``with FrozenLink(host, port) as link:`` then connect to ``link.port``;
    ``link.freeze()`` / ``link.thaw()``."""

    def __init__(self, host: str, port: int) -> None:
        self.flowing = threading.Event()
        self.flowing.set()
        super().__init__(host, port, "frozen-link")

    def freeze(self) -> None:
        self.flowing.clear()

    def thaw(self) -> None:
        self.flowing.set()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
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
        super().close()


__all__ = ["FrozenLink"]
