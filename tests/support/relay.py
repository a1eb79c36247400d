"""A TCP relay on loopback in front of a real server: the listener, the accept loop that
dials the server for each client, and the closing, which the test relays share
(:mod:`support.frozen_link`, :mod:`support.cut_link`). A subclass says what flows between
the two sockets of a connection (:meth:`Relay._relay`)."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

from support.services import LOCALHOST


class Relay:
    """Listens on ``self.port``; each client connected there gets its own connection to
    ``(host, port)``, handed to :meth:`_relay` with the client's."""

    def __init__(self, host: str, port: int, name: str) -> None:
        self.upstream = (host, port)
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server((LOCALHOST, 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True, name=name).start()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        raise NotImplementedError

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
            self._relay(client, server)

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["Relay"]
