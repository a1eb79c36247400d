"""The one rule of what pubsched can address: an email address and a person's name.

``tender add`` refuses what this module refuses (exit 2, nothing written), the mail
settings refuse it for the sender and the operator, and the composer refuses to build a
message for it. One rule in one place, so that nothing the operator could store is a
message the mail layer then cannot build: before it, ``bob@pub.example.`` was stored and
every later send died on it.

An address is what SMTP without SMTPUTF8 carries as it is and every client reads the same
way: ASCII, a dot-atom local part (no leading, trailing or doubled dot, no quotes) of at
most 64 characters, ``@``, a host name of letter-digit-hyphen labels (a dot between labels,
none at the end), 254 characters in all. The host needs a dot, except ``localhost`` (the
development sender, ``pubsched@localhost``).

A name is what a message shows beside the address (``To: Ann Lee <ann@...>``): up to 120
characters with no line break or other control character (one would end the header and
start another), and none of ``" , ; < > \\``, the characters that separate, quote or
bracket addresses in a header: refused rather than quoted, so a name reads as one person
in every client, however loosely it parses ("Smith, Bob" is written "Bob Smith").
"""

from __future__ import annotations

import re
import unicodedata
from email.errors import HeaderParseError
from email.headerregistry import Address

MAX_ADDRESS, MAX_LOCAL, MAX_NAME = 254, 64, 120
NAME_SPECIALS = frozenset('",;<>\\')

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL = re.compile(rf"{_ATOM}(?:\.{_ATOM})*")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def address_problem(value: object) -> str | None:
    """Why ``value`` is not an address pubsched can mail (the module's rule), or None."""
    if not isinstance(value, str):
        return f"{value!r} is not an email address"
    if value != value.strip() or not value:
        return f"{value!r} is not an email address (spaces around it)"
    local, at, host = value.rpartition("@")
    if not at or not local:
        return f"{value!r} is not a bare address such as ann@example.com"
    if not value.isascii():
        return f"{value!r} has characters beyond ASCII, which this mailer cannot send to"
    if len(value) > MAX_ADDRESS or len(local) > MAX_LOCAL:
        return f"{value!r} is too long for an email address"
    if not _LOCAL.fullmatch(local):
        return (f"{value!r} is not a valid address: the part before @ may not start or end "
                "with a dot, hold two dots in a row, quotes, spaces or brackets")
    if not _HOST.fullmatch(host) or ("." not in host and host.lower() != "localhost"):
        return (f"{value!r} is not a valid address: {host!r} is not a mail domain "
                "(labels of letters, digits and hyphens with dots between, none at the end)")
    try:  # what the composer will do with it: the rule above must never let more through
        Address(addr_spec=value)
    except (ValueError, IndexError, HeaderParseError):  # pragma: no cover - the rule is stricter
        return f"{value!r} is not a valid address"
    return None


def name_problem(value: object) -> str | None:
    """Why ``value`` cannot be shown as a person's name in a header (the module's rule), or
    None."""
    if not isinstance(value, str) or not value.strip():
        return f"a name is needed, got {value!r}"
    if len(value) > MAX_NAME:
        return f"a name is at most {MAX_NAME} characters, got {len(value)}"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in value):
        return f"the name {value!r} holds a line break or another control character"
    specials = sorted(set(value) & NAME_SPECIALS)
    if specials:
        return (f"the name {value!r} holds {' '.join(specials)}, which email headers use "
                "between addresses; leave it out (write 'Bob Smith', not 'Smith, Bob')")
    return None
