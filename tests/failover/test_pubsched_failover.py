"""pubsched on the cluster: ``PUBSCHED_DB`` names both nodes, and the leader node dies
(SIGKILL of Patroni and its PostgreSQL, synchronous replication) while a pub is mailing.

What runs, all against the cluster's multi-host URL (one pub in libpq's keyword form):

* ``pubsched init`` (a child process) makes the pub's schema on a database of its own;
* ``pubsched serve`` (a child process, its in-process ticker on: it must tick clean again
  after both kills, which it does every 60 s) serves while a poller
  asks for a tender's page, the week's admin page and ``/healthz`` every 0.25 s, and sends
  one form (a tender's reminder switch) while the database is away;
* round 1, **the week's send**: the operator's send of a week's schedule to 30 tenders
  (``actions.perform(pub, "send", ...)``, the call of the web's button and of ``pubsched
  week send``), pressed again until the week is sent, as an operator would; the leader is
  killed from inside the SMTP server as it receives the 8th message's data, before it
  answers: the window between the mail server accepting a message and its finish;
* round 2, **the tick**: an invitation owed to each of the 30 tenders, delivered by a tick
  loop (``pubsched.tick.status.run_tick``, what ``serve``'s ticker runs every minute) that
  runs throughout; as the 8th invitation arrives the test locks its row on the leader, so
  that the sender's finish, once the server has accepted it, is in flight (waiting on the
  lock) when the leader is killed 0.5 s later: the finish's connection dies under it. (A
  sender that gave up there left the email to its lease and then UNKNOWN; this one tries
  the finish again once the new primary answers.)

Then: each tender got each email exactly once (by Message-ID, and by recipient and
subject), every email row ends SENT (an email whose *claim* lost its COMMIT's answer may
instead wait out its lease, 10 minutes, never handed over: allowed and counted, see
pubsched.deliveries.deliver); ``serve`` answered 503, never 500, while no node was
writable and 200 again soon after the new primary was, with no restart; the tick ran
again. Figures go to the ``figures`` fixture ("failover figures").
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pubsched.config import Config
from pubsched.db import open_store
from pubsched.deliveries import outbox
from pubsched.engines import actions
from pubsched.people import invite, links, tenders
from pubsched.pub import Pub
from pubsched.tick.run import STEP_FAILED
from pubsched.tick.status import run_tick
from pubsched.week import template
from rowstate import RowstateError
from support.figures import Figures
from support.patroni import Node, PatroniCluster, first_writable
from support.pub_reminders import run_week
from support.pubs import NOW, OPERATOR, WEEK, mail_settings
from support.services import LOCALHOST, free_port, stop_process
from support.smtp_server import SmtpTestServer

pytestmark = [pytest.mark.failover, pytest.mark.timeout(400)]

TENDERS = 30
KILL_AT = 8  # the message whose arrival kills the leader, in each round
SECRET = "failover-secret-0123456789abcdef-0123456789"
PASSWORD = "failover admin password"
#: the longest the cluster may take to have a writable primary again (test_failover.py)
MAX_WRITE_OUTAGE = 60.0
#: serve's first page after the new primary took writes: the pool's retries (0.5 s at
#: most), then a probe (pubsched.web.outage); the rest is room for a loaded machine
MAX_SERVE_LAG = 5.0
#: how long a round's mail may take to be all sent after the primary is back
MAX_FINISH = 45.0
AWAY_TEXT = "The database is not answering"


# -- the pub ------------------------------------------------------------------------------


def _database(cluster: PatroniCluster) -> tuple[str, str, str]:
    """A database of the test's own on the cluster: its name, its URL (libpq's URL form)
    and the same as libpq's keyword form."""
    name = f"pubfail_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = cluster.url.replace("/postgres?", f"/{name}?")
    hosts = ",".join(LOCALHOST for _ in cluster.nodes)
    ports = ",".join(str(node.pg_port) for node in cluster.nodes)
    keywords = (f"host={hosts} port={ports} dbname={name} user=postgres "
                "target_session_attrs=read-write")
    return name, url, keywords


def _env(url: str, smtp: SmtpTestServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")}
    env.update(smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test", PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                        PUBSCHED_SMTP_TIMEOUT="30"),
               PUBSCHED_DB=url, PUBSCHED_SECRET=SECRET, PUBSCHED_ADMIN_PASSWORD=PASSWORD,
               PYTHONPATH=os.pathsep.join(sys.path))
    return env


def _open(url: str, smtp: SmtpTestServer) -> Pub:
    return Pub(open_store(url), Config(db_url=url, secret=SECRET, mail=mail_settings(
        smtp, PUBSCHED_SMTP_TIMEOUT="30")))


def _build(pub: Pub) -> tuple[str, list[str]]:
    """30 tenders, a week of three nights of 10 slots each, every tender on one shift, the
    roster approved and not sent: the week and the tenders' emails."""
    for shift in template.listing(pub):
        assert template.edit(pub, shift.id, slots=10)
    emails = [f"tender{n:02d}@pub.test" for n in range(TENDERS)]
    for n, email in enumerate(emails):
        assert tenders.add(pub, f"Tender {n:02d}", email, max_shifts=1, now=NOW)
    run_week(pub, WEEK, {email: None for email in emails}, at=NOW, send=False)
    assigned = pub.query("SELECT COUNT(DISTINCT tender_id) AS n FROM pub_assignments "
                         "WHERE week_of = %s", [WEEK])
    assert assigned == [{"n": TENDERS}]
    return WEEK, emails


# -- serve, and what it answered -----------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    at: float  # time.monotonic() when it was asked
    path: str
    status: int  # 0: no answer (connection refused, timed out)
    seconds: float
    away_page: bool  # the 503 page in words
    trace: bool  # a traceback in the body
    maybe_saved: bool = False  # a form's 503: "may or may not have been saved"


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    base: str
    log: Path
    answers: list[Answer] = field(default_factory=list)
    cookie: str = ""

    def ask(self, path: str, data: dict[str, str] | None = None) -> Answer:
        body = None if data is None else urllib.parse.urlencode(data).encode()
        request = urllib.request.Request(self.base + path, data=body,
                                         headers={"Cookie": self.cookie} if self.cookie
                                         else {})
        started = time.monotonic()
        try:
            with _no_redirects.open(request, timeout=30) as reply:
                status, text = int(reply.status), reply.read().decode()
        except urllib.error.HTTPError as answered:
            status, text = int(answered.code), answered.read().decode()
        except OSError:
            status, text = 0, ""
        answer = Answer(started, path, status, time.monotonic() - started,
                        AWAY_TEXT in text, "Traceback" in text, "may or may not" in text)
        self.answers.append(answer)
        return answer

    def log_in(self) -> None:
        request = urllib.request.Request(self.base + "/admin/login", data=urllib.parse.urlencode(
            {"email": "admin", "password": PASSWORD, "next": "/admin/"}).encode())
        try:
            _no_redirects.open(request, timeout=10)
        except urllib.error.HTTPError as redirect:
            assert redirect.code == 303, redirect.code
            cookie = redirect.headers["set-cookie"]
        self.cookie = cookie.split(";", 1)[0]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_no_redirects = urllib.request.build_opener(_NoRedirect)


@contextlib.contextmanager
def _serving(url: str, smtp: SmtpTestServer, folder: Path) -> Iterator[Serve]:
    port = free_port()
    log = folder / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pubsched", "serve", "--host",
                                 LOCALHOST, "--port", str(port)], env=_env(url, smtp),
                                stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    served = Serve(proc, f"http://{LOCALHOST}:{port}", log)
    try:
        deadline = time.monotonic() + 30
        while served.ask("/healthz").status != 200:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        served.answers.clear()
        served.log_in()
        yield served
    finally:
        stop_process(proc)


def _serve_ticks(log: Path) -> list[tuple[float, str]]:
    """``serve``'s own ticks (its ticker, every 60 s), read from its log: when each began
    (Unix time) and how it ended: "ok", "failed" (it logged a failed step, or failed whole)
    or "running"."""
    ticks: list[tuple[float, str]] = []
    for line in log.read_text(errors="replace").splitlines():
        if 'Running job "pubsched tick' in line:
            began = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            ticks.append((began, "running"))
        elif ticks and ticks[-1][1] == "running":
            if "pubsched.serve: tick failed" in line or (
                    "pubsched.tick: tick:" in line and " failed" in line):
                ticks[-1] = (ticks[-1][0], "failed")
            elif 'Job "pubsched tick' in line and "executed successfully" in line:
                ticks[-1] = (ticks[-1][0], "ok")
    return ticks


def _wall(monotonic: float) -> float:
    """A time.monotonic() instant as Unix time."""
    return time.time() - time.monotonic() + monotonic


def _poll(served: Serve, paths: list[str], stop: threading.Event) -> None:
    while not stop.is_set():
        for path in paths:
            served.ask(path)
        time.sleep(0.25)


# -- the tick, and the kills ---------------------------------------------------------------


@dataclass
class Ticks:
    """What each tick of the loop ended as: (started, ended, "ok" | "failed step" | error)."""

    runs: list[tuple[float, float, str]] = field(default_factory=list)

    def loop(self, pub: Pub, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:  # as serve's tick_job: an error is recorded, the next tick tries again
                verdicts = run_tick(pub)
                how = "failed step" if any(v.reason == STEP_FAILED for v in verdicts) else "ok"
            except Exception as exc:
                how = f"{type(exc).__name__}"
            self.runs.append((started, time.monotonic(), how))
            stop.wait(0.5)

    def first_ok_after(self, at: float) -> float | None:
        return next((ended for started, ended, how in list(self.runs)
                     if started > at and how == "ok"), None)


@dataclass
class Round:
    name: str
    killed_at: float = 0.0
    writable_at: float = 0.0
    served_at: float = 0.0  # serve's first 200 page after the new primary took writes
    done_at: float = 0.0  # the round's 30 emails all finished
    answers: list[Answer] = field(default_factory=list)


def _kill_when(smtp: SmtpTestServer, cluster: PatroniCluster, leader: Node, kind: str,
               round_: Round, *, hold: Callable[[str], Any] | None = None
               ) -> threading.Event:
    """Kill ``leader`` when the SMTP server receives the KILL_AT-th message of ``kind``
    (its Message-ID's prefix), before the server answers it. With ``hold``: instead,
    ``hold(recipient address)`` locks that email's row on the leader (the sender's finish,
    once the server has answered, then waits on the lock: in flight), and the kill comes
    0.5 s later. The event is set once the leader is dead."""
    seen: list[int] = []
    dead = threading.Event()

    def kill() -> None:
        round_.killed_at = time.monotonic()
        cluster.kill(leader)
        dead.set()

    def arrived(rcpt_tos: tuple[str, ...]) -> None:
        last = smtp.received[-1]
        if not str(last.message.get("Message-ID", "")).startswith(f"<{kind}.") \
                or dead.is_set():
            return
        seen.append(1)
        if len(seen) != KILL_AT:
            return
        if hold is None:
            kill()
        else:
            hold(rcpt_tos[0])
            threading.Timer(0.5, kill).start()

    smtp.on_data(arrived)
    return dead


class RowLock:
    """``hold`` for :func:`_kill_when`: the email of ``kind`` about ``about`` to an address,
    its row locked from a connection of the test's own (it dies with the node)."""

    def __init__(self, url: str, kind: str, about: str, pub: Pub) -> None:
        self.url, self.kind, self.about, self.pub = url, kind, about, pub
        self.held: list[psycopg.Connection[Any]] = []

    def __call__(self, address: str) -> None:
        (tender,) = [t for t in tenders.all_tenders(self.pub) if t.email == address]
        conn = psycopg.connect(self.url, connect_timeout=5)
        self.held.append(conn)  # kept open (and the lock held) until the kill
        conn.execute("SELECT 1 FROM pub_mail WHERE kind = %s AND about = %s AND "
                     "recipient = %s FOR UPDATE",
                     [self.kind, self.about, outbox.to_tender(tender.id)])

    def close(self) -> None:
        for conn in self.held:
            conn.close()


def _after_kill(cluster: PatroniCluster, leader: Node, dead: threading.Event,
                round_: Round, served: Serve, finished: Callable[[], bool]) -> None:
    """Time the new primary and serve's recovery, wait for the round's mail, and bring the
    killed node back as a standby."""
    assert dead.wait(60), "the kill never came: the send did not reach its 8th message"
    others = [node for node in cluster.nodes if node is not leader]
    probed = first_writable(others, round_.killed_at + MAX_WRITE_OUTAGE)
    assert probed is not None, f"no node took a write within {MAX_WRITE_OUTAGE:g} s"
    round_.writable_at = probed[1]
    deadline = round_.writable_at + MAX_FINISH
    while not finished():
        assert time.monotonic() < deadline, "the round's mail did not finish"
        time.sleep(0.2)
    round_.done_at = time.monotonic()
    while not (firsts := [a for a in list(served.answers) if a.at > round_.writable_at
                          and a.status == 200 and a.path != "/healthz"]):
        assert time.monotonic() < round_.writable_at + MAX_FINISH, "serve never served again"
        time.sleep(0.1)
    round_.served_at = firsts[0].at + firsts[0].seconds
    time.sleep(0.5)
    round_.answers = [a for a in list(served.answers) if a.at >= round_.killed_at - 0.01
                      and a.at <= round_.served_at]
    cluster.start_node(leader)
    cluster.wait_healthy(synchronous=True)


# -- the test ------------------------------------------------------------------------------


def _mail_rows(pub: Pub, kind: str, about: str | None = None) -> list[dict[str, Any]]:
    sql = ("SELECT about, recipient, state, acting_at, handover_at FROM pub_mail "
           "WHERE kind = %s")
    params: list[Any] = [kind]
    if about is not None:
        sql += " AND about = %s"
        params.append(about)
    return pub.query(sql, params)


def _settled(rows: list[dict[str, Any]]) -> bool:
    """Every row finished, or left to its lease with no handover (a claim of unknown
    outcome: sent after the lease, 10 minutes)."""
    return all(r["state"] != "OWED" or (r["acting_at"] is not None
                                        and r["handover_at"] is None) for r in rows)


def test_pubsched_through_a_failover_mails_each_tender_once_and_serves_again(
        cluster: PatroniCluster, figures: Figures, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="pubsched.deliveries")
    started = time.monotonic()
    name, url, keywords = _database(cluster)
    smtp = SmtpTestServer()
    smtp.start()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    pubs: list[Pub] = []
    closing = contextlib.ExitStack()
    try:
        init = subprocess.run([sys.executable, "-m", "pubsched", "init"], env=_env(url, smtp),
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert init.returncode == 0, init.stdout + init.stderr
        assert "migration(s)" in init.stdout and "engine: v2" in init.stdout
        sender, ticker = _open(url, smtp), _open(keywords, smtp)
        pubs += [sender, ticker]
        week, emails = _build(sender)
        first = tenders.all_tenders(sender)[0]
        form = "/t/" + links.tender_token(sender.config, first.id, first.link_version)
        smtp.delay_data(0.1)  # a busy mail server: a send spends its time in the answers
        with _serving(url, smtp, tmp_path) as served:
            ticks = Ticks()
            threads = [threading.Thread(target=_poll, daemon=True, name="poller", args=(
                           served, [form, f"/admin/weeks/{week}", "/healthz"], stop)),
                       threading.Thread(target=ticks.loop, args=(ticker, stop), daemon=True,
                                        name="ticker")]
            for thread in threads:
                thread.start()

            # round 1: the week's send, the leader killed between a message and its finish
            one = Round("the week's send")
            leader = cluster.wait_healthy(synchronous=True)
            dead = _kill_when(smtp, cluster, leader, "schedule", one)
            presses: collections.Counter[str] = collections.Counter()

            def press() -> None:  # the operator presses send until the week is sent
                while not stop.is_set():
                    try:
                        done = actions.perform(sender, "send", week, now=NOW)
                        presses["sent" if done.applied else str(done.reason)] += 1
                        if done.applied:
                            return
                    except RowstateError as exc:
                        presses[type(exc).__name__] += 1
                    time.sleep(0.5)

            pressing = threading.Thread(target=press, daemon=True, name="operator")
            pressing.start()
            threads.append(pressing)
            posted: list[Answer] = []

            def post_while_away() -> None:  # a tender's form, sent once pages say 503
                while not stop.is_set() and not posted:
                    if any(a.away_page for a in list(served.answers)
                           if a.at > one.killed_at > 0):
                        posted.append(served.ask(f"{form}/reminders", {"on": "0"}))
                    time.sleep(0.05)

            posting = threading.Thread(target=post_while_away, daemon=True, name="tender")
            posting.start()
            threads.append(posting)
            _after_kill(cluster, leader, dead, one, served, lambda: not pressing.is_alive()
                        and _settled(_mail_rows(sender, "schedule")))
            away_post = posted[0] if posted else None

            # round 2: invitations owed, delivered by the tick, the leader killed mid-pass
            two = Round("the tick's deliveries")
            leader = cluster.wait_healthy(synchronous=True)
            run = f"failover/{uuid.uuid4().hex[:6]}"
            lock = RowLock(url, invite.KIND, run, sender)
            closing.callback(lock.close)
            dead = _kill_when(smtp, cluster, leader, "invite", two, hold=lock)
            with sender.atomic():
                for tender in tenders.all_tenders(sender):
                    assert outbox.owe(sender, invite.KIND, run, outbox.to_tender(tender.id),
                                      week_of=None, now=NOW)
            _after_kill(cluster, leader, dead, two, served,
                        lambda: _settled(_mail_rows(sender, invite.KIND, run)))
            smtp.on_data(None)
            tick_after = [ticks.first_ok_after(r.writable_at) for r in (one, two)]
            # serve's own ticker (every 60 s from its start) runs again after both kills
            deadline = time.monotonic() + 75
            while not (later := [t for t in _serve_ticks(served.log)
                                 if t[0] > _wall(two.writable_at) and t[1] != "running"]):
                assert time.monotonic() < deadline, _serve_ticks(served.log)
                time.sleep(0.5)
            serve_tick = later[0]
            assert serve_tick[1] == "ok", served.log.read_text()[-3000:]
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            assert served.proc.poll() is None, "serve stopped"  # the same process throughout
        ended = time.monotonic()

        # each email once: by Message-ID, and by recipient and subject
        accepted = smtp.accepted
        ids = collections.Counter(str(m.message["Message-ID"]) for m in accepted)
        pairs = collections.Counter((m.rcpt_tos, str(m.message["Subject"])) for m in accepted)
        twice = sorted(i for i, n in ids.items() if n > 1)
        assert not twice and max(pairs.values()) == 1, twice
        rows = {kind: _mail_rows(sender, kind) for kind in ("schedule", invite.KIND)}
        unknown = [r for kind_rows in rows.values() for r in kind_rows
                   if r["state"] == "UNKNOWN"]
        waiting = [r for kind_rows in rows.values() for r in kind_rows if r["state"] == "OWED"]
        assert not unknown, unknown
        # round 2's finish lost its connection under it, and was tried again
        finishes = [r.message for r in caplog.records if "waiting for it to" in r.message]
        assert any("invite" in line for line in finishes), finishes
        assert all(r["state"] == "SENT" for kind_rows in rows.values() for r in kind_rows
                   if r not in waiting)
        for kind, kind_rows in rows.items():
            got = {m.rcpt_tos[0] for m in accepted
                   if str(m.message.get("Message-ID", "")).startswith(f"<{kind}.")}
            assert len(kind_rows) == TENDERS, (kind, len(kind_rows))
            assert len(got) == TENDERS - sum(1 for r in waiting if r in kind_rows), kind
            assert got <= set(emails), kind
        assert sender.query("SELECT v2_state FROM pub_schedule_runs WHERE week_of = %s",
                            [week]) == [{"v2_state": "SENT"}]

        # serve: 503 (never 500) while no node took writes, 200 again without a restart
        for r in (one, two):
            during = [a for a in r.answers if a.at < r.writable_at]
            assert any(a.status == 503 for a in during), (r.name, during)
            assert not [a for a in r.answers if a.status not in (200, 303, 503)], r.answers
            assert not [a for a in r.answers if a.trace], "a traceback in a page"
            assert all(a.away_page for a in r.answers if a.status == 503
                       and a.path != "/healthz"), r.answers
            assert max(a.seconds for a in r.answers if a.path == "/healthz") < 2.5
            assert r.served_at - r.writable_at < MAX_SERVE_LAG, (r.name, r.served_at
                                                                  - r.writable_at)
        assert away_post is not None and away_post.status == 503 and away_post.away_page
        switch = tenders.by_id(sender, first.id)
        assert switch is not None
        if not away_post.maybe_saved:  # "nothing was changed": and nothing was
            assert switch.shift_reminders is True
        assert all(t is not None for t in tick_after), "the tick did not run again"
    finally:
        stop.set()
        closing.close()
        smtp.clear_faults()
        for pub in pubs:
            pub.close()
        smtp.stop()
        with contextlib.suppress(psycopg.Error), psycopg.connect(
                cluster.url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    for n, r in enumerate((one, two), 1):
        pages = [a for a in r.answers if a.path != "/healthz"]
        first_503 = min(a.at + a.seconds for a in r.answers if a.status == 503)
        figures.add(
            f"pubsched round {n} ({r.name}): the new primary took writes "
            f"{r.writable_at - r.killed_at:.1f} s after the kill; serve's first 503 "
            f"{first_503 - r.killed_at:.1f} s after the kill, its first page 200 "
            f"{r.served_at - r.killed_at:.1f} s after the kill "
            f"({r.served_at - r.writable_at:+.2f} s after the node was writable); "
            f"{sum(a.status == 503 for a in pages)} pages and "
            f"{sum(a.status == 503 for a in r.answers if a.path == '/healthz')} healthz "
            f"answered 503 meanwhile (slowest {max(a.seconds for a in pages):.1f} s), 0 "
            f"answered 500; the 30 emails all finished {r.done_at - r.writable_at:.1f} s "
            f"after the node was writable; the tick's first clean run "
            f"{(tick_after[n - 1] or 0) - r.writable_at:+.1f} s after it")
    figures.add(
        f"pubsched, 2 kills (synchronous mode): {len(smtp.accepted)} emails accepted by the "
        f"mail server, 0 twice; schedule and invitations all SENT except {len(waiting)} "
        f"left to their lease (a claim whose COMMIT got no answer); 0 UNKNOWN; finishes "
        f"that waited for the database: {len(finishes)}; ticks that failed (a step, or "
        f"whole): {sum(how != 'ok' for _s, _e, how in ticks.runs)} of {len(ticks.runs)}, "
        f"and serve's own ticker ran clean {serve_tick[0] - _wall(two.writable_at):.0f} s "
        f"after the second switch; "
        f"the operator's presses of send: "
        f"{dict(presses)}; the form posted while the database was away: "
        f"{away_post.status if away_post else '-'}; test {ended - started:.0f} s")
