"""A TCP relay between a client and a real PostgreSQL that cuts the connection at a chosen
client message: the network failing while a COMMIT is in flight, made without touching the
server (which every other test shares).

The relay reads the client's side of the wire protocol message by message (the startup
packet, then typed messages: ``Q`` a simple query, ``P``/``B``/``E``/``S`` the extended
one). Armed with :meth:`CutLink.cut_at`, the first message that matches ends that
connection, in one of the two ways a real network fails a commit:

* ``deliver=True``: the message reaches the server, then both sides are cut. The server
  commits (it reads the message before the hang-up) and its answer goes nowhere;
* ``deliver=False``: what came before the message reaches the server, the message does not;
  the server sees the hang-up inside the transaction and rolls it back.

The client hears neither outcome, only the connection closing: that is what it must not
report as a refusal. psycopg sends a COMMIT as a simple query (``Q COMMIT``: the block of
``conn.transaction()`` and a unit's ``COMMIT`` alike, until the cursor prepares it after
five runs on one connection); a single autocommitted statement commits at its ``Sync``.
Clients must connect with ``sslmode=disable`` (an encrypted stream cannot be read).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable

from support.relay import Relay

#: (message type, body) -> whether the cut falls here
Match = Callable[[bytes, bytes], bool]

_NEGOTIATIONS = (80877103, 80877104)  # SSLRequest, GSSENCRequest: a startup packet follows


def commit(kind: bytes, body: bytes) -> bool:
    """A simple-query COMMIT: how psycopg ends a transaction."""
    return kind == b"Q" and body.lstrip().upper().startswith(b"COMMIT")


def sync(kind: bytes, body: bytes) -> bool:
    """The Sync that ends an extended query: where an autocommitted statement commits."""
    return kind == b"S"


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.cut = threading.Event()


class CutLink(Relay):
    """``with CutLink(host, port) as link:``; connect to ``link.port``; ``link.cut_at(match,
    deliver=...)`` arms one cut; ``link.cuts`` counts the cuts made."""

    def __init__(self, host: str, port: int) -> None:
        self.cuts = 0
        self._armed: tuple[Match, bool] | None = None
        self._lock = threading.Lock()
        super().__init__(host, port, "cut-link")

    def cut_at(self, match: Match, *, deliver: bool) -> None:
        """Cut the connection that next sends a message ``match`` accepts (once)."""
        with self._lock:
            self._armed = (match, deliver)

    def _take(self, kind: bytes, body: bytes) -> bool | None:
        """The armed cut's ``deliver`` when this message triggers it (disarming it)."""
        with self._lock:
            if self._armed is None or not self._armed[0](kind, body):
                return None
            deliver = self._armed[1]
            self._armed = None
            self.cuts += 1
            return deliver

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        pair = _Pair(client, server)
        threading.Thread(target=self._from_client, args=(pair,), daemon=True,
                         name="cut-link-client").start()
        threading.Thread(target=self._from_server, args=(pair,), daemon=True,
                         name="cut-link-server").start()

    def _from_client(self, pair: _Pair) -> None:
        buffer, startup = b"", True
        with contextlib.suppress(OSError):
            while not pair.cut.is_set():
                data = pair.client.recv(65536)
                if not data:
                    break
                buffer += data
                out = b""
                while True:
                    if startup:  # an untyped packet: length, then a code
                        if len(buffer) < 8:
                            break
                        size = struct.unpack("!I", buffer[:4])[0]
                        if len(buffer) < size:
                            break
                        code = struct.unpack("!I", buffer[4:8])[0]
                        out, buffer = out + buffer[:size], buffer[size:]
                        startup = code in _NEGOTIATIONS
                        continue
                    if len(buffer) < 5:
                        break
                    size = 1 + struct.unpack("!I", buffer[1:5])[0]
                    if len(buffer) < size:
                        break
                    message, buffer = buffer[:size], buffer[size:]
                    deliver = self._take(message[:1], message[5:])
                    if deliver is None:
                        out += message
                        continue
                    self._cut(pair, out + message if deliver else out)
                    return
                if out:
                    pair.server.sendall(out)
        with contextlib.suppress(OSError):
            pair.server.shutdown(socket.SHUT_WR)

    def _cut(self, pair: _Pair, last: bytes) -> None:
        """The client hears the connection close, and never the server's answer to ``last``
        (sent only after the client's side is gone); the server reads ``last``, then EOF."""
        pair.cut.set()
        with contextlib.suppress(OSError):
            pair.client.shutdown(socket.SHUT_RDWR)
        pair.client.close()
        with contextlib.suppress(OSError):
            if last:
                pair.server.sendall(last)
            pair.server.shutdown(socket.SHUT_WR)

    def _from_server(self, pair: _Pair) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = pair.server.recv(65536)
                if not data:
                    break
                if not pair.cut.is_set():
                    pair.client.sendall(data)
        with contextlib.suppress(OSError):
            pair.client.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            pair.server.close()


__all__ = ["CutLink", "Match", "commit", "sync"]
