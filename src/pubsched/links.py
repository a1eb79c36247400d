"""A tender's personal link: a signed token naming the tender, so the form needs no
password (the operator hands the link out: the CLI's ``tender link``, the admin's copy
button). Signed with itsdangerous (HMAC over the tender id and a salt of its own); a
tampered or foreign token is refused. Deactivating a tender ends what their link can do
(the form checks ``active``); ``rotate`` is not needed for a pub's scale."""

from __future__ import annotations

from itsdangerous import BadSignature, URLSafeSerializer

from .app import Config

SALT = "pubsched.tender-link.v1"


def _signer(config: Config) -> URLSafeSerializer:
    return URLSafeSerializer(config.secret, salt=SALT)


def tender_token(config: Config, tender_id: int) -> str:
    return str(_signer(config).dumps({"t": int(tender_id)}))


def tender_url(config: Config, tender_id: int, base_url: str | None = None) -> str:
    base = (base_url or config.base_url).rstrip("/")
    return f"{base}/t/{tender_token(config, tender_id)}"


def verify(config: Config, token: str) -> int | None:
    """The tender id a token names, or None for a bad one."""
    try:
        data = _signer(config).loads(token)
    except BadSignature:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("t"), int):
        return None
    return int(data["t"])
