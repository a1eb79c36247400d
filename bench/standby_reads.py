"""Reads on a standby (issue 30): the operator's week page served by a real ``pubsched
serve`` on a primary alone, then with ``PUBSCHED_DB_READS`` naming its streaming standby,
in the same run: pages a second from concurrent keep-alive clients, their p50 and p95, and
the transactions each node ran (``pg_stat_database``), which show where the reads went.

Not a row of ``make bench``: it starts a throwaway primary and a standby of its own
(``tests/support/pg_standby.py``), which a plain run does not need. Run it with
``.venv/bin/python -m bench.standby_reads`` (``--seconds``, ``--clients``, ``--weeks``).
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from .pubsched import _free_port, _percentile, _pub, _season, _served

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' support package: servers


def _url(name: str, *servers: Any, attrs: str) -> str:
    hosts = ",".join(f"127.0.0.1:{s.port}" for s in servers)
    return f"postgresql://postgres@{hosts}/{name}?target_session_attrs={attrs}"


def _session(port: int) -> str:
    """The operator's session cookie (only it: the post's position cookie is left out, so
    the pages measured are an operator browsing, not the page right after a post)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = urlencode({"email": "admin", "password": "a bench password", "next": "/admin/"})
    conn.request("POST", "/admin/login", body=body, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"})
    reply = conn.getresponse()
    reply.read()
    assert reply.status == 303, reply.status
    for name, value in reply.getheaders():
        if name.lower() == "set-cookie" and value.startswith("pubsched_admin="):
            return value.split(";", 1)[0]
    raise AssertionError("no session cookie")


def _load(port: int, path: str, cookie: str, clients: int, seconds: float
          ) -> tuple[float, list[float]]:
    """``clients`` threads getting ``path`` for ``seconds``: (pages a second, latencies)."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            conn.request("GET", path, headers={"Cookie": cookie})
            reply = conn.getresponse()
            reply.read()
            assert reply.status == 200, reply.status
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) / (time.monotonic() - began), latencies


def _commits(dsn: str, name: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                           [name]).fetchone()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.standby_reads")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--weeks", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)

    from pubsched.db.migrate import migrate
    from support.pg_standby import caught_up, replicated

    def prepare(dsn: str) -> None:
        import psycopg.conninfo

        p = psycopg.conninfo.conninfo_to_dict(dsn)
        url = f"postgresql://{p['user']}@{p['host']}:{p['port']}/{p['dbname']}"
        migrate(url)
        pub = _pub(url)
        try:
            holder["week"] = _season(pub, args.weeks, 200)
        finally:
            pub.close()

    holder: dict[str, str] = {}
    log = Path("/tmp/rowstate-bench-standby.log")
    with replicated(prepare) as (primary, standby, name):
        caught_up(primary.admin_dsn, standby.admin_dsn)
        week = holder["week"]
        primary_url = _url(name, primary, attrs="read-write")
        reads_url = _url(name, standby, primary, attrs="prefer-standby")
        figures: dict[str, list[tuple[float, float, float, int, int]]] = {
            "primary alone": [], "reads on the standby": []}
        for _ in range(args.rounds):
            for mode, env in (("primary alone", {}),
                              ("reads on the standby", {"PUBSCHED_DB_READS": reads_url})):
                port = _free_port()
                with _served([sys.executable, "-m", "pubsched", "serve", "--port", str(port),
                              "--no-tick"], primary_url, port, log, env):
                    cookie = _session(port)
                    _load(port, f"/admin/weeks/{week}", cookie, 2, 3)  # warm
                    on_primary = _commits(primary.admin_dsn, name)
                    on_standby = _commits(standby.admin_dsn, name)
                    rate, latencies = _load(port, f"/admin/weeks/{week}", cookie,
                                            args.clients, args.seconds)
                    figures[mode].append((
                        rate, statistics.median(latencies) * 1000,
                        _percentile(latencies, 0.95) * 1000,
                        _commits(primary.admin_dsn, name) - on_primary,
                        _commits(standby.admin_dsn, name) - on_standby))
        print(f"week page, {args.weeks} sent weeks x 200 tenders, {args.clients} clients, "
              f"{args.seconds:.0f} s x {args.rounds} rounds each")
        for mode, rows in figures.items():
            for rate, p50, p95, on_p, on_s in rows:
                print(f"  {mode:22s} {rate:6.1f} pages/s  p50 {p50:6.1f} ms  p95 {p95:6.1f} ms"
                      f"  transactions: primary {on_p:6d}  standby {on_s:6d}")
        best = {mode: max(r[0] for r in rows) for mode, rows in figures.items()}
        print(f"  ratio (standby / primary alone, best rounds): "
              f"{best['reads on the standby'] / best['primary alone']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
