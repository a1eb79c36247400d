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
  (:func:`pubsched.people.tenders.check_email`): what is stored can be mailed.
* **A password is at least 12 characters** (and at most 1024: argon2 takes any length,
  a login body does not need more); anything else is :class:`BadInput`, nothing written.
* **A wrong email costs what a wrong password costs**: :func:`verify` checks a dummy hash
  for an unknown address, so the login's timing does not tell which emails have accounts.
* **A new password logs out every other session of the account**: a session names the
  account's *stamp* (:func:`stamp`: a digest of the stored hash, which a new password
  changes), and :func:`alive` accepts it only while it matches. So an operator who fears
  a session was stolen changes their password and that session is out at its next click.
  Changing one's own password asks for the current one (a session left open on a shared
  computer must not be enough to lock its owner out); the CLI, the recovery path, does not.
* **Removing the last account** is the caller's decision (``keep_one``): the web refuses
  it unless ``PUBSCHED_ADMIN_PASSWORD`` opens the admin anyway (the web cannot recover a
  lockout by itself); the CLI, the recovery path, allows it and says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from .tenders import check_email, email_key

MIN_PASSWORD = 12
MAX_PASSWORD = 1024
ADMIN = "admin"  # the quick start's account (PUBSCHED_ADMIN_PASSWORD), never a row
COLUMNS = "id, email, created_at, last_login_at"


def stamp(password_hash: str) -> str:
    """What a session remembers of the account's password: a digest of its hash (not the
    hash: a cookie must not carry anything to guess a password from)."""
    return hashlib.sha256(password_hash.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Operator:
    id: int
    email: str
    created_at: Any
    last_login_at: Any = None
    stamp: str | None = None  # of the password it was read with (a session's, at login)

    @classmethod
    def of(cls, row: dict[str, Any]) -> Operator:
        hashed = row.get("password_hash")
        return cls(int(row["id"]), str(row["email"]), row["created_at"], row["last_login_at"],
                   None if hashed is None else stamp(str(hashed)))

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


def alive(pub: Pub, operator_id: int, email: str, password_stamp: str | None) -> bool:
    """Whether the account a session was issued to still exists with the password it was
    issued under (removed, removed and added again under a new id, or its password changed
    since: no)."""
    rows = pub.query(f"SELECT {COLUMNS}, password_hash FROM pub_operators WHERE id = %s",
                     [operator_id])
    if not rows:
        return False
    found = Operator.of(rows[0])
    return email_key(found.email) == email_key(email) and found.stamp == password_stamp


def _matches(stored: str, password: str) -> bool:
    try:
        return bool(PasswordHasher().verify(stored, password))
    except (VerificationError, InvalidHashError):
        return False


def set_password(pub: Pub, email: str, password: str, *, current: str | None = None,
                 hasher: PasswordHasher | None = None) -> Verdict:
    """Give the account a new password (its other sessions end: module docstring).
    ``current``: the password it has now, checked first (``WRONG_PASSWORD``, nothing
    changed); None skips the check (the CLI). ``detail["stamp"]``: the new stamp, for the
    caller's own fresh session."""
    secret = check_password(password)
    key = email_key(email)
    rows = pub.query("SELECT password_hash FROM pub_operators WHERE email_key = %s", [key])
    if not rows:
        raise BadInput(f"no operator account with email {email!r}")
    old = str(rows[0]["password_hash"])
    if current is not None and not _matches(old, current):
        return Verdict(False, "WRONG_PASSWORD",
                       message="that is not your current password: nothing was changed")
    digest = (hasher or PasswordHasher()).hash(secret)
    with pub.atomic() as tx:  # only over the hash that was checked: a racing change wins
        changed = tx.execute("UPDATE pub_operators SET password_hash = %s "
                             "WHERE email_key = %s AND password_hash = %s RETURNING email",
                             [digest, key, old])
    if not changed:
        return Verdict(False, "PASSWORD_CHANGED",
                       message="the password was changed meanwhile: nothing was changed")
    return Verdict(True, message=f"changed the password of {changed[0]['email']}: its other "
                   "sessions are logged out", detail={"stamp": stamp(digest)})


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
    ok = _matches(stored, password)
    if not ok or not rows:
        return None
    at = utc(now)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_operators SET last_login_at = %s WHERE id = %s",
                   [at, rows[0]["id"]])
    return Operator.of({**rows[0], "last_login_at": at})
