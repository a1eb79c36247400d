"""``pubsched backup PATH`` and the documented restore (issue 20), on SQLite and PostgreSQL.

The database is backed up mid-week while ``pubsched serve`` serves it and a writer keeps
changing tenders' answers; the backup is restored, exactly as docs/pubsched.md says
(``pubsched restore``, then ``pubsched init``), and the restored database has the sent
week, its deliveries and the open week's submissions, and passes the migrations' check. A
backup never overwrites a file, not even one that appears while it runs (issue 29, item
18: a file put there during ``pg_dump``, two backups to one name); without ``pg_dump`` on
PATH it is refused, naming what to install. The restore's own tests are test_restore.py."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from pubsched.cli.dispatch import run as cli_run
from pubsched.db import open_store
from pubsched.db.backup import BackupRefused, backup
from pubsched.db.migrate import status
from pubsched.engines import actions
from pubsched.engines.flags import set_v2
from pubsched.pub import Pub
from pubsched.week.runs import shifts
from pubsched.week.submissions import submit
from pubsched.week.view import week_show
from support.databases import database_dsn, make_database
from support.pub_engines import EMAILS, NEXT, WEEK, moment
from support.services import free_port, http_answers, wait_for_process
from support.smtp_server import SmtpTestServer

pytestmark = [pytest.mark.pub_setup("engines"),
              pytest.mark.both_databases("pg_dump and pg_restore, or SQLite's backup API")]
PUBSCHED = Path(sys.executable).parent / "pubsched"


def sent_and_open(pub: Pub) -> None:
    """WEEK sent (every tender offered everything, so everyone has a delivery); NEXT open
    with two answers."""
    set_v2(pub, True)
    at = moment(pub, WEEK, "opens_at")
    assert actions.perform(pub, "open", WEEK, now=at)
    ids = [s.id for s in shifts(pub, WEEK)]
    for email in EMAILS:
        assert submit(pub, WEEK, email, ids, now=at)
    for step in ("close", "generate", "approve", "send"):
        assert actions.perform(pub, step, WEEK, now=at + timedelta(days=3)), step
    opens = moment(pub, NEXT, "opens_at")
    assert actions.perform(pub, "open", NEXT, now=opens)
    first = [s.id for s in shifts(pub, NEXT)][:1]
    for email in EMAILS[:2]:
        assert submit(pub, NEXT, email, first, now=opens)


def serving(url: str, tmp_path: Path) -> subprocess.Popen[str]:
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")},
           "PUBSCHED_DB": url, "PUBSCHED_ADMIN_PASSWORD": "a long password",
           "PUBSCHED_INSECURE_COOKIES": "1"}
    server = subprocess.Popen([str(PUBSCHED), "serve", "--port", str(port)], cwd=tmp_path,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    wait_for_process(server, lambda: http_answers(f"http://127.0.0.1:{port}/healthz"),
                     "pubsched serve")
    return server


def restored(url: str, backup_path: Path, tmp_path: Path, request: pytest.FixtureRequest,
             ) -> str:
    """The backup restored as docs/pubsched.md's "Backups" says (``pubsched restore``, into
    a new database here: a new file, or a new empty PostgreSQL database); its URL."""
    if url.startswith("sqlite:"):
        new_url = f"sqlite:///{tmp_path / 'restored.db'}"
    else:
        admin: str = request.getfixturevalue("pg_admin_dsn")
        name = make_database(admin, prefix="rs_restored_")
        request.addfinalizer(lambda: request.getfixturevalue("pg_dropper").drop(name))
        new_url = database_dsn(admin, name)
    done = subprocess.run([str(PUBSCHED), "--db", new_url, "restore", str(backup_path),
                           "--yes"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    init = subprocess.run([str(PUBSCHED), "--db", new_url, "init"], capture_output=True,
                          text=True, timeout=120)
    assert init.returncode == 0 and "up to date" in init.stdout, init.stdout + init.stderr
    return new_url


def test_a_served_database_backed_up_mid_week_restores_whole(
        pub: Pub, db_url: str, smtp: SmtpTestServer, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    sent_and_open(pub)
    ids = [s.id for s in shifts(pub, NEXT)]
    stop = threading.Event()
    writes: list[int] = []
    errors: list[BaseException] = []

    def writer() -> None:  # a tender changing their answer again and again meanwhile
        at = moment(pub, NEXT, "opens_at", 60)
        try:
            while not stop.is_set():
                chosen = ids[: 1 + len(writes) % len(ids)]
                assert submit(pub, NEXT, EMAILS[2], chosen, now=at)
                writes.append(len(chosen))
        except BaseException as exc:
            errors.append(exc)

    server = serving(db_url, tmp_path)
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(writes) < 3 and not errors:
            time.sleep(0.01)
        path = tmp_path / "pub-backup"
        done = subprocess.run([str(PUBSCHED), "--db", db_url, "backup", str(path)],
                              capture_output=True, text=True, timeout=300)
        while len(writes) < 6 and not errors:  # the writer went on during and after it
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
        server.send_signal(signal.SIGTERM)
        served, _ = server.communicate(timeout=30)
    assert errors == [] and "Traceback" not in served, served
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("backed up ") and str(path) in done.stdout
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds everything the pub knows
    assert [p.name for p in tmp_path.iterdir() if ".partial-" in p.name] == []

    new_url = restored(db_url, path, tmp_path, request)
    assert all(applied for _, applied in status(new_url))
    back = Pub(open_store(new_url), pub.config)
    try:
        original = week_show(pub, WEEK)
        copy = week_show(back, WEEK)
        assert copy["state"] == "SENT"
        assert copy["shifts"] == original["shifts"]
        assert sorted(d["email"] for d in copy["deliveries"]) == sorted(
            d["email"] for d in original["deliveries"]) and len(copy["deliveries"]) >= 1
        assert all(d["status"] == "sent" for d in copy["deliveries"])
        answers = {s["email"] for s in week_show(back, NEXT)["submissions"]}
        assert week_show(back, NEXT)["state"] == "COLLECTING"
        assert set(EMAILS[:2]) <= answers  # the answers from before the backup
        assert len(back.query("SELECT * FROM rowstate_events")) >= len(original["history"])
    finally:
        back.close()


def test_a_backup_never_overwrites_a_file(db_url: str, tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("an older backup", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(["--db", db_url, "backup", str(target)], stdout=out, stderr=err)
    assert code == 3 and "exists already" in err.getvalue(), (code, err.getvalue())
    assert target.read_text(encoding="utf-8") == "an older backup"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@contextlib.contextmanager
def copies_held(url: str) -> Iterator[None]:
    """While inside, every backup of ``url`` waits in its copy: SQLite's online backup for
    the read lock this connection holds exclusively; pg_dump for its lock on a table."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("SELECT count(*) FROM pub_tenders").fetchall()
        try:
            yield
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(url) as pg:
        pg.execute("LOCK TABLE pub_tenders IN ACCESS EXCLUSIVE MODE")
        yield
        pg.rollback()


def started(path: Path, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(PUBSCHED), "--db", url, "backup", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def copying(folder: Path, n: int, children: list[subprocess.Popen[str]]) -> None:
    """Wait until ``n`` backups have their temporary file (they are inside the copy)."""
    until = time.monotonic() + 60
    while len([p for p in folder.iterdir() if ".partial-" in p.name]) < n:
        assert all(c.poll() is None for c in children) and time.monotonic() < until
        time.sleep(0.02)


def test_a_file_put_at_the_target_while_the_copy_runs_is_kept(db_url: str,
                                                              tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    target = folder / "pub.backup"
    with copies_held(db_url):
        child = started(target, db_url)
        copying(folder, 1, [child])
        target.write_text("someone else's file", encoding="utf-8")
    out, err = child.communicate(timeout=120)
    assert child.returncode == 1, out + err
    assert "was created by someone else while this backup ran" in err
    assert "it is kept as it is, and this backup was not written" in err
    assert target.read_text(encoding="utf-8") == "someone else's file"
    assert [p.name for p in folder.iterdir()] == ["pub.backup"]


def test_of_two_backups_to_one_name_at_once_one_succeeds(db_url: str,
                                                         tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    target = folder / "pub.backup"
    with copies_held(db_url):
        children = [started(target, db_url) for _ in range(2)]
        copying(folder, 2, children)  # both are inside their copy: a real race
    outputs = [c.communicate(timeout=120) for c in children]
    results = [(c.returncode, out, err) for c, (out, err) in zip(children, outputs,
                                                                 strict=True)]
    assert sorted(code for code, _, _ in results) == [0, 1], results
    (_, won, _), = [r for r in results if r[0] == 0]
    (_, _, lost), = [r for r in results if r[0] == 1]
    assert won.startswith("backed up ") and "was created by someone else" in lost
    assert [p.name for p in folder.iterdir()] == ["pub.backup"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    if db_url.startswith("sqlite:"):
        with contextlib.closing(sqlite3.connect(f"file:{target}?mode=ro", uri=True)) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    else:
        assert subprocess.run(["pg_restore", "--list", str(target)],
                              capture_output=True).returncode == 0


def test_without_pg_dump_the_backup_is_refused_naming_it(
        pg_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # a machine with no PostgreSQL client tools
    assert shutil.which("pg_dump") is None
    with pytest.raises(BackupRefused, match="pg_dump is not installed: install PostgreSQL"):
        backup(pg_db_url, tmp_path / "pub.dump")
    assert list(tmp_path.iterdir()) == [empty]


def test_an_in_memory_or_missing_database_has_nothing_to_back_up(tmp_path: Path) -> None:
    with pytest.raises(BackupRefused, match="in-memory"):
        backup("sqlite://", tmp_path / "a")
    with pytest.raises(BackupRefused, match="no database at"):
        backup(f"sqlite:///{tmp_path}/none.db", tmp_path / "b")
    assert list(tmp_path.iterdir()) == []


def test_the_password_stays_out_of_pg_dumps_arguments() -> None:
    from pubsched.db.pgtools import without_password as _without_password

    url, password = _without_password("postgresql://pub:s%40cret@[::1]:5433/pub?sslmode=off")
    assert (url, password) == ("postgresql://pub@[::1]:5433/pub?sslmode=off", "s@cret")
    assert _without_password("postgresql://pub@db/pub") == ("postgresql://pub@db/pub", None)
    # a cluster's nodes (docs/scale.md): the hosts as written, in either of libpq's forms
    cluster = "postgresql://pub:pw@db1:5432,db2:5433/pub?target_session_attrs=read-write"
    assert _without_password(cluster) == (
        "postgresql://pub@db1:5432,db2:5433/pub?target_session_attrs=read-write", "pw")
    url, password = _without_password("host=db1,db2 port=5432,5433 password='p w' dbname=pub")
    assert password == "p w" and "password" not in url and "host=db1,db2" in url
