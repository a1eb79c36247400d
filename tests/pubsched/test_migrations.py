"""pubsched's migrations and their runner, on SQLite and on a real PostgreSQL.

The schema is checked three ways: by introspection (every table, column and index the
domain code is written against), by behaviour (the constraints refuse what they must), and
against rowstate itself (the events table is the one ``events_sql`` makes, and the runs
table has every column and index ``schema_sql`` would make for the seed's binding).
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import rowstate
import rowstate.stores
from pubsched import db as pubdb
from pubsched.db import migrate as mig
from rowstate import NOW, Binding, Derived, Edge, Lease, Machine, Notice, TimedEdge, Unique

ALL = ["0001", "0032", "0033", "0034", "0035", "0036", "0037", "0038", "0039", "0040",
       "0041", "0042", "0043", "0044", "0045", "0046",
       "0047", "0048", "0049", "0050", "0052", "0053", "0055"]
AFTER_0034 = ALL[ALL.index("0035"):]  # what a database at 0034 still lacks
LAST = ALL[-1]
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


pytestmark = [pytest.mark.empty_db,  # db_url is empty: these tests migrate it
              pytest.mark.both_databases("the migrations are SQL files of each dialect")]


@pytest.fixture
def stores() -> Iterator[list[pubdb.Store]]:
    opened: list[pubdb.Store] = []
    yield opened
    for store in opened:
        store.close()


def sql(url: str, stores: list[pubdb.Store], text: str,
        params: Any = None) -> list[dict[str, Any]]:
    """One statement in its own unit of work, through the store the app uses (one
    placeholder style, rows as dicts)."""
    if not stores:
        stores.append(pubdb.open_store(url))
    with stores[0].atomic() as tx:
        return tx.execute(text, params)


# -- introspection ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    type: str
    notnull: bool
    default: str | None


def columns(url: str, stores: list[pubdb.Store], table: str) -> dict[str, Column]:
    if url.startswith("sqlite:"):
        rows = sql(url, stores, 'SELECT name, type, "notnull" AS nn, dflt_value AS dflt '
                                "FROM pragma_table_info(%s)", [table])
        return {r["name"]: Column(r["type"].upper(), bool(r["nn"]), r["dflt"]) for r in rows}
    rows = sql(url, stores,
               "SELECT column_name AS name, data_type AS type, is_nullable AS nullable, "
               "column_default AS dflt FROM information_schema.columns "
               "WHERE table_schema = current_schema() AND table_name = %s", [table])
    return {r["name"]: Column(r["type"], r["nullable"] == "NO", r["dflt"]) for r in rows}


def indexes(url: str, stores: list[pubdb.Store]) -> dict[str, str]:
    """Index name -> its definition, normalised (quotes, schema and spacing dropped)."""
    if url.startswith("sqlite:"):
        rows = sql(url, stores, "SELECT name, sql AS def FROM sqlite_master "
                                "WHERE type = 'index' AND sql IS NOT NULL")
    else:
        rows = sql(url, stores, "SELECT indexname AS name, indexdef AS def FROM pg_indexes "
                                "WHERE schemaname = current_schema()")
    out = {}
    for r in rows:
        d = r["def"].replace('"', "").replace(" IF NOT EXISTS", "")
        d = re.sub(r" ON \w+\.", " ON ", d)  # PostgreSQL names the schema
        d = re.sub(r" USING btree ", " ", d)
        d = re.sub(r"\s+", " ", d)
        out[r["name"]] = d
    return out


def tables(url: str, stores: list[pubdb.Store]) -> set[str]:
    if url.startswith("sqlite:"):
        rows = sql(url, stores, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                "AND name NOT LIKE 'sqlite%%'")
    else:
        rows = sql(url, stores, "SELECT table_name AS name FROM information_schema.tables "
                                "WHERE table_schema = current_schema()")
    return {r["name"] for r in rows}


TIME = {"sqlite": "TEXT", "postgresql": "timestamp with time zone"}
JSON = {"sqlite": "TEXT", "postgresql": "jsonb"}
TYPES = {
    "sqlite": {"TEXT": "TEXT", "INTEGER": "INTEGER", "BIGINT": "BIGINT", "ID64": "INTEGER",
               "REAL": "REAL"},
    "postgresql": {"TEXT": "text", "INTEGER": "integer", "BIGINT": "bigint", "ID64": "bigint",
                   "REAL": "double precision"},
}

# table -> column -> (type: TEXT/INTEGER/BIGINT/TIME/JSON, or ID64: a 64-bit id, which
# SQLite spells INTEGER; NOT NULL)
EXPECTED: dict[str, dict[str, tuple[str, bool]]] = {
    "pub_tenders": {
        "id": ("INTEGER", True), "name": ("TEXT", True), "email": ("TEXT", True),
        "email_key": ("TEXT", True), "active": ("INTEGER", True),
        "max_shifts": ("INTEGER", False), "created_at": ("TIME", True),
        "link_version": ("INTEGER", True),  # 0037
        "skills": ("TEXT", True),  # 0038
        "shift_reminders": ("INTEGER", True),  # 0044
    },
    "pub_schedule_runs": {
        "week_of": ("TEXT", True), "status": ("TEXT", True),
        "opened_at": ("TIME", False), "closed_at": ("TIME", False),
        "generated_at": ("TIME", False), "approved_at": ("TIME", False),
        "sent_at": ("TIME", False), "send_lease_at": ("TIME", False),
        "send_lease_holder": ("TEXT", False), "last_error": ("TEXT", False),
        "created_at": ("TIME", True),
        # 0033, 0034
        "settings_override": ("JSON", False), "reopened_at": ("TIME", False),
        # 0035
        "v2_state": ("TEXT", False), "acting_at": ("TIME", False),
        "acting_kind": ("TEXT", False), "collecting_alert_at": ("TIME", False),
        "unsent_alert_at": ("TIME", False), "autopilot": ("INTEGER", True),
        "kind": ("TEXT", True), "deadline_at": ("TIME", False), "opens_at": ("TIME", False),
        # 0036
        "version": ("BIGINT", True), "acting_token": ("BIGINT", True),
        "acting_holder": ("TEXT", False), "acting_failed_at": ("TIME", False),
        "generate_at": ("TIME", False), "send_window_at": ("TIME", False),
        "form_moved_at": ("TIME", False),  # 0052
    },
    "pub_shifts": {
        "id": ("INTEGER", True), "week_of": ("TEXT", True), "night": ("TEXT", True),
        "label": ("TEXT", True), "starts_at": ("TIME", True), "ends_at": ("TIME", True),
        "slots": ("INTEGER", True), "needs": ("TEXT", True),  # 0038
        "clock_note": ("TEXT", False),  # 0052
    },
    "pub_week_edits": {  # 0052
        "id": ("ID64", True), "week_of": ("TEXT", True), "kind": ("TEXT", True),
        "what": ("TEXT", True), "done_by": ("TEXT", False), "at": ("TIME", True),
    },
    "pub_shift_template": {  # 0038
        "id": ("ID64", True), "label": ("TEXT", True), "weekday": ("INTEGER", True),
        "start_time": ("TEXT", True), "end_time": ("TEXT", True), "slots": ("INTEGER", True),
        "needs": ("TEXT", True), "created_at": ("TIME", True),
    },
    "pub_removed_shifts": {  # 0042
        "id": ("ID64", True), "week_of": ("TEXT", True), "shift_id": ("INTEGER", True),
        "label": ("TEXT", True), "starts_at": ("TIME", True), "ends_at": ("TIME", True),
        "tenders": ("TEXT", True), "removed_at": ("TIME", True),
    },
    "pub_time_off": {  # 0043
        "id": ("ID64", True), "tender_id": ("INTEGER", True), "starts_on": ("TEXT", True),
        "ends_on": ("TEXT", True), "created_at": ("TIME", True),
    },
    "pub_mail": {  # 0049 (0044's pub_notices moved here)
        "id": ("ID64", True), "kind": ("TEXT", True), "about": ("TEXT", True),
        "recipient": ("TEXT", True),
        "week_of": ("TEXT", False), "state": ("TEXT", True), "version": ("BIGINT", True),
        "owed_at": ("TIME", True), "attempts": ("INTEGER", True), "retry_at": ("TIME", False),
        "sent_at": ("TIME", False), "error": ("TEXT", False), "address": ("TEXT", False),
        "subject": ("TEXT", False), "acting_at": ("TIME", False),
        "acting_kind": ("TEXT", False), "acting_token": ("BIGINT", True),
        "handover_at": ("TIME", False),  # 0055
    },
    "pub_calendar_sequences": {  # 0055
        "tender_id": ("INTEGER", True), "shift_id": ("INTEGER", True),
        "sequence": ("INTEGER", True),
    },
    "pub_covers": {  # 0045
        "id": ("BIGINT", True), "week_of": ("TEXT", True), "shift_id": ("INTEGER", True),
        "asked_by": ("INTEGER", True), "note": ("TEXT", False), "state": ("TEXT", True),
        "version": ("BIGINT", True), "starts_at": ("TIME", True), "asked_at": ("TIME", True),
        "taken_by": ("INTEGER", False), "taken_at": ("TIME", False),
        "closed_at": ("TIME", False),
    },
    "pub_usual": {  # 0046
        "tender_id": ("INTEGER", True), "max_shifts": ("INTEGER", False),
        "saved_at": ("TIME", True),
    },
    "pub_usual_shifts": {  # 0046
        "tender_id": ("INTEGER", True), "weekday": ("INTEGER", True),
        "start_time": ("TEXT", True),
    },
    "pub_tick_status": {  # 0047
        "name": ("TEXT", True), "last_started_at": ("TIME", False),
        "last_success_at": ("TIME", False), "last_duration_seconds": ("REAL", False),
        "last_failure_at": ("TIME", False), "last_error": ("TEXT", False),
    },
    "pub_operators": {  # 0040
        "id": ("ID64", True), "email": ("TEXT", True), "email_key": ("TEXT", True),
        "password_hash": ("TEXT", True), "created_at": ("TIME", True),
        "last_login_at": ("TIME", False),
    },
    "pub_availability": {
        "week_of": ("TEXT", True), "tender_id": ("INTEGER", True),
        "max_shifts": ("INTEGER", False), "submitted_at": ("TIME", True),
        "updated_at": ("TIME", True), "source": ("TEXT", True),  # 0046
    },
    "pub_availability_shifts": {
        "week_of": ("TEXT", True), "tender_id": ("INTEGER", True),
        "shift_id": ("INTEGER", True),
    },
    "pub_assignments": {
        "week_of": ("TEXT", True), "shift_id": ("INTEGER", True),
        "tender_id": ("INTEGER", True), "assigned_at": ("TIME", True),
        "approved_at": ("TIME", False),
    },
    "pub_roster_edits": {  # 0041
        "week_of": ("TEXT", True), "shift_id": ("INTEGER", True),
        "tender_id": ("INTEGER", True), "kind": ("TEXT", True), "at": ("TIME", True),
    },
    "pub_rehearsals": {  # 0039
        "id": ("ID64", True), "started_at": ("TIME", True), "finished_at": ("TIME", False),
        "outcome": ("TEXT", False), "week_of": ("TEXT", True),
        "step_reached": ("INTEGER", True), "acting_since": ("TIME", False),
        "steps": ("TEXT", True), "failure": ("TEXT", False), "scratch": ("TEXT", True),
        "started_by": ("TEXT", False),
    },
    "pub_flags": {"name": ("TEXT", True), "value": ("TEXT", True),
                  "changed_at": ("TIME", True)},
    "pub_mail_log": {
        "id": ("ID64", True), "week_of": ("TEXT", False), "kind": ("TEXT", True),
        "recipient": ("TEXT", True), "subject": ("TEXT", True), "at": ("TIME", True),
    },
    "rowstate_events": {
        "id": ("ID64", True), "machine": ("TEXT", True), "row_key": ("TEXT", True),
        "edge": ("TEXT", False), "from_state": ("TEXT", False), "to_state": ("TEXT", True),
        "owner": ("TEXT", False), "data": ("JSON", False), "version": ("BIGINT", False),
        "created_at": ("TIME", True), "delivered_at": ("TIME", False),
        "actor": ("TEXT", False), "note": ("TEXT", False),  # 0048
    },
}

EXPECTED_INDEXES = {
    "idx_pub_runs_v2_collecting": "CREATE UNIQUE INDEX idx_pub_runs_v2_collecting ON "
                                  "pub_schedule_runs (v2_state) WHERE",
    "idx_pub_schedule_runs_lease": "ON pub_schedule_runs (acting_at) WHERE",
    "idx_pub_schedule_runs_opens_at": "ON pub_schedule_runs (v2_state, opens_at) WHERE",
    "idx_pub_schedule_runs_deadline_at": "ON pub_schedule_runs (v2_state, deadline_at) WHERE",
    "idx_pub_schedule_runs_generate_at": "ON pub_schedule_runs (v2_state, generate_at) WHERE",
    "idx_pub_schedule_runs_send_window_at":
        "ON pub_schedule_runs (v2_state, send_window_at) WHERE",
    "rowstate_events_row": "ON rowstate_events (machine, row_key, id)",
    "rowstate_events_undelivered": "ON rowstate_events (id) WHERE",
    "idx_pub_assignments_week": "ON pub_assignments (week_of, tender_id)",
    "idx_pub_mail_log_week": "ON pub_mail_log (week_of, id)",
    "idx_pub_rehearsals_running": "CREATE UNIQUE INDEX idx_pub_rehearsals_running ON "
                                  "pub_rehearsals",  # 0039
    "idx_pub_removed_shifts_week": "ON pub_removed_shifts (week_of, id)",  # 0042
    "idx_pub_shift_template_start": "CREATE UNIQUE INDEX idx_pub_shift_template_start ON "
                                    "pub_shift_template (weekday, start_time)",
    "idx_pub_roster_edits_week": "ON pub_roster_edits (week_of)",  # 0041
    "idx_pub_time_off_days": "ON pub_time_off (starts_on, ends_on)",  # 0043
    "idx_pub_mail_owed": "ON pub_mail (state, id) WHERE",  # 0049
    "idx_pub_mail_about": "ON pub_mail (about, id)",  # 0049
    "idx_pub_mail_week": "ON pub_mail (week_of, id)",  # 0049
    "idx_pub_mail_lease": "ON pub_mail (acting_at) WHERE",  # 0049
    "idx_pub_mail_retry_at": "ON pub_mail (state, retry_at) WHERE",  # 0049
    "idx_pub_covers_one_open": "CREATE UNIQUE INDEX idx_pub_covers_one_open ON "
                               "pub_covers (shift_id, asked_by, state) WHERE",  # 0045
    "idx_pub_covers_starts_at": "ON pub_covers (state, starts_at) WHERE",  # 0045
    "idx_pub_covers_week": "ON pub_covers (week_of, id)",  # 0045
    "idx_pub_covers_taker": "ON pub_covers (taken_by, taken_at) WHERE",  # 0045
}


def dialect(url: str) -> str:
    return pubdb.dialect_of(url)


def expected_type(url: str, kind: str) -> str:
    d = dialect(url)
    if kind == "TIME":
        return TIME[d]
    if kind == "JSON":
        return JSON[d]
    return TYPES[d][kind]


# -- applying ---------------------------------------------------------------------------------


def test_every_migration_applies_from_scratch_and_again_is_a_no_op(db_url: str) -> None:
    assert mig.status(db_url) == [(v, False) for v in ALL]
    assert mig.migrate(db_url) == ALL
    assert mig.migrate(db_url) == []
    assert mig.migrate(db_url, to="0033") == []  # never a downgrade
    assert mig.status(db_url) == [(v, True) for v in ALL]


def test_migrate_to_a_version_stops_there(db_url: str) -> None:
    assert mig.migrate(db_url, to="0034") == ["0001", "0032", "0033", "0034"]
    assert mig.status(db_url)[4:] == [(v, False) for v in AFTER_0034]
    assert mig.migrate(db_url) == AFTER_0034
    with pytest.raises(mig.MigrationError, match="no migration version '0099'"):
        mig.migrate(db_url, to="0099")


def test_the_schema_has_every_table_column_and_index(
        db_url: str, stores: list[pubdb.Store]) -> None:
    mig.migrate(db_url)
    assert tables(db_url, stores) >= {*EXPECTED, mig.TABLE}
    for table, want in EXPECTED.items():
        have = columns(db_url, stores, table)
        assert set(have) == set(want), table
        for name, (kind, notnull) in want.items():
            got = have[name]
            assert got.type == expected_type(db_url, kind), (table, name, got)
            # SQLite reports an INTEGER PRIMARY KEY as nullable; it is the rowid
            assert got.notnull == notnull or name == "id", (table, name)
    runs = columns(db_url, stores, "pub_schedule_runs")
    assert "pending" in str(runs["status"].default)
    assert str(runs["autopilot"].default) == "0"
    assert "week" in str(runs["kind"].default)
    assert runs["v2_state"].default in (None, "NULL")
    assert str(runs["version"].default) == "0"
    assert str(runs["acting_token"].default) == "0"
    have = indexes(db_url, stores)
    for name, fragment in EXPECTED_INDEXES.items():
        assert name in have, name
        assert fragment in have[name], (name, have[name])
    where = have["idx_pub_runs_v2_collecting"].split(" WHERE ", 1)[1]
    assert re.sub(r"::text|[()]", "", where) == "v2_state = 'COLLECTING'"


def test_sqlite_times_default_to_the_canonical_form(tmp_path: Path,
                                                    stores: list[pubdb.Store]) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    mig.migrate(url)
    sql(url, stores, "INSERT INTO pub_schedule_runs (week_of) VALUES (%s)", ["2026-03-02"])
    raw = sqlite3.connect(f"{tmp_path}/t.db")
    try:
        (created,) = raw.execute("SELECT created_at FROM pub_schedule_runs").fetchone()
    finally:
        raw.close()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", created)


# -- constraints ------------------------------------------------------------------------------


def insert_run(url: str, stores: list[pubdb.Store], week: str, **cols: Any) -> None:
    cols = {"week_of": week, "created_at": T0, **cols}
    names = ", ".join(cols)
    marks = ", ".join(f"%({c})s" for c in cols)
    sql(url, stores, f"INSERT INTO pub_schedule_runs ({names}) VALUES ({marks})", cols)


def test_h3_a_second_collecting_run_is_refused(db_url: str, stores: list[pubdb.Store]) -> None:
    mig.migrate(db_url)
    insert_run(db_url, stores, "2026-03-02", v2_state="COLLECTING")
    insert_run(db_url, stores, "2026-03-09", v2_state="DRAFT")
    with pytest.raises(rowstate.InvariantViolation) as caught:
        insert_run(db_url, stores, "2026-03-16", v2_state="COLLECTING")
    if dialect(db_url) == "postgresql":
        assert caught.value.index == "idx_pub_runs_v2_collecting"
    with pytest.raises(rowstate.InvariantViolation):
        sql(db_url, stores, "UPDATE pub_schedule_runs SET v2_state = 'COLLECTING' "
                            "WHERE week_of = %s", ["2026-03-09"])
    # other states may repeat; NULL (not yet adopted) too
    insert_run(db_url, stores, "2026-03-23", v2_state="DRAFT")
    insert_run(db_url, stores, "2026-03-30")
    insert_run(db_url, stores, "2026-04-06")


def test_the_legacy_status_check_refuses_bogus(db_url: str, stores: list[pubdb.Store]) -> None:
    mig.migrate(db_url)
    with pytest.raises(rowstate.StoreError, match=r"pub_schedule_runs_status_check|CHECK"):
        insert_run(db_url, stores, "2026-03-02", status="bogus")
    insert_run(db_url, stores, "2026-03-02")
    with pytest.raises(rowstate.StoreError, match=r"pub_schedule_runs_status_check|CHECK"):
        sql(db_url, stores, "UPDATE pub_schedule_runs SET status = 'COLLECTING'")
    assert sql(db_url, stores, "SELECT status FROM pub_schedule_runs") == [
        {"status": "pending"}]


def test_the_other_constraints(db_url: str, stores: list[pubdb.Store]) -> None:
    mig.migrate(db_url, to="0049")  # pub_deliveries' own, below: 0050 moves it to pub_mail
    tender = ("INSERT INTO pub_tenders (name, email, email_key, created_at) "
              "VALUES (%s, %s, %s, %s) RETURNING id, active, link_version")
    (row,) = sql(db_url, stores, tender, ["Ann", "Ann@X.org", "ann@x.org", T0])
    assert (row["active"], row["link_version"]) == (1, 1)
    with pytest.raises(rowstate.InvariantViolation):  # email unique, case-insensitively
        sql(db_url, stores, tender, ["Ann 2", "ANN@x.org", "ann@x.org", T0])
    insert_run(db_url, stores, "2026-03-02")
    shift = ("INSERT INTO pub_shifts (week_of, night, label, starts_at, ends_at, slots) "
             "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id")
    sql(db_url, stores, shift, ["2026-03-02", "2026-03-05", "Thu", T0, T0, 2])
    with pytest.raises(rowstate.InvariantViolation):  # UNIQUE (week_of, starts_at)
        sql(db_url, stores, shift, ["2026-03-02", "2026-03-05", "Thu", T0, T0, 2])
    with pytest.raises(rowstate.StoreError):  # slots >= 0
        sql(db_url, stores, shift, ["2026-03-02", "2026-03-06", "Fri", T0.replace(day=6),
                                    T0, -1])
    delivery = ("INSERT INTO pub_deliveries (week_of, tender_id, email, status, attempted_at) "
                "VALUES (%s, %s, %s, %s, %s)")
    with pytest.raises(rowstate.StoreError):
        sql(db_url, stores, delivery, ["2026-03-02", row["id"], "a@x.org", "maybe", T0])
    sql(db_url, stores, delivery, ["2026-03-02", row["id"], "a@x.org", "in_flight", T0])
    with pytest.raises(rowstate.InvariantViolation):  # once per (week, tender)
        sql(db_url, stores, delivery, ["2026-03-02", row["id"], "a@x.org", "sent", T0])


# -- the data fix and the no-behaviour-change promise --------------------------------------


def test_0032_marks_only_unsent_pending_weeks_before_the_cut_off(
        db_url: str, stores: list[pubdb.Store]) -> None:
    mig.migrate(db_url, to="0001")
    insert_run(db_url, stores, "2025-12-22")                    # pending, never sent
    insert_run(db_url, stores, "2025-12-29", sent_at=T0)        # pending but stamped
    insert_run(db_url, stores, "2025-12-15", status="approved")
    insert_run(db_url, stores, "2026-01-05")                    # the first app week
    insert_run(db_url, stores, "2026-03-02")
    assert mig.migrate(db_url, to="0032") == ["0032"]
    got = {r["week_of"]: (r["status"], r["sent_at"]) for r in sql(
        db_url, stores, "SELECT week_of, status, sent_at FROM pub_schedule_runs")}
    assert got == {
        "2025-12-22": ("sent", None),
        "2025-12-29": ("pending", T0),
        "2025-12-15": ("approved", None),
        "2026-01-05": ("pending", None),
        "2026-03-02": ("pending", None),
    }


def test_applying_0035_to_legacy_rows_changes_no_behaviour(
        db_url: str, stores: list[pubdb.Store]) -> None:
    mig.migrate(db_url, to="0034")
    legacy_columns = sorted(columns(db_url, stores, "pub_schedule_runs"))
    t = [T0.replace(hour=h) for h in range(8)]
    insert_run(db_url, stores, "2026-02-16", status="sent", opened_at=t[0], closed_at=t[1],
               generated_at=t[2], approved_at=t[3], sent_at=t[4],
               settings_override='{"deadline": "Wed 18:00"}', reopened_at=t[2])
    insert_run(db_url, stores, "2026-02-23", status="approved", opened_at=t[0],
               closed_at=t[1], generated_at=t[2], approved_at=t[3], send_lease_at=t[5],
               send_lease_holder="worker-1", last_error="SMTP 451")
    insert_run(db_url, stores, "2026-03-02", status="pending", opened_at=t[0])
    insert_run(db_url, stores, "2026-03-09")
    select = f"SELECT {', '.join(legacy_columns)} FROM pub_schedule_runs ORDER BY week_of"
    before = sql(db_url, stores, select)
    assert mig.migrate(db_url) == AFTER_0034

    assert sql(db_url, stores, select) == before
    new = sql(db_url, stores, "SELECT v2_state, autopilot, kind, acting_at, acting_kind, "
                              "version, acting_token, deadline_at FROM pub_schedule_runs")
    assert new == [{"v2_state": None, "autopilot": 0, "kind": "week", "acting_at": None,
                    "acting_kind": None, "version": 0, "acting_token": 0,
                    "deadline_at": None}] * 4
    # the legacy engine's own writes still work: a row named by legacy columns only, its
    # send lease claimed (AD-12), the status moved by the old vocabulary
    insert_run(db_url, stores, "2026-03-16")
    claimed = sql(db_url, stores,
                  "UPDATE pub_schedule_runs SET send_lease_at = %s, send_lease_holder = %s "
                  "WHERE week_of = %s AND status = 'approved' AND sent_at IS NULL "
                  "AND send_lease_at IS NULL RETURNING week_of", [t[6], "w2", "2026-03-16"])
    assert claimed == []
    sql(db_url, stores, "UPDATE pub_schedule_runs SET status = 'approved', approved_at = %s "
                        "WHERE week_of = %s", [t[6], "2026-03-16"])
    claimed = sql(db_url, stores,
                  "UPDATE pub_schedule_runs SET send_lease_at = %s, send_lease_holder = %s "
                  "WHERE week_of = %s AND status = 'approved' AND sent_at IS NULL "
                  "AND send_lease_at IS NULL RETURNING week_of", [t[6], "w2", "2026-03-16"])
    assert claimed == [{"week_of": "2026-03-16"}]


# -- the runner's refusals -----------------------------------------------------------------


def shipped(url: str) -> list[mig.Migration]:
    return list(mig.load(pubdb.dialect_of(url)))


def test_0049_moves_the_notices_outbox_onto_the_mail_machine(
        db_url: str, stores: list[pubdb.Store]) -> None:
    """Every notice keeps its identity, tries and error, in the state its status meant: a
    pending one is owed, one in flight may have arrived (UNKNOWN, never re-sent on its
    own), a failed one with tries left is due again at once, one out of tries stays
    refused with no retry, in the order they were owed."""
    mig.migrate(db_url, to="0048")
    rows = [("pending", 0, None), ("in_flight", 1, "lost"), ("sent", 1, None),
            ("failed", 2, "550 no"), ("failed", 5, "550 no"), ("dropped", 1, None)]
    for i, (status, attempts, error) in enumerate(rows):
        sql(db_url, stores, "INSERT INTO pub_notices (kind, about, recipient, week_of, status, "
            "attempts, created_at, attempted_at, error) VALUES ('cover_offer', %s, "
            "'operator', '2026-03-02', %s, %s, %s, %s, %s)",
            [f"cover:{9 - i}", status, attempts, T0, T0 if attempts else None, error])
    stores.pop().close()
    assert mig.migrate(db_url, to="0049") == ["0049"]
    got = sql(db_url, stores, "SELECT about, state, attempts, retry_at, error FROM pub_mail "
              "ORDER BY id")
    assert [(r["about"], r["state"], r["attempts"], r["error"]) for r in got] == [
        ("cover:9", "OWED", 0, None), ("cover:8", "UNKNOWN", 1, "lost"),
        ("cover:7", "SENT", 1, None), ("cover:6", "REFUSED", 2, "550 no"),
        ("cover:5", "REFUSED", 5, "550 no"), ("cover:4", "DROPPED", 1, None)]
    retry = [r["retry_at"] for r in got]
    assert retry[3] is not None and [r for i, r in enumerate(retry) if i != 3] == [None] * 5
    assert "pub_notices" not in {r["name"] for r in sql(db_url, stores, (
        "SELECT name FROM sqlite_master WHERE type = 'table'" if db_url.startswith("sqlite:")
        else "SELECT table_name AS name FROM information_schema.tables "
             "WHERE table_schema = current_schema()"))}


def test_0050_moves_the_schedule_deliveries_onto_the_mail_machine(
        db_url: str, stores: list[pubdb.Store]) -> None:
    """Each recipient's record of a send becomes the schedule's mail for that tender, in
    the state its status meant (sent SENT, failed REFUSED with no timer: the send's retry
    tries it, in flight UNKNOWN: never re-sent on its own), with its address and error,
    and pub_deliveries is gone."""
    mig.migrate(db_url, to="0049")
    tender = ("INSERT INTO pub_tenders (name, email, email_key, created_at) "
              "VALUES (%s, %s, %s, %s) RETURNING id")
    ids = [sql(db_url, stores, tender, [n, f"{n}@x.org", f"{n}@x.org", T0])[0]["id"]
           for n in ("ann", "bob", "cy")]
    insert_run(db_url, stores, "2026-03-02")
    for tid, (status, error) in zip(ids, [("sent", None), ("failed", "550 no"),
                                          ("in_flight", "lost")], strict=True):
        sql(db_url, stores, "INSERT INTO pub_deliveries (week_of, tender_id, email, status, "
            "attempted_at, sent_at, error) VALUES ('2026-03-02', %s, %s, %s, %s, %s, %s)",
            [tid, f"t{tid}@x.org", status, T0, T0 if status == "sent" else None, error])
    stores.pop().close()
    assert mig.migrate(db_url, to="0050") == ["0050"]
    got = sql(db_url, stores, "SELECT kind, about, recipient, week_of, state, attempts, "
              "retry_at, error, address FROM pub_mail ORDER BY recipient")
    assert [tuple(r.values()) for r in got] == [
        ("schedule", "2026-03-02", f"tender:{ids[0]}", "2026-03-02", "SENT", 1, None, None,
         f"t{ids[0]}@x.org"),
        ("schedule", "2026-03-02", f"tender:{ids[1]}", "2026-03-02", "REFUSED", 1, None,
         "550 no", f"t{ids[1]}@x.org"),
        ("schedule", "2026-03-02", f"tender:{ids[2]}", "2026-03-02", "UNKNOWN", 1, None,
         "lost", f"t{ids[2]}@x.org")]
    assert "pub_deliveries" not in tables(db_url, stores)


def test_a_changed_applied_migration_is_refused(db_url: str) -> None:
    mig.migrate(db_url, to="0034")
    changed = shipped(db_url)
    changed[2] = replace(changed[2], sql=changed[2].sql + "\n-- an innocent edit\n")
    with pytest.raises(mig.MigrationError,
                       match=r"0033_settings_override\.\w+\.sql was changed after it was "
                             r"applied"):
        mig.migrate(db_url, migrations=changed)
    assert mig.status(db_url)[4:] == [(v, False) for v in AFTER_0034]
    assert mig.migrate(db_url) == AFTER_0034  # nothing was applied


def test_an_unknown_applied_version_is_refused(db_url: str) -> None:
    mig.migrate(db_url)
    with pytest.raises(mig.MigrationError, match=f"{LAST} applied that this version"):
        mig.migrate(db_url, migrations=shipped(db_url)[:-1])


def test_a_migration_numbered_below_an_applied_one_is_refused(db_url: str) -> None:
    mig.migrate(db_url)
    late = mig.Migration("0010", "late", pubdb.dialect_of(db_url),
                         "CREATE TABLE pub_late (x INTEGER);\n")
    with pytest.raises(mig.MigrationError, match=f"0010 are numbered below {LAST}"):
        mig.migrate(db_url, migrations=sorted([*shipped(db_url), late],
                                              key=lambda m: m.version))


def test_a_failing_migration_is_rolled_back_whole(db_url: str,
                                                  stores: list[pubdb.Store]) -> None:
    mig.migrate(db_url)
    broken = mig.Migration("0099", "broken", pubdb.dialect_of(db_url),
                           "CREATE TABLE pub_probe (x INTEGER);\n"
                           "ALTER TABLE pub_schedule_runs ADD COLUMN probe TEXT;\n"
                           "SELECT no_such_column FROM pub_probe;\n")
    with pytest.raises(mig.MigrationError, match=r"0099_broken\.\w+\.sql failed at statement 3"):
        mig.migrate(db_url, migrations=[*shipped(db_url), broken])
    assert "pub_probe" not in tables(db_url, stores)
    assert "probe" not in columns(db_url, stores, "pub_schedule_runs")
    versions = sql(db_url, stores, f"SELECT version FROM {mig.TABLE} ORDER BY version")
    assert [r["version"] for r in versions] == ALL


def test_a_migration_of_the_other_dialect_is_refused(db_url: str) -> None:
    other = "postgresql" if pubdb.dialect_of(db_url) == "sqlite" else "sqlite"
    with pytest.raises(mig.MigrationError, match="is for"):
        mig.migrate(db_url, migrations=list(mig.load(other)))  # type: ignore[arg-type]


def test_concurrent_migrations_apply_each_version_once(db_url: str,
                                                       stores: list[pubdb.Store]) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def one() -> None:
        try:
            start.wait()
            results.append(mig.migrate(db_url))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert errors == []
    assert len(results) == 4
    applied = sorted(v for r in results for v in r)
    assert applied == ALL  # each version applied by exactly one of them
    versions = sql(db_url, stores, f"SELECT version FROM {mig.TABLE} ORDER BY version")
    assert [r["version"] for r in versions] == ALL


def test_concurrent_migrator_processes_apply_each_version_once(
        db_url: str, stores: list[pubdb.Store]) -> None:
    """Two app instances starting at once: separate processes, each migrating first."""
    code = ("import json, sys, pubsched.db.migrate as m; "
            "print(json.dumps(m.migrate(sys.argv[1])))")
    procs = [subprocess.Popen([sys.executable, "-c", code, db_url], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(json.loads(out))
    assert sorted(v for applied in outputs for v in applied) == ALL
    versions = sql(db_url, stores, f"SELECT version FROM {mig.TABLE} ORDER BY version")
    assert [r["version"] for r in versions] == ALL


def test_a_migrator_that_dies_leaves_no_lock_behind(db_url: str) -> None:
    """The lock lives in a transaction, so it goes with its connection: a migrator killed
    while holding it (here: its connection closed mid-transaction) never blocks the next
    one for longer than it lived (yoyo's lock row would, until someone breaks it)."""
    import psycopg

    holder: sqlite3.Connection | psycopg.Connection[Any]
    if dialect(db_url) == "sqlite":
        holder = sqlite3.connect(str(pubdb.sqlite_path(db_url)), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    else:
        holder = psycopg.connect(db_url, autocommit=True)
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (mig.LOCK_KEY,))
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def waiting() -> None:
        try:
            results.append(mig.migrate(db_url))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    migrator = threading.Thread(target=waiting)
    migrator.start()
    try:
        migrator.join(1.0)
        assert migrator.is_alive() and results == [] and errors == []  # it waits
    finally:
        holder.close()  # the holder dies mid-transaction
    migrator.join(30)
    assert errors == []
    assert results == [ALL]


# -- the files ----------------------------------------------------------------------------------


def test_every_version_has_both_dialects_and_splits_cleanly() -> None:
    sqlite_ms, pg_ms = mig.load("sqlite"), mig.load("postgresql")
    assert [m.version for m in sqlite_ms] == [m.version for m in pg_ms] == ALL
    for m in (*sqlite_ms, *pg_ms):
        statements = m.statements()
        assert statements, m.filename
        for stmt in statements:
            assert sqlite3.complete_statement(stmt + ";"), (m.filename, stmt)
            assert not re.match(r"(BEGIN|COMMIT|ROLLBACK)\b", stmt, re.IGNORECASE)


def test_the_splitter() -> None:
    text = ("-- a header; with a semicolon inside\n"
            "CREATE TABLE a (x INTEGER);   -- trailing comment\n"
            "\n"
            "ALTER TABLE a\n    ADD COLUMN y TEXT;\n"
            "-- only a comment at the end\n")
    assert mig.split_statements(text) == [
        "-- a header; with a semicolon inside\nCREATE TABLE a (x INTEGER)",
        "ALTER TABLE a\n    ADD COLUMN y TEXT",
    ]


def test_an_in_memory_database_is_migrated_through_its_store() -> None:
    with pytest.raises(mig.MigrationError, match="in-memory"):
        mig.migrate("sqlite://")
    store = pubdb.open_store("sqlite://", migrate=True)
    try:
        with store.atomic() as tx:
            tx.execute("INSERT INTO pub_schedule_runs (week_of, created_at) VALUES (%s, %s)",
                       ["2026-03-02", T0])
            rows = tx.execute("SELECT v2_state, autopilot FROM pub_schedule_runs")
        assert rows == [{"v2_state": None, "autopilot": 0}]
    finally:
        store.close()


def test_open_store_with_migrate(db_url: str, stores: list[pubdb.Store]) -> None:
    stores.append(pubdb.open_store(db_url, migrate=True))
    assert mig.status(db_url) == [(v, True) for v in ALL]
    assert sql(db_url, stores, "SELECT count(*) AS n FROM pub_schedule_runs") == [{"n": 0}]


def test_the_deployment_step(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path}/deploy.db"
    assert mig.main(["--status", url]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{v} pending" for v in ALL]
    assert mig.main(["--to", "0034", url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "applied 0001", "applied 0032", "applied 0033", "applied 0034"]
    monkeypatch.setenv("PUBSCHED_DB", url)  # the URL's default
    assert mig.main([]) == 0
    assert capsys.readouterr().out.splitlines() == [f"applied {v}" for v in ALL[4:]]
    assert mig.main([url]) == 0
    assert capsys.readouterr().out == "up to date\n"
    assert mig.main(["--to", "0099", url]) == 1
    assert "no migration version '0099'" in capsys.readouterr().err
    assert mig.main(["mysql://x"]) == 2
    assert "unsupported database URL" in capsys.readouterr().err


# -- the URL --------------------------------------------------------------------------------


def test_database_url() -> None:
    assert pubdb.database_url({}) == "sqlite:///pubsched.db"
    assert pubdb.database_url({"PUBSCHED_DB": "  "}) == "sqlite:///pubsched.db"
    assert pubdb.database_url({"PUBSCHED_DB": "postgresql://u@h/db"}) == "postgresql://u@h/db"
    for cluster in ("postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write",
                    "host=h1,h2 port=5432,5433 dbname=db target_session_attrs=read-write"):
        assert pubdb.database_url({"PUBSCHED_DB": cluster}) == cluster
        assert pubdb.dialect_of(cluster) == "postgresql"
    with pytest.raises(pubdb.DatabaseURLError, match="unsupported"):
        pubdb.dialect_of("postgresql+asyncpg://u@h/db")  # another driver's URL, not libpq's
    with pytest.raises(pubdb.DatabaseURLError, match="PUBSCHED_DB: unsupported"):
        pubdb.database_url({"PUBSCHED_DB": "mysql://x"})
    with pytest.raises(pubdb.DatabaseURLError, match="PUBSCHED_DB: SQLite URLs"):
        pubdb.database_url({"PUBSCHED_DB": "sqlite:pubsched.db"})


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:///rel/p.db", "rel/p.db"), ("sqlite:///{tmp}/p.db", "{tmp}/p.db"),
    ("sqlite:///a%20b.db", "a b.db"), ("sqlite://", None), ("sqlite:///:memory:", None),
])
def test_sqlite_paths_agree_with_rowstate(url: str, path: str | None, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """pubsched's migrator and rowstate's store must open the same file for one URL. The
    store opens (creates) its file when built: in a directory of the test's own."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    url = url.replace("{tmp}", str(tmp_path))  # sqlite:////tmp/...: an absolute path
    path = path.replace("{tmp}", str(tmp_path)) if path else path
    assert pubdb.sqlite_path(url) == path
    store = rowstate.connect(url)
    try:
        assert isinstance(store, rowstate.stores.SQLiteStore)
        assert store.path == (path or ":memory:")
    finally:
        store.close()


# -- against rowstate's own DDL ---------------------------------------------------------------

# The seed's binding of pub_schedule_runs, as rowstate would be asked to create it: every
# lease column, the timed edges of autopilot and the two nudges, H3 under its migration
# name. The real one is pubsched.runs.RUNS; this one only asks rowstate which columns and
# indexes such a binding needs, so that a schema short of them fails here first.
SEED_RUN = Machine(
    "pub_run",
    states=["DRAFT", "COLLECTING", "CLOSED", "ASSIGNED", "APPROVED", "SENT"],
    initial="DRAFT",
    active=["COLLECTING", "CLOSED", "ASSIGNED", "APPROVED"],
    edges=[
        Edge("open", "DRAFT", "COLLECTING"),
        Edge("extend", "COLLECTING", "COLLECTING"),
        Edge("close", "COLLECTING", "CLOSED", lease="close"),
        Edge("reopen", "CLOSED", "COLLECTING"),
        Edge("generate", "CLOSED", "ASSIGNED", lease="generate"),
        Edge("regenerate", "ASSIGNED", "ASSIGNED", lease="generate"),
        Edge("reopen_after_generate", "ASSIGNED", "COLLECTING"),
        Edge("approve", "ASSIGNED", "APPROVED"),
        Edge("unapprove", "APPROVED", "ASSIGNED"),
        Edge("send", "APPROVED", "SENT", lease="send"),
    ],
)
SEED_RUNS = Binding(
    SEED_RUN,
    table="pub_schedule_runs",
    key=("week_of",),
    state="v2_state",
    derived=Derived("status", {"pending": "DRAFT", "approved": "APPROVED", "sent": "SENT"}),
    version="version",
    lease=Lease(at="acting_at", kind="acting_kind", token="acting_token",
                holder="acting_holder", error="last_error", failed_at="acting_failed_at"),
    on_enter={"APPROVED": {"status": "approved", "approved_at": NOW},
              "SENT": {"status": "sent", "sent_at": NOW}},
    columns=("autopilot", "kind"),
    json_columns=("settings_override",),
    invariants=(Unique("COLLECTING", name="idx_pub_runs_v2_collecting"),),
    timers=(TimedEdge("open", due="opens_at", guards={"autopilot": 1}),
            TimedEdge("close", due="deadline_at", guards={"autopilot": 1}),
            TimedEdge("generate", due="generate_at", guards={"autopilot": 1})),
    notices=(Notice("collecting_alert", ("COLLECTING",), due="deadline_at",
                    claim="collecting_alert_at"),
             Notice("unsent_alert", ("APPROVED",), due="send_window_at",
                    claim="unsent_alert_at")),
    column_types={"autopilot": "INTEGER NOT NULL DEFAULT 0",
                  "kind": "TEXT NOT NULL DEFAULT 'week'",
                  "status": "TEXT NOT NULL DEFAULT 'pending'"},
)


@pytest.fixture
def reference_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty database of the same kind, for rowstate's own DDL: a SQLite file,
    or a fresh schema of the same PostgreSQL database."""
    if dialect(db_url) == "sqlite":
        yield f"sqlite:///{tmp_path}/reference.db"
        return
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA reference")
    sep = "&" if "?" in db_url else "?"
    yield f"{db_url}{sep}options=-csearch_path%3Dreference"


def _pubsched_runs() -> Binding:
    from pubsched.machine import RUNS

    return RUNS


def _pubsched_covers() -> Binding:
    from pubsched.covers.machine import COVERS

    return COVERS


def _pubsched_mails() -> Binding:
    from pubsched.deliveries.machine import MAILS

    return MAILS


@pytest.mark.parametrize("binding", [SEED_RUNS, _pubsched_runs(), _pubsched_covers(),
                                     _pubsched_mails()],
                         ids=["seed", "RUNS", "COVERS", "MAILS"])
def test_runs_and_events_match_what_rowstate_would_create(
        db_url: str, reference_url: str, stores: list[pubdb.Store], binding: Binding) -> None:
    mig.migrate(db_url)
    ref_stores: list[pubdb.Store] = []
    try:
        ref = pubdb.open_store(reference_url)
        ref_stores.append(ref)
        ref.execute_script(binding.schema_sql(pubdb.dialect_of(reference_url)))
        # a plain payload column with no declared type is TEXT in rowstate's quick-start DDL
        # only because rowstate cannot know better; the migrations type it (times, JSON)
        untyped = (set(binding.payload) | set(binding.columns)) - set(binding.column_types)
        for table in (binding.table, "rowstate_events"):
            want = columns(reference_url, ref_stores, table)
            have = columns(db_url, stores, table)
            for name, col in want.items():
                assert name in have, (table, name)
                if not (table == binding.table and name in untyped):
                    assert have[name].type == col.type, (table, name, have[name], col)
                assert have[name].notnull or not col.notnull, (table, name)
                if col.default is not None and table == binding.table:
                    assert have[name].default == col.default, (table, name)
        # the events table: exactly rowstate's layout
        assert columns(db_url, stores, "rowstate_events") == columns(
            reference_url, ref_stores, "rowstate_events")
        want_ix, have_ix = indexes(reference_url, ref_stores), indexes(db_url, stores)
        for name, definition in want_ix.items():
            assert have_ix.get(name) == definition, name
    finally:
        for store in ref_stores:
            store.close()


@pytest.mark.parametrize("binding", [_pubsched_runs(), _pubsched_covers(), _pubsched_mails()],
                         ids=["RUNS", "COVERS", "MAILS"])
def test_the_final_schema_passes_check_schema(db_url: str, stores: list[pubdb.Store],
                                              binding: Binding) -> None:
    """The bindings' own verdict on the migrated schema: pubsched's RUNS (the v2 machine on
    pub_schedule_runs) and COVERS (the cover request on pub_covers) find every column, type
    and index they need, events table included."""
    mig.migrate(db_url)
    stores.append(pubdb.open_store(db_url))
    binding.check_schema(stores[0])


def test_check_schema_names_what_an_unfinished_migration_lacks(
        db_url: str, stores: list[pubdb.Store]) -> None:
    """Stopped at 0035, the schema lacks the engine's columns (0036): said, not guessed."""
    from pubsched.machine import RUNS

    mig.migrate(db_url, to="0035")
    stores.append(pubdb.open_store(db_url))
    with pytest.raises(rowstate.SchemaMismatch) as caught:
        RUNS.check_schema(stores[0])
    text = "\n".join(caught.value.problems)
    for missing in ("acting_token", "version", "acting_failed_at", "generate_at",
                    "send_window_at", "rowstate_events"):
        assert missing in text
