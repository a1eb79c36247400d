"""Mail settings, read once from the environment into a frozen value.

The mail layer never looks at ``os.environ`` itself: the application reads the settings once
at start-up with :func:`load_mail_settings` and hands the value down, so a test passes its
own mapping and two parts of one process can never disagree about where mail goes. A value
that cannot be used (a port that is not a number, a user without a password, rehearsal with
no operator to send to) is a :class:`MailConfigError` naming the variable, raised at start-up
rather than at the first send.

Variables (empty counts as unset):

``PUBSCHED_SMTP_HOST``      SMTP server; unset: mail is written to the log, not sent
``PUBSCHED_SMTP_PORT``      default 25 (465 with ``PUBSCHED_SMTP_TLS=tls``)
``PUBSCHED_SMTP_USER``      with ``PUBSCHED_SMTP_PASSWORD``: log in after EHLO (and STARTTLS)
``PUBSCHED_SMTP_TLS``       ``starttls`` (upgrade the connection, usually port 587), ``tls``
                            (TLS from the first byte, port 465) or ``none`` (plain: only to
                            a server on this machine's loopback); default ``none`` to a
                            loopback host, ``tls`` on port 465, ``starttls`` otherwise. The
                            server's certificate is always verified
``PUBSCHED_SMTP_CA_FILE``   a PEM file of the certificate authorities to trust instead of the
                            system's (a pub's own mail server with its own certificate)
``PUBSCHED_SMTP_STARTTLS``  the older switch: 1 is ``PUBSCHED_SMTP_TLS=starttls``, 0 leaves
                            the choice to ``PUBSCHED_SMTP_TLS``; both set and disagreeing is an
                            error
``PUBSCHED_SMTP_TIMEOUT``   seconds for connecting and for each reply; default 30
``PUBSCHED_MAIL_FROM``      sender: an address, or a name and address (``The Crown
                            <rota@pub.example>``: the name is shown in From:); default
                            ``pubsched@localhost``
``PUBSCHED_OPERATOR_EMAIL`` the operator: nudges go there, and everything in rehearsal
``PUBSCHED_REHEARSAL``      1: every message goes to the operator only (the dress rehearsal)
``PUBSCHED_PUB_NAME``       the pub's name, as its tenders know it: in every subject, as the
                            header of every email and as the sender's name when
                            ``PUBSCHED_MAIL_FROM`` gives none; default ``The pub``
``PUBSCHED_PUB_ADDRESS``    where the pub is (one line): the calendar events' LOCATION and
                            the emails' footer; unset: neither says where

The pub's name and address live here, not in the web's settings, because the mail is what
carries them to people who are not at the pub; the pages read them from here too, so there
is one reading of each.
"""

from __future__ import annotations

import ipaddress
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from .addresses import address_problem, name_problem

DEFAULT_SMTP_PORT = 25
IMPLICIT_TLS_PORT = 465
Tls = Literal["starttls", "tls", "none"]
TLS_MODES: tuple[Tls, ...] = get_args(Tls)
DEFAULT_SMTP_TIMEOUT = 30.0
DEFAULT_MAIL_FROM = "pubsched@localhost"
DEFAULT_PUB_NAME = "The pub"
MAX_PUB_ADDRESS = 200

_NAMED = re.compile(r'\s*(?:"(?P<quoted>[^"]*)"|(?P<bare>[^"<>]*?))\s*<(?P<address>[^<>]*)>\s*')
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class MailConfigError(ValueError):
    """A mail setting in the environment cannot be used; the message names the variable."""


@dataclass(frozen=True)
class MailSettings:
    """Where and how mail goes. Build it with :func:`load_mail_settings`.

    ``smtp_host`` None means there is no server: the log mailer writes each message to the
    log. The password is left out of ``repr`` so that logging the settings leaks nothing.
    """

    smtp_host: str | None = None
    smtp_port: int = DEFAULT_SMTP_PORT
    smtp_user: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    smtp_tls: Tls = "none"
    smtp_ca_file: str | None = None
    smtp_timeout: float = DEFAULT_SMTP_TIMEOUT
    mail_from: str = DEFAULT_MAIL_FROM
    mail_from_name: str | None = None
    operator_email: str | None = None
    rehearsal: bool = False
    pub_name: str = DEFAULT_PUB_NAME
    pub_address: str | None = None

    def __post_init__(self) -> None:
        if (self.smtp_user is None) != (self.smtp_password is None):
            raise MailConfigError(
                "PUBSCHED_SMTP_USER and PUBSCHED_SMTP_PASSWORD go together: set both or neither"
            )
        if self.smtp_tls not in TLS_MODES:
            raise MailConfigError(f"PUBSCHED_SMTP_TLS is one of {', '.join(TLS_MODES)}, "
                                  f"not {self.smtp_tls!r}")
        if self.smtp_tls == "none" and self.smtp_host is not None \
                and not is_loopback(self.smtp_host):
            raise MailConfigError(
                f"PUBSCHED_SMTP_TLS=none would send mail (and the SMTP password) in the clear "
                f"to {self.smtp_host}: plain SMTP is only for a server on this machine; set "
                "PUBSCHED_SMTP_TLS=starttls (port 587) or tls (port 465)")
        if self.rehearsal and self.operator_email is None:
            raise MailConfigError(
                "PUBSCHED_REHEARSAL=1 sends everything to the operator: "
                "set PUBSCHED_OPERATOR_EMAIL too"
            )

    @property
    def sends_over_smtp(self) -> bool:
        return self.smtp_host is not None


def load_mail_settings(env: Mapping[str, str] | None = None) -> MailSettings:
    """Read the ``PUBSCHED_*`` mail variables from ``env`` (default: ``os.environ``)."""
    source = os.environ if env is None else env

    def get(name: str) -> str | None:
        value = source.get(name, "").strip()
        return value or None

    sender = get("PUBSCHED_MAIL_FROM")
    from_name, from_address = _sender(sender) if sender is not None else (None, None)
    host = get("PUBSCHED_SMTP_HOST")
    tls = _tls(host, get("PUBSCHED_SMTP_TLS"), get("PUBSCHED_SMTP_PORT"),
               _flag("PUBSCHED_SMTP_STARTTLS", get("PUBSCHED_SMTP_STARTTLS")))
    port = get("PUBSCHED_SMTP_PORT")
    return MailSettings(
        smtp_host=host,
        smtp_port=(IMPLICIT_TLS_PORT if tls == "tls" and port is None else _port(port)),
        smtp_user=get("PUBSCHED_SMTP_USER"),
        smtp_password=get("PUBSCHED_SMTP_PASSWORD"),
        smtp_tls=tls,
        smtp_ca_file=_ca_file(get("PUBSCHED_SMTP_CA_FILE")),
        smtp_timeout=_timeout(get("PUBSCHED_SMTP_TIMEOUT")),
        mail_from=from_address or DEFAULT_MAIL_FROM,
        mail_from_name=from_name,
        operator_email=_address("PUBSCHED_OPERATOR_EMAIL", get("PUBSCHED_OPERATOR_EMAIL")),
        rehearsal=_flag("PUBSCHED_REHEARSAL", get("PUBSCHED_REHEARSAL")),
        pub_name=_pub_name(get("PUBSCHED_PUB_NAME")),
        pub_address=_pub_address(get("PUBSCHED_PUB_ADDRESS")),
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost``, 127.0.0.0/8, ``::1``): the only
    place plain SMTP may go, since nothing on the way can read it."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _tls(host: str | None, raw: str | None, port: str | None, starttls: bool) -> Tls:
    """``PUBSCHED_SMTP_TLS``, or its default (module docstring)."""
    if raw is not None:
        mode = raw.lower()
        if mode not in TLS_MODES:
            raise MailConfigError(f"PUBSCHED_SMTP_TLS is one of {', '.join(TLS_MODES)}, "
                                  f"not {raw!r}")
        if starttls and mode != "starttls":
            raise MailConfigError(f"PUBSCHED_SMTP_STARTTLS=1 and PUBSCHED_SMTP_TLS={mode} "
                                  "disagree: keep PUBSCHED_SMTP_TLS only")
        return mode
    if starttls:
        return "starttls"
    if host is None or is_loopback(host):
        return "none"
    return "tls" if port == str(IMPLICIT_TLS_PORT) else "starttls"


def _ca_file(raw: str | None) -> str | None:
    if raw is not None and not Path(raw).is_file():
        raise MailConfigError(f"PUBSCHED_SMTP_CA_FILE: there is no file {raw!r}")
    return raw


def _port(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_SMTP_PORT
    try:
        port = int(raw)
    except ValueError:
        raise MailConfigError(f"PUBSCHED_SMTP_PORT must be an integer, not {raw!r}") from None
    if not 1 <= port <= 65535:
        raise MailConfigError(f"PUBSCHED_SMTP_PORT must be in 1..65535, not {port}")
    return port


def _timeout(raw: str | None) -> float:
    if raw is None:
        return DEFAULT_SMTP_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        raise MailConfigError(f"PUBSCHED_SMTP_TIMEOUT must be seconds, not {raw!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise MailConfigError(f"PUBSCHED_SMTP_TIMEOUT must be a positive number, not {raw!r}")
    return seconds


def _flag(name: str, raw: str | None) -> bool:
    if raw is None:
        return False
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise MailConfigError(f"{name} must be 1/true/yes/on or 0/false/no/off, not {raw!r}")


def _sender(raw: str) -> tuple[str | None, str]:
    """``PUBSCHED_MAIL_FROM``: a bare address, or ``Name <address>`` (the name may be
    quoted). The envelope gets the address alone; From: shows the name. Both obey the one
    rule of :mod:`.addresses`."""
    named = _NAMED.fullmatch(raw)
    if named is None:
        return None, _address("PUBSCHED_MAIL_FROM", raw) or raw
    display = (named["quoted"] if named["quoted"] is not None else named["bare"]).strip()
    address = _address("PUBSCHED_MAIL_FROM", named["address"].strip()) or ""
    if not display:
        return None, address
    problem = name_problem(display)
    if problem is not None:
        raise MailConfigError(f"PUBSCHED_MAIL_FROM: {problem}")
    return display, address


def _pub_name(raw: str | None) -> str:
    """The pub's name obeys the rule of a person's name (:mod:`.addresses`): it is the
    sender's display name, so a comma or a bracket would split it in a header."""
    if raw is None:
        return DEFAULT_PUB_NAME
    problem = name_problem(raw)
    if problem is not None:
        raise MailConfigError(f"PUBSCHED_PUB_NAME: {problem}")
    return raw


def _pub_address(raw: str | None) -> str | None:
    """One line of text (commas allowed: it is never a header): a line break would end the
    calendar's LOCATION and start a property of the tender's calendar."""
    if raw is None:
        return None
    if len(raw) > MAX_PUB_ADDRESS:
        raise MailConfigError(
            f"PUBSCHED_PUB_ADDRESS is at most {MAX_PUB_ADDRESS} characters, got {len(raw)}")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in raw):
        raise MailConfigError("PUBSCHED_PUB_ADDRESS is one line: it holds a line break or "
                              "another control character")
    return raw


def _address(name: str, raw: str | None) -> str | None:
    if raw is None:
        return None
    problem = address_problem(raw)
    if problem is not None:
        raise MailConfigError(f"{name}: {problem}")
    return raw
