"""Tenders: the people who work shifts. An email is unique case-insensitively
(``email_key`` = its lower-case form, a UNIQUE column), so the same person added twice,
in any case, or edited onto another's address, is refused with nothing changed: the
UNIQUE index decides under any race, the code does not pre-check. A tender's address and
name obey the mail layer's one rule (:mod:`pubsched.mail.addresses`), at add and at edit
alike: what is stored can always be mailed. Their personal links name the tender's id and
link version, never the address, so an edited email keeps every link working.

Skills are free words the operator picks ("bar", "cellar", "firstaid"): stored as a JSON
list, lower-cased and de-duplicated, so the picker compares words, not spellings."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rowstate

from ..mail.addresses import address_problem, name_problem
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from ..week import history
from . import skills as skill_words

ALREADY_INACTIVE = "ALREADY_INACTIVE"
_COLUMNS = "id, name, email, active, max_shifts, link_version, skills, shift_reminders"
MAX_SKILLS = 20


class Keep(enum.Enum):
    """``edit``'s "leave this as it is", distinct from None (which clears the maximum)."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True)
class Tender:
    id: int
    name: str
    email: str
    active: bool
    max_shifts: int | None
    link_version: int = 1
    skills: tuple[str, ...] = ()
    shift_reminders: bool = True  # an email before each shift (0044; they can turn it off)

    @classmethod
    def of(cls, row: dict[str, Any]) -> Tender:
        return cls(int(row["id"]), str(row["name"]), str(row["email"]), bool(row["active"]),
                   None if row["max_shifts"] is None else int(row["max_shifts"]),
                   int(row.get("link_version") or 1), skill_words.stored(row.get("skills")),
                   bool(row.get("shift_reminders", 1)))

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "email": self.email,
                "active": self.active, "max_shifts": self.max_shifts,
                "skills": list(self.skills), "shift_reminders": self.shift_reminders}


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


def check_skills(skills: Iterable[object]) -> tuple[str, ...]:
    """A tender's skills, by the one rule of :mod:`pubsched.people.skills`. A word with a space or
    a comma inside is refused rather than split, so "bar, cellar" typed into one
    ``--skill`` is not silently two skills; the web's one text field splits on them first
    (:func:`split_skills`)."""
    return skill_words.check(skills, most=MAX_SKILLS, whose="a tender")


def split_skills(text: str) -> tuple[str, ...]:
    """Skills typed into one field, separated by commas or spaces (the web's form)."""
    return check_skills(skill_words.split(text))


def add(pub: Pub, name: str, email: str, *, max_shifts: int | None = None,
        skills: Iterable[object] = (), now: datetime | None = None) -> Verdict:
    """Add a tender; the same email (any case) again is refused (TENDER_EXISTS)."""
    name = check_name(name)
    address = check_email(email)
    limit = check_max(max_shifts)
    words = check_skills(skills)
    at = utc(now)
    with pub.atomic() as tx:
        try:
            rows = tx.execute(
                "INSERT INTO pub_tenders (name, email, email_key, active, max_shifts, "
                "skills, created_at) VALUES (%s, %s, %s, 1, %s, %s, %s) "
                "ON CONFLICT (email_key) DO NOTHING RETURNING id",
                [name, address, email_key(address), limit, json.dumps(list(words)), at])
        except rowstate.InvariantViolation:  # pragma: no cover - ON CONFLICT answers it
            rows = []
    if not rows:
        return Verdict(False, "TENDER_EXISTS", message=f"{address} is already a tender")
    return Verdict(True, message=f"added {name} ({address})",
                   detail={"id": int(rows[0]["id"])})


def find(pub: Pub, email: str) -> Tender | None:
    rows = pub.query(f"SELECT {_COLUMNS} FROM pub_tenders "
                     "WHERE email_key = %s", [email_key(email)])
    return Tender.of(rows[0]) if rows else None


def get(pub: Pub, email: str) -> Tender:
    """The tender with this email, or a :class:`BadInput` naming it."""
    found = find(pub, email)
    if found is None:
        raise BadInput(f"no tender with email {email!r}")
    return found


def by_id(pub: Pub, tender_id: int) -> Tender | None:
    rows = pub.query(f"SELECT {_COLUMNS} FROM pub_tenders "
                     "WHERE id = %s", [tender_id])
    return Tender.of(rows[0]) if rows else None


def edit(pub: Pub, email: str, *, name: str | None = None, new_email: str | None = None,
         max_shifts: int | Keep | None = KEEP,
         skills: Iterable[object] | None = None,
         shift_reminders: bool | None = None) -> Verdict:
    """Change a tender's details; what is not given stays. ``max_shifts=None`` clears the
    maximum (``KEEP``, the default, leaves it); ``skills`` replaces the list (``()``
    clears it); ``shift_reminders`` turns the email before each of their shifts on or off
    (their page's switch, and the operator's on the tender's edit page). Every value is
    checked before anything is written (BadInput); nothing given at all is bad input too.
    A new address another tender has, in any case, is refused (TENDER_EXISTS) by the
    UNIQUE ``email_key``, so two edits racing onto one address cannot both land."""
    tender = get(pub, email)
    changes: dict[str, Any] = {}
    if name is not None:
        changes["name"] = check_name(name)
    if new_email is not None:
        address = check_email(new_email)
        changes["email"], changes["email_key"] = address, email_key(address)
    if not isinstance(max_shifts, Keep):
        changes["max_shifts"] = check_max(max_shifts)
    if skills is not None:
        changes["skills"] = json.dumps(list(check_skills(skills)))
    if shift_reminders is not None:
        if not isinstance(shift_reminders, bool):
            raise BadInput(f"shift reminders are on or off, got {shift_reminders!r}")
        changes["shift_reminders"] = 1 if shift_reminders else 0
    if not changes:
        raise BadInput("nothing to change: give a new name, email, maximum, skills or "
                       "shift reminders")
    sets = ", ".join(f"{column} = %s" for column in changes)  # names from this function only
    try:
        with pub.atomic() as tx:
            rows = tx.execute(f"UPDATE pub_tenders SET {sets} WHERE id = %s "
                              f"RETURNING {_COLUMNS}", [*changes.values(), tender.id])
    except rowstate.InvariantViolation:
        taken = changes.get("email", new_email)
        return Verdict(False, "TENDER_EXISTS", message=f"{taken} is another tender's email")
    if not rows:  # pragma: no cover - tenders are never deleted
        raise BadInput(f"no tender with email {email!r}")
    saved = Tender.of(rows[0])
    return Verdict(True, message=f"{saved.name}'s details are saved",
                   detail={"tender": saved.as_json()})


def activate(pub: Pub, email: str) -> Verdict:
    """Make an inactive tender active again: back in the picker, their links (of the
    current version) working again. Already active: ALREADY_ACTIVE."""
    tender = get(pub, email)
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_tenders SET active = 1 WHERE id = %s AND active = 0 "
                          "RETURNING id", [tender.id])
    if not rows:
        return Verdict(False, "ALREADY_ACTIVE", message=f"{tender.email} is already active")
    return Verdict(True, message=f"activated {tender.email}")


def deactivate(pub: Pub, email: str, *, now: datetime | None = None) -> Verdict:
    """Turn the tender's flag off, and record it in the history of each week they are on a
    shift to come (after ``now``) of, in the same unit (:func:`pubsched.week.history.
    deactivated`); nothing else: already inactive is ALREADY_INACTIVE. The operator's
    deactivation is :func:`pubsched.covers.leaving.deactivate`, which calls this in its
    unit of work before it takes the tender off every shift to come on a sent roster (or
    refuses): use that one."""
    tender = get(pub, email)
    at = utc(now)
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_tenders SET active = 0 WHERE id = %s AND active = 1 "
                          "RETURNING id", [tender.id])
        if rows:
            history.deactivated(tx, tender.id, tender.name, at, pub.config.tz)
    if not rows:
        return Verdict(False, ALREADY_INACTIVE, message=f"{tender.email} is not active")
    return Verdict(True, message=f"deactivated {tender.email}")


def every(tx: Any) -> dict[int, Tender]:
    """Every tender by id, as the unit of work ``tx`` reads them now (a rule judged in a
    unit reads the people in it too)."""
    return {int(r["id"]): Tender.of(r) for r in tx.execute(
        f"SELECT {_COLUMNS} FROM pub_tenders")}


def all_tenders(pub: Pub, *, active_only: bool = False) -> list[Tender]:
    where = " WHERE active = 1" if active_only else ""
    rows = pub.query(f"SELECT {_COLUMNS} FROM pub_tenders{where} "
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
