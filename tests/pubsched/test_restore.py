"""``pubsched restore PATH [--yes]`` (issue 29, item 7), for real on SQLite and PostgreSQL.

The reported bug: after a crash, ``cp backup pub.db`` left the old ``pub.db-wal`` beside the
copy, and SQLite replayed it: the "restored" database had the writes made after the backup.
Here a writer is SIGKILLed with its write in the log, the ``cp`` is shown to replay it, and
``pubsched restore`` gives the backup exactly. The restore refuses while the database is in
use (a running ``serve``; a ``tick`` hung on the mail server), refuses what is not a
pubsched backup or was made by newer code, restores an older backup that ``init`` then
brings up to date, and asks first on a terminal (refusing when not on one)."""

from __future__ import annotations

import io
import os
import pty
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pubsched.cli.dispatch import run as cli_run
from pubsched.config import Config
from pubsched.db import open_store
from pubsched.db.backup import backup
from pubsched.db.migrate import migrate
from pubsched.deliveries import outbox
from pubsched.people import invite, tenders
from pubsched.pub import Pub
from support.databases import database_dsn, make_database
from support.pubs import NOW, make_pub
from support.services import free_port, http_answers, wait_for_process
from support.smtp_server import SmtpTestServer

PUBSCHED = Path(sys.executable).parent / "pubsched"
BOTH = pytest.mark.both_databases("pg_restore --clean and pg_stat_activity, or SQLite's "
                                  "files and locks")


def cli(url: str, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """The real console script in a process of its own (a lock is per process)."""
    return subprocess.run([str(PUBSCHED), "--db", url, *args], capture_output=True, text=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL)


def names(url: str) -> list[str]:
    pub = Pub(open_store(url), Config(db_url=url))
    try:
        return sorted(t.name for t in tenders.all_tenders(pub))
    finally:
        pub.close()


def with_tenders(url: str, *who: str) -> None:
    pub = make_pub(url)
    try:
        for name in who:
            assert tenders.add(pub, name, f"{name.lower()}@pub.test", now=NOW)
    finally:
        pub.close()


def db_file(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


WRITE_AND_DIE = """
import os, signal, sys
from pubsched.db import open_store
from pubsched.config import Config
from pubsched.people import tenders
from pubsched.pub import Pub
pub = Pub(open_store(sys.argv[1]), Config(db_url=sys.argv[1]))
assert tenders.add(pub, "Zed", "zed@pub.test")
os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint: the write is in the -wal
"""


def test_a_crash_left_wal_is_not_replayed_into_the_restored_database(
        db_url: str, tmp_path: Path) -> None:
    with_tenders(db_url, "Ann", "Bob")
    saved = tmp_path / "before.backup"
    backup(db_url, saved)
    killed = subprocess.run([sys.executable, "-c", WRITE_AND_DIE, db_url], timeout=60)
    assert killed.returncode == -signal.SIGKILL
    path = db_file(db_url)
    log = Path(f"{path}-wal")
    assert log.stat().st_size > 0  # the crash left Zed in the write-ahead log only

    # what the docs said before: cp the backup over the file, and the old log replays
    by_hand = tmp_path / "cp"
    by_hand.mkdir()
    for f in (path, log, Path(f"{path}-shm")):
        shutil.copy(f, by_hand / f.name)
    shutil.copy(saved, by_hand / path.name)
    assert "Zed" in names(f"sqlite:///{by_hand / path.name}")

    done = cli(db_url, "restore", str(saved), "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"restored {path}") and "at migration 0" in done.stdout
    assert not log.exists() and not Path(f"{path}-shm").exists()
    assert names(db_url) == ["Ann", "Bob"]  # the backup, exactly: no Zed
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if ".restore-" in p.name] == []
    assert cli(db_url, "tender", "list").returncode == 0  # the pub runs on it


def serving(url: str, folder: Path) -> subprocess.Popen[str]:
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")},
           "PUBSCHED_DB": url, "PUBSCHED_ADMIN_PASSWORD": "a long password",
           "PUBSCHED_INSECURE_COOKIES": "1"}
    server = subprocess.Popen([str(PUBSCHED), "serve", "--port", str(port)], cwd=folder,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    wait_for_process(server, lambda: http_answers(f"http://127.0.0.1:{port}/healthz"),
                     "pubsched serve")
    return server


@BOTH
def test_a_running_serve_makes_the_restore_refuse(db_url: str, tmp_path: Path) -> None:
    with_tenders(db_url, "Ann")
    saved = tmp_path / "ann.backup"
    backup(db_url, saved)
    with_tenders(db_url, "Bob")
    server = serving(db_url, tmp_path)
    try:
        refused = cli(db_url, "restore", str(saved), "--yes")
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
    assert refused.returncode == 3, refused.stderr
    assert "is in use" in refused.stderr
    assert "stop `pubsched serve` and the tick's timer" in refused.stderr
    assert "nothing was changed" in refused.stderr
    assert names(db_url) == ["Ann", "Bob"]
    done = cli(db_url, "restore", str(saved), "--yes")  # stopped: now it goes
    assert done.returncode == 0, done.stderr
    assert names(db_url) == ["Ann"]


def test_a_tick_hung_on_the_mail_server_makes_the_restore_refuse(
        db_url: str, tmp_path: Path, smtp: SmtpTestServer) -> None:
    with_tenders(db_url, "Ann")
    saved = tmp_path / "ann.backup"
    backup(db_url, saved)
    pub = make_pub(db_url)
    try:  # an invitation owed by a run that crashed before sending it: the tick's to send
        ann = tenders.get(pub, "ann@pub.test")
        with pub.atomic():
            outbox.owe(pub, invite.KIND, "a-crashed-run", outbox.to_tender(ann.id),
                       week_of=None, now=NOW)
    finally:
        pub.close()
    smtp.hang_after_data()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")},
           **smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test", PUBSCHED_SMTP_TIMEOUT="20",
                      PUBSCHED_BASE_URL="https://pub.example")}
    tick = subprocess.Popen([str(PUBSCHED), "--db", db_url, "tick"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        until = time.monotonic() + 60
        while not smtp.received:  # the tick is inside its SMTP session now
            assert tick.poll() is None and time.monotonic() < until, tick.communicate()
            time.sleep(0.02)
        refused = cli(db_url, "restore", str(saved), "--yes")
    finally:
        smtp.release_hung()
        tick.communicate(timeout=60)
    assert refused.returncode == 3 and "is in use" in refused.stderr, refused.stderr
    assert cli(db_url, "restore", str(saved), "--yes").returncode == 0


@BOTH
def test_an_older_backup_is_restored_and_init_brings_it_up_to_date(
        db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A backup made before the code's last migrations: the current database has tables the
    backup lacks (on PostgreSQL they would survive --clean and break `init`)."""
    if db_url.startswith("sqlite:"):
        old_url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        admin: str = request.getfixturevalue("pg_admin_dsn")
        name = make_database(admin, prefix="rs_old_")
        request.addfinalizer(lambda: request.getfixturevalue("pg_dropper").drop(name))
        old_url = database_dsn(admin, name)
    migrate(old_url, to="0047")
    saved = tmp_path / "old.backup"
    backup(old_url, saved)
    with_tenders(db_url, "Bob")
    done = cli(db_url, "restore", str(saved), "--yes")
    assert done.returncode == 0, done.stderr
    assert "at migration 0047" in done.stdout
    assert "older than this code: run `pubsched init` to apply 0048, 0049" in done.stdout
    assert cli(db_url, "tender", "list").returncode == 2  # not before `init`
    init = cli(db_url, "init")
    assert init.returncode == 0, init.stderr
    assert names(db_url) == []


@BOTH
def test_what_is_not_a_pubsched_backup_or_is_newer_is_refused_untouched(
        db_url: str, tmp_path: Path) -> None:
    with_tenders(db_url, "Ann")
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database\n" * 100, encoding="utf-8")
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    newer = tmp_path / "newer.backup"
    pub = make_pub(db_url)
    try:  # a backup of a database a newer pubsched migrated
        with pub.atomic() as tx:
            tx.execute("INSERT INTO pubsched_migrations (version, name, checksum, applied_at) "
                       "VALUES ('9999', 'future', 'x', %s)", [NOW])
        backup(db_url, newer)
        with pub.atomic() as tx:
            tx.execute("DELETE FROM pubsched_migrations WHERE version = '9999'")
    finally:
        pub.close()
    says = {junk: "is not a", empty: "is not a", newer: "9999",
            tmp_path / "missing": "there is no backup at"}
    for path, words in says.items():
        out, err = io.StringIO(), io.StringIO()
        code = cli_run(["--db", db_url, "restore", str(path), "--yes"], stdout=out,
                       stderr=err)
        assert code == 3 and words in err.getvalue(), (path, err.getvalue())
        assert "Traceback" not in err.getvalue()
    assert "newer code" in cli(db_url, "restore", str(newer), "--yes").stderr
    assert names(db_url) == ["Ann"]


def test_without_yes_it_asks_on_a_terminal_and_refuses_off_one(
        db_url: str, tmp_path: Path) -> None:
    with_tenders(db_url, "Ann")
    saved = tmp_path / "ann.backup"
    backup(db_url, saved)
    with_tenders(db_url, "Bob")
    piped = cli(db_url, "restore", str(saved))  # stdin is not a terminal
    assert piped.returncode == 2 and "run it on a terminal to be asked, or add --yes" \
        in piped.stderr
    for answer, code, left in (("no", 3, ["Ann", "Bob"]), ("yes", 0, ["Ann"])):
        leader, follower = pty.openpty()
        asked = subprocess.Popen([str(PUBSCHED), "--db", db_url, "restore", str(saved)],
                                 stdin=follower, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        os.close(follower)
        os.write(leader, f"{answer}\n".encode())
        _out, err = asked.communicate(timeout=60)
        os.close(leader)
        assert asked.returncode == code, err
        assert "Replace" in err and "Everything written to it since that backup is lost" in err
        assert code == 0 or "not restored: the answer was not yes; nothing was changed" in err
        assert names(db_url) == left


def test_a_target_that_cannot_be_replaced_fails_in_words(db_url: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    saved = tmp_path / "pub.backup"
    backup(db_url, saved)
    folder = tmp_path / "taken.db"
    folder.mkdir()  # a directory where the database file should be
    code = cli_run(["--db", f"sqlite:///{folder}", "restore", str(saved), "--yes"],
                   stdout=io.StringIO(), stderr=sys.stderr)
    err = capsys.readouterr().err
    assert code == 1 and "restore failed: Is a directory" in err, err
    assert "the database was not replaced" in err and folder.is_dir()
    assert [p.name for p in tmp_path.iterdir() if ".restore-" in p.name] == []
