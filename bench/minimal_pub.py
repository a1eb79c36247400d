"""The deadline rush's baseline: the least a web handler can do to take a tender's answer,
under the same server (uvicorn, one process) and the same clients as ``pubsched serve``.

``POST /t/{token}``: the same signed token read (itsdangerous, the form's salt), the form
parsed by Starlette, the same rows written in one transaction (the availability row
upserted, its ticks replaced), and the same 303. Nothing else: no check of the week's
state, of the shifts, of the tender, no page, no engine. Run as
``uvicorn bench.minimal_pub:app`` with ``PUBSCHED_DB`` and ``PUBSCHED_SECRET`` set.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from datetime import UTC, datetime
from typing import Any

import psycopg
from itsdangerous import URLSafeSerializer
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

URL = os.environ["PUBSCHED_DB"]
SIGNER = URLSafeSerializer(os.environ["PUBSCHED_SECRET"], salt="pubsched.tender-form.v1")
_local = threading.local()


def _connection() -> Any:
    conn = getattr(_local, "conn", None)
    if conn is None:
        if URL.startswith("sqlite:"):
            conn = sqlite3.connect(URL.removeprefix("sqlite:///"), isolation_level=None,
                                   check_same_thread=False, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
        else:
            conn = psycopg.connect(URL, autocommit=True)
        _local.conn = conn
    return conn


def _write(week: str, tender: int, shifts: list[int]) -> None:
    conn = _connection()
    now = datetime.now(UTC)
    if isinstance(conn, sqlite3.Connection):
        at = now.isoformat()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO pub_availability (week_of, tender_id, max_shifts, "
                         "submitted_at, updated_at) VALUES (?, ?, NULL, ?, ?) ON CONFLICT "
                         "(week_of, tender_id) DO UPDATE SET updated_at = excluded.updated_at",
                         [week, tender, at, at])
            conn.execute("DELETE FROM pub_availability_shifts WHERE week_of = ? AND "
                         "tender_id = ?", [week, tender])
            conn.executemany("INSERT INTO pub_availability_shifts (week_of, tender_id, "
                             "shift_id) VALUES (?, ?, ?)", [(week, tender, s) for s in shifts])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return
    with conn.transaction():
        conn.execute("INSERT INTO pub_availability (week_of, tender_id, max_shifts, "
                     "submitted_at, updated_at) VALUES (%s, %s, NULL, %s, %s) ON CONFLICT "
                     "(week_of, tender_id) DO UPDATE SET updated_at = excluded.updated_at",
                     [week, tender, now, now])
        conn.execute("DELETE FROM pub_availability_shifts WHERE week_of = %s AND "
                     "tender_id = %s", [week, tender])
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO pub_availability_shifts (week_of, tender_id, "
                            "shift_id) VALUES (%s, %s, %s)", [(week, tender, s) for s in shifts])


async def submit(request: Request) -> Response:
    token = request.path_params["token"]
    data = SIGNER.loads(token)
    form = await request.form()
    week = str(form["week"])
    shifts = [int(str(v)) for v in form.getlist("shift")]
    await run_in_threadpool(_write, week, int(data["t"]), shifts)
    return RedirectResponse(f"/t/{token}?saved=1", status_code=303)


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


app = Starlette(routes=[Route("/t/{token}", submit, methods=["POST"]),
                        Route("/healthz", healthz, methods=["GET"])])
