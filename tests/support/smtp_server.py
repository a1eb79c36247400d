"""A real SMTP server on loopback for tests: aiosmtpd in a thread, with faults on demand.

Reuse it in any test (the full-lifecycle test too) with a three-line fixture::

    from support.smtp_server import SmtpTestServer

    @pytest.fixture
    def smtp_server() -> Iterator[SmtpTestServer]:
        with SmtpTestServer() as server:
            yield server

then point pubsched at it with ``load_mail_settings(smtp_server.env(PUBSCHED_...=...))``.

What it records: every message whose data arrived, as :class:`ReceivedMail` (envelope and
parsed message, and the reply the server gave it), in ``server.received``; ``accepted`` is
the subset answered 250, i.e. what a real server would deliver. Every call is thread-safe
(the server runs its own event loop in a thread).

Faults, each lasting until :meth:`clear_faults` (``for_recipient`` limits a data fault to
messages whose envelope holds that address; None: every message):

``refuse_recipient(addr)``        RCPT TO addr -> 550 (the client sees REFUSED)
``refuse_sender(code, times)``    the next ``times`` MAIL FROM (None: all) -> ``code``; a 421
                                  also closes the connection, as a server that timed out an
                                  idle connection does (RFC 5321 4.2.2)
``fail_data(code=451)``           the data's final reply is ``code`` (REFUSED)
``drop_after_data()``             the data is received (and recorded), then the connection
                                  is closed with no reply (UNKNOWN)
``hang_after_data()``             the data is received, then no reply ever (UNKNOWN once the
                                  client's timeout passes; keep PUBSCHED_SMTP_TIMEOUT small)
``release_hung()``                the connections hanging now are closed, as a drop closes
                                  them (UNKNOWN too): a test that has seen what it needed
                                  while a send hung need not wait for the client's timeout
``delay_data(seconds)``           the data's reply comes that long after the data (a busy
                                  server): a send spends its time waiting for the answer
``on_recipient(hook)``,           ``hook(address)`` is called as RCPT TO arrives (before
``on_data(hook)``                 its reply), or ``hook(recipients)`` once a message's data
                                  is recorded (before its reply), in the server's thread:
                                  what a test does to the sender's world at that moment
``stop()`` / ``start()``          stopped: the port is closed, connections are refused
                                  (REFUSED); started again on the same port

``SmtpTestServer(credentials=("user", "password"))`` offers AUTH (PLAIN, LOGIN; no TLS on
loopback) and answers MAIL FROM with 530 until the client has logged in with exactly those.

``SmtpTestServer(tls="tls", certificate=cert)`` speaks TLS from the first byte (port 465's
way); ``tls="starttls"`` offers STARTTLS and refuses everything else until the client has
used it (587's way). ``cert`` is a :class:`support.tls.Certificate` (a self-signed one made
with openssl); each :class:`ReceivedMail` says whether it came ``secure``.

The port is chosen by the OS when first started (bound to 0, then kept), so parallel test
runs never collide.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from types import TracebackType
from typing import Any, Literal, Self

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from support.tls import Certificate

HOST = "127.0.0.1"


@dataclass(frozen=True)
class ReceivedMail:
    """One message whose data reached the server."""

    mail_from: str
    rcpt_tos: tuple[str, ...]
    message: EmailMessage  # parsed with email.policy.default, line ends as LF
    raw: bytes  # as it came over the wire (CRLF), dot-unstuffed
    reply: str  # "250 OK", "451 ...", "dropped" or "no reply"
    secure: bool = False  # it came over TLS (implicit or after STARTTLS)

    @property
    def accepted(self) -> bool:
        return self.reply.startswith("250")


@dataclass
class _Faults:
    refused_recipients: set[str] = field(default_factory=set)
    sender_reply: str | None = None
    sender_times: int | None = None  # None: every MAIL FROM
    data_reply: dict[str | None, str] = field(default_factory=dict)  # recipient -> reply
    drop: set[str | None] = field(default_factory=set)
    hang: set[str | None] = field(default_factory=set)
    data_delay: float = 0.0
    on_recipient: Callable[[str], None] | None = None
    on_data: Callable[[tuple[str, ...]], None] | None = None


class _RecordingHandler:
    def __init__(self, owner: SmtpTestServer):
        self._owner = owner

    async def handle_MAIL(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        if self._owner.credentials is not None and not session.authenticated:
            return "530 5.7.0 Authentication required (test server)"
        refusal = self._owner._sender_refusal()
        if refusal is not None:
            if refusal.startswith("421"):  # closes once the reply has been written
                assert server.transport is not None
                asyncio.get_running_loop().call_soon(server.transport.close)
            return refusal
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        self._owner._hook("on_recipient", address)
        if self._owner._refuses(address):
            return f"550 5.1.1 <{address}>: recipient refused (test server)"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        rcpt_tos = tuple(envelope.rcpt_tos)
        action = self._owner._data_action(rcpt_tos)
        reply = {"drop": "dropped", "hang": "no reply"}.get(action, action)
        secure = session.ssl is not None or (
            server.transport is not None
            and server.transport.get_extra_info("sslcontext") is not None)
        self._owner._record(envelope, rcpt_tos, reply, secure)
        self._owner._hook("on_data", rcpt_tos)
        if (delay := self._owner._faults.data_delay) > 0:
            await asyncio.sleep(delay)
        if action == "drop":
            assert isinstance(server.transport, asyncio.Transport)
            server.transport.abort()  # connection_lost() then cancels this coroutine
        if action == "hang":
            assert isinstance(server.transport, asyncio.Transport)
            self._owner._hanging(asyncio.get_running_loop(), server.transport)
        if action in ("drop", "hang"):
            await asyncio.get_running_loop().create_future()  # never answered
        return action


class _EphemeralPortController(Controller):
    """aiosmtpd's Controller, but bound to a port the OS picks, which it then keeps."""

    def _create_server(self) -> Awaitable[asyncio.AbstractServer]:
        create = super()._create_server()

        async def created() -> asyncio.AbstractServer:
            server = await create
            assert isinstance(server, asyncio.Server)
            self.port = server.sockets[0].getsockname()[1]
            return server

        return created()


class SmtpTestServer:
    """See the module docstring. ``host``/``port`` are where it listens."""

    host = HOST

    def __init__(self, *, credentials: tuple[str, str] | None = None,
                 tls: Literal["starttls", "tls"] | None = None,
                 certificate: Certificate | None = None) -> None:
        if (tls is None) != (certificate is None):
            raise ValueError("tls= and certificate= go together")
        self.credentials = credentials
        self.tls = tls
        self._context: ssl.SSLContext | None = None
        if certificate is not None:
            self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._context.load_cert_chain(certificate.cert, certificate.key)
        self._lock = threading.Lock()
        self._received: list[ReceivedMail] = []
        self._hung: list[tuple[asyncio.AbstractEventLoop, asyncio.Transport]] = []
        self._faults = _Faults()
        self._port = 0  # 0 until first started: the OS picks one, which is then kept
        self._controller: _EphemeralPortController | None = None

    # -- life --------------------------------------------------------------------------

    def start(self) -> None:
        """Listen (again). A stopped Controller's loop is closed, so each start makes one."""
        if self._controller is None:
            secured: dict[str, Any] = {}
            if self.tls == "tls":
                secured = {"ssl_context": self._context}
            elif self.tls == "starttls":
                secured = {"tls_context": self._context, "require_starttls": True}
            controller = _EphemeralPortController(
                _RecordingHandler(self),
                hostname=HOST,
                port=self._port,
                server_hostname="smtp.test",
                authenticator=self._authenticate,
                # AUTH without TLS on loopback; AUTH is offered, not required by aiosmtpd
                # (requiring it without TLS warns), so handle_MAIL enforces it instead.
                auth_require_tls=False,
                **secured,
            )
            controller.start()
            self._controller, self._port = controller, controller.port

    def stop(self) -> None:
        """Close the port: a connection attempt is then refused. ``start()`` reopens it."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("the test server has no port before its first start()")
        return self._port

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for ``load_mail_settings``: this server as PUBSCHED_SMTP_HOST/PORT,
        plus ``extra`` (e.g. ``PUBSCHED_OPERATOR_EMAIL="ops@example.com"``)."""
        return {"PUBSCHED_SMTP_HOST": self.host, "PUBSCHED_SMTP_PORT": str(self.port), **extra}

    # -- what arrived --------------------------------------------------------------------

    @property
    def received(self) -> list[ReceivedMail]:
        with self._lock:
            return list(self._received)

    @property
    def accepted(self) -> list[ReceivedMail]:
        return [mail for mail in self.received if mail.accepted]

    def accepted_for(self, address: str) -> list[ReceivedMail]:
        """Accepted messages whose envelope holds ``address`` (case-insensitive)."""
        wanted = address.lower()
        return [m for m in self.accepted if wanted in (r.lower() for r in m.rcpt_tos)]

    def clear_received(self) -> None:
        with self._lock:
            self._received.clear()

    # -- faults --------------------------------------------------------------------------

    def refuse_recipient(self, address: str) -> None:
        with self._lock:
            self._faults.refused_recipients.add(address.lower())

    def refuse_sender(self, code: int = 421, *, times: int | None = None) -> None:
        text = {421: "4.4.2 idle too long, closing"}.get(code, "sender refused")
        with self._lock:
            self._faults.sender_reply = f"{code} {text} (test server)"
            self._faults.sender_times = times

    def fail_data(self, code: int = 451, *, for_recipient: str | None = None) -> None:
        text = "4.3.0 try again later" if code < 500 else "5.6.0 message refused"
        with self._lock:
            self._faults.data_reply[_key(for_recipient)] = f"{code} {text} (test server)"

    def drop_after_data(self, *, for_recipient: str | None = None) -> None:
        with self._lock:
            self._faults.drop.add(_key(for_recipient))

    def hang_after_data(self, *, for_recipient: str | None = None) -> None:
        with self._lock:
            self._faults.hang.add(_key(for_recipient))

    def delay_data(self, seconds: float) -> None:
        with self._lock:
            self._faults.data_delay = seconds

    def on_recipient(self, hook: Callable[[str], None] | None) -> None:
        with self._lock:
            self._faults.on_recipient = hook

    def on_data(self, hook: Callable[[tuple[str, ...]], None] | None) -> None:
        with self._lock:
            self._faults.on_data = hook

    def clear_faults(self) -> None:
        with self._lock:
            self._faults = _Faults()

    def release_hung(self) -> None:
        """Close every connection hanging after its data now (the client sees it lost)."""
        with self._lock:
            hung, self._hung = self._hung, []
        for loop, transport in hung:
            loop.call_soon_threadsafe(transport.abort)

    # -- called by the handler, in the server's thread -----------------------------------

    def _authenticate(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        mechanism: str,
        auth_data: object,
    ) -> AuthResult:
        wanted = self.credentials
        ok = (
            wanted is not None
            and isinstance(auth_data, LoginPassword)
            and (auth_data.login, auth_data.password) == (wanted[0].encode(), wanted[1].encode())
        )
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535

    def _sender_refusal(self) -> str | None:
        with self._lock:
            faults = self._faults
            if faults.sender_reply is None or faults.sender_times == 0:
                return None
            if faults.sender_times is not None:
                faults.sender_times -= 1
            return faults.sender_reply

    def _hook(self, name: str, arg: Any) -> None:
        with self._lock:
            hook = getattr(self._faults, name)
        if hook is not None:
            hook(arg)

    def _refuses(self, address: str) -> bool:
        with self._lock:
            return address.lower() in self._faults.refused_recipients

    def _data_action(self, rcpt_tos: tuple[str, ...]) -> str:
        """``drop``, ``hang``, or the reply to give the data."""
        keys = [None, *(r.lower() for r in rcpt_tos)]
        with self._lock:
            faults = self._faults
            if any(k in faults.drop for k in keys):
                return "drop"
            if any(k in faults.hang for k in keys):
                return "hang"
            for k in keys:
                if k in faults.data_reply:
                    return faults.data_reply[k]
        return "250 OK"

    def _hanging(self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport) -> None:
        with self._lock:
            self._hung.append((loop, transport))

    def _record(self, envelope: Envelope, rcpt_tos: tuple[str, ...], reply: str,
                secure: bool = False) -> None:
        raw: Any = envelope.original_content or envelope.content or b""
        raw_bytes = raw if isinstance(raw, bytes) else str(raw).encode()
        # parsed as a mail store would hold it: line ends as LF, not the wire's CRLF
        parsed = message_from_bytes(raw_bytes.replace(b"\r\n", b"\n"), policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        mail = ReceivedMail(str(envelope.mail_from), rcpt_tos, parsed, raw_bytes, reply,
                            secure)
        with self._lock:
            self._received.append(mail)


def _key(recipient: str | None) -> str | None:
    return None if recipient is None else recipient.lower()
