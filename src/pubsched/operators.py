"""Operator accounts: the people who run the pub's admin, each with their own email and
password, so that every move of a week can say who made it (``operator:EMAIL``).

Why this shape:

* **Only an argon2 hash is kept** (argon2-cffi's :class:`PasswordHasher`, its defaults:
  about 50 ms a check, by design). The hash carries its own parameters, so a check costs
  what the hash was made with, and a hasher with cheaper parameters (the tests') makes
  cheaper hashes without any other change.
* **An email is one account, in any case**: ``email_key`` (its lower-case form) is a
  UNIQUE column, so the same person added twice is refused (``OPERATOR_EXISTS``) with
  nothing written, even by two adds racing. The address obeys the tenders' rule
  (:func:`pubsched.tenders.check_email`): what is stored can be mailed.
* **A password is at least 12 characters** (and at most 1024: argon2 takes any length,
  a login body does not need more); anything else is :class:`BadInput`, nothing written.
* **A wrong email costs what a wrong password costs**: :func:`verify` checks a dummy hash
  for an unknown address, so the login's timing does not tell which emails have accounts.
* **Removing the last account** is the caller's decision (``keep_one``): the web refuses
  it unless ``PUBSCHED_ADMIN_PASSWORD`` opens the admin anyway (the web cannot recover a
  lockout by itself); the CLI, the recovery path, allows it and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from .pub import BadInput, Pub, Verdict, utc
from .tenders import check_email, email_key

MIN_PASSWORD = 12
MAX_PASSWORD = 1024
ADMIN = "admin"  # the quick start's account (PUBSCHED_ADMIN_PASSWORD), never a row
COLUMNS = "id, email, created_at, last_login_at"


@dataclass(frozen=True)
class Operator:
    id: int
    email: str
    created_at: Any
    last_login_at: Any = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Operator:
        return cls(int(row["id"]), str(row["email"]), row["created_at"], row["last_login_at"])

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "email": self.email,
                "created_at": _iso(self.created_at), "last_login_at": _iso(self.last_login_at)}


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def check_password(password: object) -> str:
    """The password when it is long enough (and not absurdly long); else :class:`BadInput`."""
    if not isinstance(password, str) or len(password) < MIN_PASSWORD:
        raise BadInput(f"a password needs at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise BadInput(f"a password has at most {MAX_PASSWORD} characters")
    return password


def check_operator_email(email: object) -> str:
    """An address an account may have: mailable, and not the quick start's name."""
    if isinstance(email, str) and email.strip().lower() == ADMIN:
        raise BadInput(f"{ADMIN!r} is the quick start's account (PUBSCHED_ADMIN_PASSWORD), "
                       "not an address")
    return check_email(email)


def add(pub: Pub, email: str, password: str, *, hasher: PasswordHasher | None = None,
        now: datetime | None = None) -> Verdict:
    """Add an operator account; the same email (any case) again is refused
    (``OPERATOR_EXISTS``). Everything is checked before the hash is made or a row written."""
    address = check_operator_email(email)
    secret = check_password(password)
    at = utc(now)
    digest = (hasher or PasswordHasher()).hash(secret)
    with pub.atomic() as tx:
        rows = tx.execute(
            "INSERT INTO pub_operators (email, email_key, password_hash, created_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (email_key) DO NOTHING RETURNING id",
            [address, email_key(address), digest, at])
    if not rows:
        return Verdict(False, "OPERATOR_EXISTS",
                       message=f"{address} already has an operator account")
    return Verdict(True, message=f"added operator {address}", detail={"id": int(rows[0]["id"])})


def all_operators(pub: Pub) -> list[Operator]:
    return [Operator.of(r) for r in pub.query(
        f"SELECT {COLUMNS} FROM pub_operators ORDER BY email_key")]


def find(pub: Pub, email: str) -> Operator | None:
    rows = pub.query(f"SELECT {COLUMNS} FROM pub_operators WHERE email_key = %s",
                     [email_key(email)])
    return Operator.of(rows[0]) if rows else None


def by_id(pub: Pub, operator_id: int) -> Operator | None:
    rows = pub.query(f"SELECT {COLUMNS} FROM pub_operators WHERE id = %s", [operator_id])
    return Operator.of(rows[0]) if rows else None


def alive(pub: Pub, operator_id: int, email: str) -> bool:
    """Whether the account a session was issued to still exists (removed, or removed and
    added again under a new id: no)."""
    found = by_id(pub, operator_id)
    return found is not None and email_key(found.email) == email_key(email)


def remove(pub: Pub, email: str, *, keep_one: bool = False) -> Verdict:
    """Remove the account with this email (unknown: :class:`BadInput`). ``keep_one``: refuse
    (``LAST_OPERATOR``) when it is the only one left. The count and the delete are one unit
    with every account row locked first (PostgreSQL), so two removals racing cannot both
    see "two left" and leave none."""
    key = email_key(email)
    with pub.atomic() as tx:
        lock = " FOR UPDATE" if pub.dialect == "postgresql" else ""
        keys = [r["email_key"] for r in tx.execute(
            f"SELECT email_key FROM pub_operators ORDER BY id{lock}")]
        if key not in keys:
            raise BadInput(f"no operator account with email {email!r}")
        if keep_one and len(keys) == 1:
            return Verdict(False, "LAST_OPERATOR",
                           message=f"{email} is the last operator account: add another "
                           "first, or set PUBSCHED_ADMIN_PASSWORD")
        tx.execute("DELETE FROM pub_operators WHERE email_key = %s", [key])
    return Verdict(True, message=f"removed operator {email}", detail={"left": len(keys) - 1})


@cache
def _dummy_hash() -> str:
    """A hash no password matches, checked for unknown emails (see the module docstring)."""
    return PasswordHasher().hash("pubsched: no such operator account")


def verify(pub: Pub, email: str, password: str, *,
           now: datetime | None = None) -> Operator | None:
    """The account when ``password`` is its password (and its login stamped), else None.
    An unknown email is checked against a dummy hash: the same work as a wrong password."""
    if not isinstance(email, str) or not isinstance(password, str) \
            or len(password) > MAX_PASSWORD:
        return None
    rows = pub.query(f"SELECT {COLUMNS}, password_hash FROM pub_operators "
                     "WHERE email_key = %s", [email_key(email)])
    stored = str(rows[0]["password_hash"]) if rows else _dummy_hash()
    try:
        ok = bool(PasswordHasher().verify(stored, password))
    except (VerificationError, InvalidHashError):
        ok = False
    if not ok or not rows:
        return None
    at = utc(now)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_operators SET last_login_at = %s WHERE id = %s",
                   [at, rows[0]["id"]])
    return Operator.of({**rows[0], "last_login_at": at})
