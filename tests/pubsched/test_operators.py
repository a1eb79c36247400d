"""Operator accounts (issue 18): ``pubsched operator add|list|remove`` and the domain under
it (:mod:`pubsched.people.operators`), on SQLite (PostgreSQL where marked). Bad input exits
2 and writes nothing (every table compared before and after); a duplicate exits 3 with its reason.
The terminal path (asked twice, unechoed) runs the console script in a real pty."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from argon2 import PasswordHasher

from pubsched.cli.dispatch import run as cli_run
from pubsched.db import open_store
from pubsched.people import operators
from pubsched.pub import Pub
from pubsched.verdicts import BadInput

GOOD = "correct horse battery"
FAST = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
T0 = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
TABLES = ("pub_operators", "pub_tenders", "pub_schedule_runs", "rowstate_events")


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli(url: str, *argv: str, stdin: str = "", user: str = "ann") -> Ran:
    """``pubsched --db URL ...`` in-process, with its own environment and streams."""
    out, err = io.StringIO(), io.StringIO()
    env = {"USER": user, "PATH": os.environ.get("PATH", "")}
    code = cli_run(["--db", url, *argv], environ=env, stdout=out, stderr=err,
                   stdin=io.StringIO(stdin))
    return Ran(code, out.getvalue(), err.getvalue())


def snapshot(url: str) -> dict[str, list[str]]:
    store = open_store(url)
    try:
        with store.atomic() as tx:
            return {t: sorted(map(repr, tx.execute(f"SELECT * FROM {t}"))) for t in TABLES}
    finally:
        store.close()


@pytest.fixture
def pub(db_url: str) -> Any:
    made = Pub(open_store(db_url))
    yield made
    made.close()


# -- the CLI ------------------------------------------------------------------------------


@pytest.mark.both_databases("the accounts' inserts, reads and deletes")
def test_add_list_remove_round_trip(db_url: str, pub: Pub) -> None:
    added = cli(db_url, "operator", "add", " Ann@Pub.example ", "--password-stdin",
                stdin=GOOD + "\n")
    assert (added.code, added.out.strip()) == (0, "added operator Ann@Pub.example"), added
    listed = cli(db_url, "operator", "list", "--json")
    assert listed.code == 0
    (row,) = listed.json()
    assert set(row) == {"id", "email", "created_at", "last_login_at"}
    assert row["email"] == "Ann@Pub.example" and row["last_login_at"] is None
    assert datetime.fromisoformat(row["created_at"].replace("Z", "+00:00")).tzinfo is not None
    stored = pub.query("SELECT email_key, password_hash FROM pub_operators")
    assert stored[0]["email_key"] == "ann@pub.example"
    assert stored[0]["password_hash"].startswith("$argon2id$")
    assert GOOD not in stored[0]["password_hash"]
    table = cli(db_url, "operator", "list")
    assert "Ann@Pub.example" in table.out and "never" in table.out
    assert "EST" in table.out or "EDT" in table.out  # the pub's own time, with its zone
    # the password is the line without its newline, nothing more stripped
    assert operators.verify(pub, "ann@pub.example", GOOD + "\n") is None
    assert operators.verify(pub, "ann@pub.example", GOOD) is not None
    assert "never" not in cli(db_url, "operator", "list").out  # the login is stamped
    removed = cli(db_url, "operator", "remove", "ANN@pub.example")
    assert removed.code == 0 and "removed operator" in removed.out
    assert "no operator accounts are left" in removed.out  # allowed here, and said
    assert cli(db_url, "operator", "list", "--json").json() == []
    assert "no operator accounts yet" in cli(db_url, "operator", "list").out


def test_a_duplicate_in_any_case_is_refused_with_exit_3_and_nothing_written(
        db_url: str) -> None:
    assert cli(db_url, "operator", "add", "ann@pub.example", "--password-stdin",
               stdin=GOOD).code == 0
    before = snapshot(db_url)
    again = cli(db_url, "operator", "add", "ANN@Pub.Example", "--password-stdin",
                stdin="another password here")
    assert again.code == 3, again
    assert "OPERATOR_EXISTS" in again.err and len(again.err.strip().splitlines()) == 1
    assert snapshot(db_url) == before


@pytest.mark.parametrize(("argv", "stdin", "said"), [
    (("ann@pub.example", "--password-stdin"), "short\n", "at least 12 characters"),
    (("ann@pub.example", "--password-stdin"), "eleven char\n", "at least 12 characters"),
    (("ann@pub.example", "--password-stdin"), "x" * 1025 + "\n", "at most 1024"),
    (("ann@pub.example", "--password-stdin"), "", "standard input was empty"),
    (("ann@pub.example",), GOOD + "\n", "pass --password-stdin"),  # not a terminal
    (("not an address", "--password-stdin"), GOOD + "\n", "not an email address"),
    (("admin", "--password-stdin"), GOOD + "\n", "quick start"),
    (("ann@pub.example", "--password-stdin", "--by", "two words"), GOOD, "--by"),
])
def test_bad_input_exits_2_with_nothing_written(db_url: str, argv: tuple[str, ...],
                                                 stdin: str, said: str) -> None:
    before = snapshot(db_url)
    ran = cli(db_url, "operator", "add", *argv, stdin=stdin)
    assert ran.code == 2, ran
    assert said in ran.err and "Traceback" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1
    assert snapshot(db_url) == before


def test_removing_an_unknown_account_exits_2(db_url: str) -> None:
    before = snapshot(db_url)
    ran = cli(db_url, "operator", "remove", "nobody@pub.example")
    assert ran.code == 2 and "no operator account" in ran.err
    assert snapshot(db_url) == before


def test_on_a_terminal_the_password_is_asked_twice(db_url: str) -> None:
    """The console script in a real pty: two answers that differ save nothing (exit 2);
    the same twice adds the account. Nothing typed is echoed."""

    def on_tty(*answers: str) -> tuple[int, str]:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the installed script, on the pty
            os.execv(sys.executable, [sys.executable, "-m", "pubsched", "--db", db_url,
                                      "operator", "add", "ann@pub.example"])
        seen, left, mark = b"", list(answers), 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
                # answer each prompt once it is complete (getpass flushes what came early)
                if left and len(seen) > mark and seen.rstrip().endswith(b":"):
                    time.sleep(0.1)
                    os.write(fd, (left.pop(0) + "\n").encode())
                    mark = len(seen)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")

    code, text = on_tty(GOOD, GOOD + "x")
    assert code == 2 and "differ" in text, text
    assert GOOD not in text  # never echoed
    assert snapshot(db_url)["pub_operators"] == []
    code, text = on_tty(GOOD, GOOD)
    assert code == 0 and "added operator ann@pub.example" in text, text
    assert GOOD not in text


# -- the domain -----------------------------------------------------------------------------


def test_remove_keep_one_refuses_the_last_account(pub: Pub) -> None:
    assert operators.add(pub, "ann@pub.example", GOOD, hasher=FAST, now=T0)
    refused = operators.remove(pub, "ann@pub.example", keep_one=True)
    assert not refused and refused.reason == "LAST_OPERATOR"
    assert [o.email for o in operators.all_operators(pub)] == ["ann@pub.example"]
    assert operators.add(pub, "bob@pub.example", GOOD, hasher=FAST, now=T0)
    assert operators.remove(pub, "ann@pub.example", keep_one=True)
    assert [o.email for o in operators.all_operators(pub)] == ["bob@pub.example"]
    assert operators.remove(pub, "bob@pub.example")  # the CLI's rule: allowed
    assert operators.all_operators(pub) == []


def test_verify_stamps_the_login_and_tells_nothing_apart(pub: Pub) -> None:
    added = operators.add(pub, "ann@pub.example", GOOD, hasher=FAST, now=T0)
    found = operators.verify(pub, "ANN@pub.example", GOOD, now=T0)
    assert found is not None and found.id == added.detail["id"]
    (row,) = pub.query("SELECT last_login_at FROM pub_operators")
    assert row["last_login_at"] is not None
    assert operators.verify(pub, "ann@pub.example", "wrong password!!", now=T0) is None
    assert operators.verify(pub, "nobody@pub.example", GOOD, now=T0) is None
    assert operators.verify(pub, "ann@pub.example", "x" * 5000, now=T0) is None
    assert operators.alive(pub, found.id, "ann@pub.example", found.stamp)
    assert not operators.alive(pub, found.id, "bob@pub.example", found.stamp)
    assert not operators.alive(pub, found.id + 1, "ann@pub.example", found.stamp)
    assert not operators.alive(pub, found.id, "ann@pub.example", None)  # no stamp: out
    assert not operators.alive(pub, found.id, "ann@pub.example", "0" * 24)


def test_bad_input_is_refused_before_any_write(pub: Pub) -> None:
    for email, password in (("ann@pub.example", "short"), ("nope", GOOD),
                            ("ann@pub.example", None), (" admin ", GOOD),
                            ("ann@pub.example", "x" * 1025)):
        with pytest.raises(BadInput):
            operators.add(pub, email, password, hasher=FAST)  # type: ignore[arg-type]
    with pytest.raises(BadInput):
        operators.remove(pub, "nobody@pub.example")
    assert operators.all_operators(pub) == []


@pytest.mark.both_databases("races: two adds of one account")
def test_two_adds_racing_make_one_account(db_url: str, tmp_path: Path) -> None:
    """Each add on its own connection at once: one applies, the other is OPERATOR_EXISTS."""
    barrier = threading.Barrier(2)
    verdicts: list[Any] = []

    def add(email: str) -> None:
        mine = Pub(open_store(db_url))
        try:
            barrier.wait()
            verdicts.append(operators.add(mine, email, GOOD, hasher=FAST))
        finally:
            mine.close()

    threads = [threading.Thread(target=add, args=(e,))
               for e in ("ann@pub.example", "ANN@pub.example")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(bool(v) for v in verdicts) == [False, True]
    assert [v.reason for v in verdicts if not v] == ["OPERATOR_EXISTS"]
    assert len(snapshot(db_url)["pub_operators"]) == 1


def test_the_command_line_reads_the_password_from_its_own_stdin(
        db_url: str, pub: Pub, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """No stream handed in: the process's stdin, as the console script reads it (the
    terminal test above runs the script itself)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(GOOD + "\n"))
    code = cli_run(["--db", db_url, "operator", "add", "cli@pub.example", "--password-stdin"])
    assert code == 0, capsys.readouterr().err
    assert [o.email for o in operators.all_operators(pub)] == ["cli@pub.example"]


@pytest.mark.both_databases("races: two removals")
def test_two_removals_racing_never_leave_none_when_one_must_stay(db_url: str,
                                                                 pub: Pub) -> None:
    """keep_one (the web's rule): the last two accounts removed at once on two
    connections: one removal applies, the other is LAST_OPERATOR; one account is left."""
    for email in ("ann@pub.example", "bob@pub.example"):
        assert operators.add(pub, email, GOOD, hasher=FAST)
    barrier = threading.Barrier(2)
    verdicts: list[Any] = []

    def remove(email: str) -> None:
        mine = Pub(open_store(db_url))
        try:
            barrier.wait()
            verdicts.append(operators.remove(mine, email, keep_one=True))
        finally:
            mine.close()

    threads = [threading.Thread(target=remove, args=(e,))
               for e in ("ann@pub.example", "bob@pub.example")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(bool(v) for v in verdicts) == [False, True]
    assert [v.reason for v in verdicts if not v] == ["LAST_OPERATOR"]
    assert len(operators.all_operators(pub)) == 1


# -- a new password -------------------------------------------------------------------------

NEW = "a brand new passphrase"


@pytest.mark.both_databases("the password's compare-and-set")
def test_operator_password_sets_a_new_password_from_stdin(db_url: str, pub: Pub) -> None:
    assert cli(db_url, "operator", "add", "ann@pub.example", "--password-stdin",
               stdin=GOOD + "\n").code == 0
    before = operators.verify(pub, "ann@pub.example", GOOD)
    assert before is not None and before.stamp
    ran = cli(db_url, "operator", "password", "ANN@pub.example", "--password-stdin",
              stdin=NEW + "\n")
    assert ran.code == 0, ran
    assert "changed the password of ann@pub.example" in ran.out
    assert operators.verify(pub, "ann@pub.example", GOOD) is None
    after = operators.verify(pub, "ann@pub.example", NEW)
    assert after is not None and after.stamp != before.stamp
    # a session issued under the old password is no longer alive, one under the new is
    assert not operators.alive(pub, before.id, before.email, before.stamp)
    assert operators.alive(pub, after.id, after.email, after.stamp)


@pytest.mark.parametrize(("email", "stdin", "said"), [
    ("nobody@pub.example", NEW + "\n", "no operator account"),
    ("ann@pub.example", "short\n", "at least 12 characters"),
    ("ann@pub.example", "", "standard input was empty"),
])
def test_operator_password_bad_input_exits_2_with_nothing_written(
        db_url: str, email: str, stdin: str, said: str) -> None:
    assert cli(db_url, "operator", "add", "ann@pub.example", "--password-stdin",
               stdin=GOOD + "\n").code == 0
    before = snapshot(db_url)
    ran = cli(db_url, "operator", "password", email, "--password-stdin", stdin=stdin)
    assert ran.code == 2, ran
    assert said in ran.err and "Traceback" not in ran.err
    assert snapshot(db_url) == before


def test_set_password_checks_the_current_one_when_asked(pub: Pub) -> None:
    assert operators.add(pub, "ann@pub.example", GOOD, hasher=FAST, now=T0)
    wrong = operators.set_password(pub, "ann@pub.example", NEW, current="not it at all",
                                   hasher=FAST)
    assert (wrong.applied, wrong.reason) == (False, "WRONG_PASSWORD")
    assert operators.verify(pub, "ann@pub.example", GOOD) is not None
    right = operators.set_password(pub, "ann@pub.example", NEW, current=GOOD, hasher=FAST)
    assert right.applied and operators.verify(pub, "ann@pub.example", NEW) is not None
