"""A tender's personal links: signed tokens naming the tender (not a week, so a link keeps
working from week to week), so the form and the calendar feed need no password; the
operator hands the link out (the CLI's ``tender link``, the admin's copy button).

Signed with itsdangerous (HMAC), a salt per purpose (the form, the calendar feed), over the
tender id and the tender's link version (``pub_tenders.link_version``): revoking a
tender's links bumps the version, so every older token is refused. A tampered or foreign
token is refused; deactivating a tender ends what their links can do (the pages check
``active``).
"""

from __future__ import annotations

from typing import Any, Literal

from itsdangerous import BadSignature, URLSafeSerializer

from .app import Config, Pub, Verdict
from .tenders import Tender, get

Purpose = Literal["form", "calendar"]
SALTS: dict[str, str] = {"form": "pubsched.tender-form.v1",
                         "calendar": "pubsched.tender-calendar.v1"}


def _signer(config: Config, purpose: Purpose) -> URLSafeSerializer:
    return URLSafeSerializer(config.secret, salt=SALTS[purpose])


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


def _version(row: dict[str, Any]) -> int:
    """A tender row's link version; 1 on a database from before the column existed."""
    value = row.get("link_version")
    return 1 if value is None else int(value)


def current_version(pub: Pub, tender_id: int) -> int:
    """The version today's links of this tender carry (what ``tender link`` signs)."""
    rows = pub.query("SELECT * FROM pub_tenders WHERE id = %s", [tender_id])
    return _version(rows[0]) if rows else 1


def tender_for_link(pub: Pub, token: str, purpose: Purpose = "form") -> Tender | None:
    """The active tender a link names, or None for every link that must do nothing: a bad
    or tampered signature, a token of the other purpose, an unknown or deactivated tender,
    a revoked link (a version other than the tender's current one). One answer for all of
    them, so a page cannot tell a guesser which part was wrong."""
    got = verify(pub.config, token, purpose)
    if got is None:
        return None
    tender_id, version = got
    rows = pub.query("SELECT * FROM pub_tenders WHERE id = %s", [tender_id])  # * : before
    if not rows or not rows[0]["active"] or _version(rows[0]) != version:  # the column too
        return None
    return Tender.of(rows[0])


def revoke(pub: Pub, email: str) -> Verdict:
    """Revoke every link of a tender (form and calendar): the version goes up by one, so
    the old tokens are refused; the new link is ``tender_url(..., version=...)``."""
    tender = get(pub, email)
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_tenders SET link_version = link_version + 1 "
                          "WHERE id = %s RETURNING link_version", [tender.id])
    version = int(rows[0]["link_version"])
    return Verdict(True, message=f"revoked the links of {tender.email}",
                   detail={"link_version": version,
                           "url": tender_url(pub.config, tender.id, version)})
