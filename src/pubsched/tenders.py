"""Tenders: the people who work shifts. An email is unique case-insensitively
(``email_key`` = its lower-case form, a UNIQUE column), so the same person added twice,
in any case, is refused with nothing changed. A tender's address and name obey the mail
layer's one rule (:mod:`pubsched.mail.addresses`): what is stored can always be mailed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rowstate

from .mail.addresses import address_problem, name_problem
from .pub import BadInput, Pub, Verdict, utc

COLUMNS = "id, name, email, active, max_shifts, link_version"


@dataclass(frozen=True)
class Tender:
    id: int
    name: str
    email: str
    active: bool
    max_shifts: int | None
    link_version: int = 1

    @classmethod
    def of(cls, row: dict[str, Any]) -> Tender:
        return cls(int(row["id"]), str(row["name"]), str(row["email"]), bool(row["active"]),
                   None if row["max_shifts"] is None else int(row["max_shifts"]),
                   int(row.get("link_version") or 1))

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "email": self.email,
                "active": self.active, "max_shifts": self.max_shifts}


def email_key(email: str) -> str:
    return email.strip().lower()


def check_email(email: object) -> str:
    """The address, stripped, when the mail layer can mail it; else :class:`BadInput`."""
    address = email.strip() if isinstance(email, str) else email
    problem = address_problem(address)
    if problem is not None:
        raise BadInput(f"not an email address pubsched can mail: {problem}")
    assert isinstance(address, str)
    return address


def check_name(name: object) -> str:
    """The name, stripped, when a message can show it; else :class:`BadInput`."""
    cleaned = name.strip() if isinstance(name, str) else name
    problem = name_problem(cleaned)
    if problem is not None:
        raise BadInput(f"not a tender's name pubsched can mail: {problem}")
    assert isinstance(cleaned, str)
    return cleaned


def check_max(value: object, what: str = "max shifts") -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 14:
        raise BadInput(f"{what} is a whole number from 0 to 14, got {value!r}")
    return value


def add(pub: Pub, name: str, email: str, *, max_shifts: int | None = None,
        now: datetime | None = None) -> Verdict:
    """Add a tender; the same email (any case) again is refused (TENDER_EXISTS)."""
    name = check_name(name)
    address = check_email(email)
    limit = check_max(max_shifts)
    at = utc(now)
    with pub.atomic() as tx:
        try:
            rows = tx.execute(
                "INSERT INTO pub_tenders (name, email, email_key, active, max_shifts, "
                "created_at) VALUES (%s, %s, %s, 1, %s, %s) "
                "ON CONFLICT (email_key) DO NOTHING RETURNING id",
                [name, address, email_key(address), limit, at])
        except rowstate.InvariantViolation:  # pragma: no cover - ON CONFLICT answers it
            rows = []
    if not rows:
        return Verdict(False, "TENDER_EXISTS", message=f"{address} is already a tender")
    return Verdict(True, message=f"added {name} <{address}>",
                   detail={"id": int(rows[0]["id"])})


def find(pub: Pub, email: str) -> Tender | None:
    rows = pub.query(f"SELECT {COLUMNS} FROM pub_tenders "
                     "WHERE email_key = %s", [email_key(email)])
    return Tender.of(rows[0]) if rows else None


def get(pub: Pub, email: str) -> Tender:
    """The tender with this email, or a :class:`BadInput` naming it."""
    found = find(pub, email)
    if found is None:
        raise BadInput(f"no tender with email {email!r}")
    return found


def by_id(pub: Pub, tender_id: int) -> Tender | None:
    rows = pub.query(f"SELECT {COLUMNS} FROM pub_tenders "
                     "WHERE id = %s", [tender_id])
    return Tender.of(rows[0]) if rows else None


def deactivate(pub: Pub, email: str) -> Verdict:
    tender = get(pub, email)
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_tenders SET active = 0 WHERE id = %s AND active = 1 "
                          "RETURNING id", [tender.id])
    if not rows:
        return Verdict(False, "ALREADY_INACTIVE", message=f"{tender.email} is not active")
    return Verdict(True, message=f"deactivated {tender.email}")


def all_tenders(pub: Pub, *, active_only: bool = False) -> list[Tender]:
    where = " WHERE active = 1" if active_only else ""
    rows = pub.query(f"SELECT {COLUMNS} FROM pub_tenders{where} "
                     "ORDER BY lower(name), id")
    return [Tender.of(r) for r in rows]


def revoke_links(pub: Pub, email: str) -> Verdict:
    """Bump the tender's link version: every personal link handed out so far is refused;
    ``links.tender_url`` with the new version is the one to hand out now."""
    tender = get(pub, email)
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_tenders SET link_version = link_version + 1 "
                          "WHERE id = %s RETURNING link_version", [tender.id])
    return Verdict(True, message=f"revoked the links of {tender.email}",
                   detail={"link_version": int(rows[0]["link_version"])})
