"""Who the client really is behind a reverse proxy: ``PUBSCHED_TRUSTED_PROXIES``.

Behind nginx or Caddy every request comes from the proxy's address, so the login throttle
(keyed by the client address) would count every visitor as one: a stranger's three wrong
guesses would lock the operator out. The proxy says who it is serving in
``X-Forwarded-For`` (and ``X-Forwarded-Proto`` for the scheme) but anyone can send those
headers, so they are believed only from a peer listed in ``PUBSCHED_TRUSTED_PROXIES``
(addresses or networks, comma-separated; none by default: the headers are then ignored).

The client is the rightmost address of ``X-Forwarded-For`` that is not itself a trusted
proxy: each proxy appends the peer it saw, so what lies left of that was written by the
client and proves nothing. :class:`ForwardedClient` puts it in ``scope["client"]`` (and the
scheme in ``scope["scheme"]``) before anything else reads the request, so the throttle, the
logs and uvicorn's access line all see the real client. Pure: no ASGI but the middleware.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from ..verdicts import BadInput

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_proxies(raw: str) -> tuple[Network, ...]:
    """``PUBSCHED_TRUSTED_PROXIES`` as networks (a bare address is a network of one)."""
    networks = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise BadInput(f"PUBSCHED_TRUSTED_PROXIES: {item!r} is not an address or a "
                           "network (write e.g. 127.0.0.1, ::1 or 10.0.0.0/8)") from None
    return tuple(networks)


def _trusted(address: str, proxies: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def real_client(peer: str, forwarded_for: str | None,
                proxies: tuple[Network, ...]) -> str:
    """The client address to believe for a request from ``peer`` carrying
    ``X-Forwarded-For: forwarded_for`` (see the module docstring)."""
    if not forwarded_for or not _trusted(peer, proxies):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer  # every hop is a proxy of ours: the first one


class ForwardedClient:
    """The real client and scheme into the scope, from a trusted proxy's headers only."""

    def __init__(self, app: ASGIApp, proxies: tuple[Network, ...] = ()) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.proxies and scope.get("client"):
            peer, port = scope["client"]
            if _trusted(peer, self.proxies):
                headers = {k.lower(): v.decode("latin-1") for k, v in scope["headers"]}
                client = real_client(peer, headers.get(b"x-forwarded-for"), self.proxies)
                proto = headers.get(b"x-forwarded-proto", "").split(",")[0].strip().lower()
                scope["client"] = (client, port if client == peer else 0)
                if proto in ("http", "https"):
                    scope["scheme"] = proto if scope["type"] == "http" else \
                        {"http": "ws", "https": "wss"}[proto]
        await self.app(scope, receive, send)
