"""Handing messages to SMTP, and saying exactly what became of each recipient.

The schedule email must never reach a tender twice for one run, even when a send crashes
midway and is retried. The mailer cannot promise that alone; it makes the caller able to.
The contract, for the send action (which writes the delivery records by fenced writes):

.. code-block:: python

    with mailer.session() as mail:               # no I/O yet: entering cannot fail
        for outgoing in outgoings:
            deliveries.mark_in_flight(outgoing.intended)   # committed BEFORE the handover
            outcome = mail.send(outgoing)                  # exactly one try, no retry
            deliveries.record(outcome)                     # see the three outcomes below

``send`` returns one :class:`Outcome` per message, with exactly one :class:`Delivery`:

``DELIVERED``  the server answered the message's data with 2xx: it took responsibility.
               Mark the recipient sent.
``REFUSED``    certainly not delivered. Either the message's data never left this
               process: the connection was refused or failed (connect, greeting, EHLO,
               STARTTLS, login), MAIL FROM, RCPT TO or DATA got 4xx/5xx (what smtplib's
               sendmail would raise as SMTPSenderRefused, SMTPRecipientsRefused,
               SMTPDataError), or the connection was lost before the data was sent. Or the
               server answered the data itself with 4xx/5xx: it declined responsibility.
               Mark the recipient failed; a retry may send to them again.
``UNKNOWN``    the data was handed to the socket but no reply came: the connection was lost
               or the final reply timed out. The server may have taken it. Leave the
               recipient in flight: uncertain, shown to the operator, never re-sent on its
               own (only an explicit operator action resends it).

**The handover's start.** ``send(outgoing, handing_over)`` calls ``handing_over()`` once
the server has taken the envelope and said 354, just before the first byte of the message's
data (the one moment from which the server may have the message): the caller records that
the handover began (:mod:`pubsched.deliveries.deliver` commits a mark fenced by its claim).
Answering False (the claim was lost meanwhile) stops the send before any data goes: the
connection is dropped, which abandons the transaction, and the outcome is ``REFUSED``. So a
crash before the mark is certainly not a delivery (the caller may send again), and a crash
after it is as uncertain as an ``UNKNOWN``.

A crash anywhere in the loop leaves in flight only the recipient being sent (besides any
``UNKNOWN`` ones), exactly as uncertain as an ``UNKNOWN``. ``send`` never retries a message
after its data has been handed over (that retry is the double send); before the handover it
may reconnect once when a reused connection turns out dead or closing (a server dropping an
idle connection, with or without a 421), because nothing was delivered yet. It raises only
for a programming error (no Outcome is owed then: the recipient stays in flight, uncertain,
which is safe). Each reply may take up to ``smtp_timeout``, so one message can take several:
the send lease's TTL should leave room for that, and the fenced writes are what stop a
sender whose lease was taken over meanwhile.

The message goes to ``outgoing.envelope_to`` only (one SMTP recipient per message, so that
each outcome is one recipient's); rehearsal's redirect to the operator was decided once, in
:mod:`pubsched.mail.compose`. With no SMTP host configured, :class:`LogMailer` writes each
message to the log and reports it DELIVERED: there is nothing else that could be done with
it. A session is for one thread; async callers run the batch in a thread
(``asyncio.to_thread``), since smtplib blocks.
"""

from __future__ import annotations

import enum
import logging
import re
import smtplib
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from email.policy import SMTP as SMTP_POLICY
from types import TracebackType
from typing import Protocol, Self

from .compose import Outgoing, Recipient
from .settings import MailSettings

log = logging.getLogger("pubsched.mail")
# Each outcome is the caller's to report (the CLI's one failure line, the week's
# deliveries): with no logging configured, these lines must not reach stderr on their own
# (logging's last resort), one per recipient. An application that configures logging
# (serve, the demo) still gets them.
log.addHandler(logging.NullHandler())

SERVICE_CLOSING = 421  # RFC 5321: the server is closing the connection (e.g. idle too long)
NOT_HANDED = "not handed over: the send's claim was taken over before the message's data"

HandingOver = Callable[[], bool]
"""Called just before the first byte of a message's data; False: do not hand it over."""


class Delivery(enum.Enum):
    """What became of one recipient's message; see the module docstring."""

    DELIVERED = "delivered"
    REFUSED = "refused"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Outcome:
    """One recipient's result. ``detail`` is for the operator and ``last_error`` (the
    server's reply or the error, and at which step); ``smtp_code`` is the server's reply code
    when there was one (4xx: temporary, 5xx: permanent)."""

    recipient: Recipient
    delivery: Delivery
    detail: str
    smtp_code: int | None = None

    @property
    def reached(self) -> bool:
        """The mail server had the message or answered for it (a refusal with a reply
        code; a lost answer after the data): a handover the mail log records. A server
        that could not be reached had nothing handed to it."""
        return self.delivery is not Delivery.REFUSED or self.smtp_code is not None


class MailSession(Protocol):
    """One batch of sends; one connection at most at a time; closed on exit."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def send(self, outgoing: Outgoing, handing_over: HandingOver | None = None) -> Outcome: ...


class Mailer(Protocol):
    def session(self) -> MailSession: ...


def mailer_for(settings: MailSettings) -> Mailer:
    """SMTP when a host is configured, else the log."""
    if settings.smtp_host is None:
        return LogMailer()
    return SmtpMailer(settings)


# -- SMTP ----------------------------------------------------------------------------------


class _NotDelivered(Exception):
    """A step before the handover failed; carries the REFUSED outcome's detail."""

    def __init__(self, detail: str, code: int | None = None):
        super().__init__(detail)
        self.detail = detail
        self.code = code


class SmtpMailer:
    """Sends over SMTP with stdlib ``smtplib``: one connection per session."""

    def __init__(self, settings: MailSettings, *, local_hostname: str | None = None):
        if settings.smtp_host is None:
            raise ValueError("SmtpMailer needs PUBSCHED_SMTP_HOST; use mailer_for(settings)")
        self.settings = settings
        self.local_hostname = local_hostname

    def session(self) -> SmtpSession:
        return SmtpSession(self.settings, local_hostname=self.local_hostname)


class SmtpSession:
    """See the module docstring for the contract of :meth:`send`."""

    def __init__(self, settings: MailSettings, *, local_hostname: str | None = None):
        self._settings = settings
        self._local_hostname = local_hostname
        self._smtp: smtplib.SMTP | None = None
        self._reused = False  # the open connection has carried a message already
        self._cannot_connect: str | None = None  # set once a connect failed: stop trying

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """QUIT politely; every message already has its outcome, so errors do not matter."""
        smtp, self._smtp = self._smtp, None
        if smtp is not None:
            try:
                smtp.quit()
            except (OSError, smtplib.SMTPException):
                smtp.close()

    def send(self, outgoing: Outgoing, handing_over: HandingOver | None = None) -> Outcome:
        payload = _wire_bytes(outgoing)
        try:
            smtp = self._envelope(outgoing, payload)
        except _NotDelivered as refusal:
            outcome = Outcome(outgoing.intended, Delivery.REFUSED, refusal.detail, refusal.code)
            log.warning("mail to %s refused: %s", outgoing.envelope_to, refusal.detail)
            return outcome
        try:
            go = handing_over is None or handing_over()
        except BaseException:
            self._drop()  # mid-DATA: closing abandons the transaction, nothing delivered
            raise
        if not go:
            self._drop()
            log.warning("mail to %s: %s", outgoing.envelope_to, NOT_HANDED)
            return Outcome(outgoing.intended, Delivery.REFUSED, NOT_HANDED)
        # The handover: from the first byte of data on, a missing reply is UNKNOWN.
        try:
            smtp.send(payload)
            code, reply = smtp.getreply()
        except (OSError, smtplib.SMTPException) as exc:
            self._drop()
            detail = f"no reply after the message data was sent: {_describe(exc)}"
            log.error("mail to %s UNKNOWN: %s", outgoing.envelope_to, detail)
            return Outcome(outgoing.intended, Delivery.UNKNOWN, detail)
        self._reused = True
        text = f"{code} {_text(reply)}"
        if 200 <= code < 300:
            log.info("mail to %s delivered: %s", outgoing.envelope_to, text)
            return Outcome(outgoing.intended, Delivery.DELIVERED, text, code)
        self._reset()
        detail = f"message data refused: {text}"
        log.warning("mail to %s refused: %s", outgoing.envelope_to, detail)
        return Outcome(outgoing.intended, Delivery.REFUSED, detail, code)

    def _envelope(self, outgoing: Outgoing, payload: bytes) -> smtplib.SMTP:
        """MAIL FROM, RCPT TO, DATA up to the server's 354: nothing is delivered yet.

        A reused connection that turns out dead, or closing (421), is replaced once: servers
        drop idle connections, and nothing has been handed over yet.
        """
        for attempt in (1, 2):
            smtp = self._connection()
            retry_allowed = self._reused and attempt == 1
            try:
                self._begin_transaction(smtp, outgoing, payload)
            except (OSError, smtplib.SMTPServerDisconnected) as exc:
                self._drop()
                if retry_allowed:
                    continue
                raise _NotDelivered(f"connection lost before the data: {_describe(exc)}") from exc
            except _NotDelivered as refusal:
                if refusal.code == SERVICE_CLOSING and retry_allowed:
                    self._drop()
                    continue
                raise
            except UnicodeEncodeError as exc:  # smtplib encodes a command before sending it
                self._reset()
                raise _NotDelivered(f"address is not ASCII (no SMTPUTF8 here): {exc}") from exc
            return smtp
        raise AssertionError("unreachable")  # pragma: no cover

    def _begin_transaction(self, smtp: smtplib.SMTP, outgoing: Outgoing, payload: bytes) -> None:
        options: list[str] = []
        if not payload.isascii():
            if not smtp.has_extn("8bitmime"):
                raise _NotDelivered("the message is not 7-bit and the server lacks 8BITMIME")
            options.append("BODY=8BITMIME")
        self._expect(smtp.mail(self._settings.mail_from, options), "MAIL FROM", {250})
        self._expect(
            smtp.rcpt(outgoing.envelope_to), f"RCPT TO <{outgoing.envelope_to}>", {250, 251}
        )
        self._expect(smtp.docmd("DATA"), "DATA", {354})

    def _expect(self, answer: tuple[int, bytes], step: str, codes: set[int]) -> None:
        code, reply = answer
        if code not in codes:
            self._reset()
            raise _NotDelivered(f"{step} refused: {code} {_text(reply)}", code)

    def _connection(self) -> smtplib.SMTP:
        if self._cannot_connect is not None:
            raise _NotDelivered(f"not attempted: {self._cannot_connect}")
        if self._smtp is not None:
            return self._smtp
        settings = self._settings
        assert settings.smtp_host is not None  # SmtpMailer refuses a settings without one
        smtp: smtplib.SMTP | None = None
        try:
            trusted = ssl.create_default_context(cafile=settings.smtp_ca_file)
            if settings.smtp_tls == "tls":
                smtp = smtplib.SMTP_SSL(settings.smtp_host, settings.smtp_port,
                                        local_hostname=self._local_hostname,
                                        timeout=settings.smtp_timeout, context=trusted)
            else:
                smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port,
                                    local_hostname=self._local_hostname,
                                    timeout=settings.smtp_timeout)
            smtp.ehlo_or_helo_if_needed()
            if settings.smtp_tls == "starttls":
                smtp.starttls(context=trusted)
                smtp.ehlo()
            if settings.smtp_user is not None and settings.smtp_password is not None:
                smtp.login(settings.smtp_user, settings.smtp_password)
        except (OSError, smtplib.SMTPException) as exc:
            if smtp is not None:
                smtp.close()
            where = f"{settings.smtp_host}:{settings.smtp_port}"
            self._cannot_connect = f"could not connect to {where}: {_describe(exc)}"
            raise _NotDelivered(self._cannot_connect) from exc
        self._smtp, self._reused = smtp, False
        return smtp

    def _reset(self) -> None:
        """RSET after a refusal so the connection can carry the next message; if even that
        fails, drop the connection and let the next send open a new one."""
        if self._smtp is None:
            return
        try:
            code, _ = self._smtp.rset()
        except (OSError, smtplib.SMTPException):
            code = 0
        if code != 250:
            self._drop()
        else:
            self._reused = True

    def _drop(self) -> None:
        smtp, self._smtp = self._smtp, None
        if smtp is not None:
            smtp.close()


def _wire_bytes(outgoing: Outgoing) -> bytes:
    """The message as SMTP DATA: CRLF line ends, leading dots doubled, ended by ``.``."""
    data = outgoing.message.as_bytes(policy=SMTP_POLICY)
    data = re.sub(rb"\r\n|\n|\r", b"\r\n", data)
    data = re.sub(rb"(?m)^\.", b"..", data)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data + b".\r\n"


def _text(reply: bytes | str) -> str:
    said = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
    return said.replace("\n", " ")


def _describe(exc: BaseException) -> str:
    """What went wrong, as an operator can act on it (the week page and ``week show`` show
    it beside the recipient), never a Python class name: the log has the rest."""
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return f"the mail server refused the login ({exc.smtp_code}: {_text(exc.smtp_error)})"
    if isinstance(exc, smtplib.SMTPServerDisconnected):  # its text is smtplib's English
        return "the connection to the mail server was lost" + (f" ({exc})" if str(exc) else "")
    if isinstance(exc, ConnectionRefusedError):
        return "the connection was refused (is the mail server running on that port?)"
    if isinstance(exc, TimeoutError):
        return "the mail server did not answer in time (timed out)"
    if isinstance(exc, socket.gaierror):
        return "the mail server's host name is not known"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"the mail server's certificate was not accepted ({exc.verify_message}): "
                "if it is the pub's own, name its authority in PUBSCHED_SMTP_CA_FILE")
    if isinstance(exc, ssl.SSLError):
        hint = (" (is PUBSCHED_SMTP_TLS right for that port? tls is for 465, starttls for "
                "587)" if exc.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE",
                                          "PACKET_LENGTH_TOO_LONG") else "")
        return f"the secure (TLS) connection failed: {exc.reason or exc}{hint}"
    if isinstance(exc, smtplib.SMTPNotSupportedError) and "STARTTLS" in str(exc):
        return ("the mail server does not offer STARTTLS (STARTTLS extension not supported "
                "by server): if it listens for TLS from the start (port 465), set "
                "PUBSCHED_SMTP_TLS=tls")
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"the mail server said {exc.smtp_code} {_text(exc.smtp_error)}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return str(exc) or "an unexpected error"


# -- no SMTP host: the log -----------------------------------------------------------------


class LogMailer:
    """With no SMTP host, each message is written to the log (logger ``pubsched.mail``, level
    INFO, the whole message) and counts as DELIVERED, so a development setup runs the same
    send action end to end."""

    def session(self) -> LogSession:
        return LogSession()


class LogSession:
    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def send(self, outgoing: Outgoing, handing_over: HandingOver | None = None) -> Outcome:
        if handing_over is not None and not handing_over():
            return Outcome(outgoing.intended, Delivery.REFUSED, NOT_HANDED)
        log.info(
            "mail (no SMTP host configured) to %s for %s:\n%s",
            outgoing.envelope_to,
            outgoing.intended.email,
            outgoing.message.as_string(),
        )
        return Outcome(outgoing.intended, Delivery.DELIVERED, "written to the log (no SMTP host)")
