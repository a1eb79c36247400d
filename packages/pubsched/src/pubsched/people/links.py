"""A tender's personal links: signed tokens naming the tender (not a week, so a link keeps
working from week to week), so the form and the calendar feed need no password; the
operator hands the link out (the CLI's ``tender link``, the admin's copy button).

Signed with itsdangerous (HMAC), a salt per purpose (the form, the calendar feed, a cover
request's offer), over the tender id and the tender's link version
(``pub_tenders.link_version``): revoking a tender's links bumps the version, so every
older token is refused. A tampered or foreign
token is refused; deactivating a tender ends what their links can do (the pages check
``active``).
"""

from __future__ import annotations

from typing import Literal

from itsdangerous import BadSignature, URLSafeSerializer

from ..config import Config
from ..mail.values import TenderLinks
from ..pub import Pub
from .tenders import Tender, by_id

Purpose = Literal["form", "calendar", "cover"]
SALTS: dict[str, str] = {"form": "pubsched.tender-form.v1",
                         "calendar": "pubsched.tender-calendar.v1",
                         "cover": "pubsched.cover-offer.v1"}


def _signer(config: Config, purpose: Purpose) -> URLSafeSerializer:
    return URLSafeSerializer(config.signing_keys, salt=SALTS[purpose])


def tender_token(config: Config, tender_id: int, version: int = 1,
                 purpose: Purpose = "form") -> str:
    return str(_signer(config, purpose).dumps({"t": int(tender_id), "v": int(version)}))


def tender_url(config: Config, tender_id: int, version: int = 1,
               base_url: str | None = None) -> str:
    """The form link: ``<base>/t/<token>``; its calendar feed is ``calendar_url``."""
    base = (base_url or config.base_url).rstrip("/")
    return f"{base}/t/{tender_token(config, tender_id, version)}"


def calendar_url(config: Config, tender_id: int, version: int = 1,
                 base_url: str | None = None) -> str:
    base = (base_url or config.base_url).rstrip("/")
    token = tender_token(config, tender_id, version, "calendar")
    return f"{base}/cal/{token}.ics"


def webcal_url(config: Config, tender_id: int, version: int = 1,
               base_url: str | None = None) -> str:
    """The calendar feed as a subscription: ``webcal://`` in place of ``https://`` (or
    ``http://``). A phone opening it offers to subscribe, so every new week appears by
    itself; opening the https link downloads the file once. Same token, same feed."""
    https = calendar_url(config, tender_id, version, base_url)
    return "webcal://" + https.split("://", 1)[1]


def tender_links(config: Config, tender_id: int, version: int = 1,
                 base_url: str | None = None) -> TenderLinks:
    """The links a tender's email carries: their page, their feed, its subscription."""
    return TenderLinks(tender_url(config, tender_id, version, base_url),
                       calendar_url(config, tender_id, version, base_url),
                       webcal_url(config, tender_id, version, base_url))


def verify(config: Config, token: str, purpose: Purpose = "form") -> tuple[int, int] | None:
    """(tender id, link version) a token names, or None for a bad one; the caller checks
    the version against the tender's current one (a revoked link is an older version)."""
    try:
        data = _signer(config, purpose).loads(token)
    except BadSignature:
        return None
    if not isinstance(data, dict):
        return None
    tender, version = data.get("t"), data.get("v")
    if not isinstance(tender, int) or not isinstance(version, int):
        return None
    return tender, version


def offer_url(config: Config, cover_id: int, tender_id: int, link_version: int = 1,
              base_url: str | None = None) -> str:
    """A cover offer's "I'll take it" link, ``<base>/c/<token>``: it names the request and
    the tender it was offered to (their link version too, so a revoke ends it as it ends
    their other links). Whoever opens it acts as that tender, for that request only."""
    base = (base_url or config.base_url).rstrip("/")
    token = _signer(config, "cover").dumps(
        {"c": int(cover_id), "t": int(tender_id), "v": int(link_version)})
    return f"{base}/c/{token}"


def verify_offer(config: Config, token: str) -> tuple[int, int, int] | None:
    """(cover id, tender id, link version) an offer's token names, or None for a bad one
    (tampered, another purpose's); the caller checks the tender and the version, as
    :func:`tender_for_link` does."""
    try:
        data = _signer(config, "cover").loads(token)
    except BadSignature:
        return None
    if not isinstance(data, dict):
        return None
    cover, tender, version = data.get("c"), data.get("t"), data.get("v")
    if not (isinstance(cover, int) and isinstance(tender, int) and isinstance(version, int)):
        return None
    return cover, tender, version


def tender_for_link(pub: Pub, token: str, purpose: Purpose = "form") -> Tender | None:
    """The active tender a link names, or None for every link that must do nothing: a bad
    or tampered signature, a token of the other purpose, an unknown or deactivated tender,
    a revoked link (a version other than the tender's current one). One answer for all of
    them, so a page cannot tell a guesser which part was wrong."""
    got = verify(pub.config, token, purpose)
    if got is None:
        return None
    tender_id, version = got
    tender = by_id(pub, tender_id)
    if tender is None or not tender.active or tender.link_version != version:
        return None
    return tender
