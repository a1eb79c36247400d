"""The machines and bindings the benchmarks run, and the hand-written SQL they race.

Each binding is the smallest realistic one for its case, and each baseline statement does
the same work as the library's write: if the library bumps ``version``, so does the
baseline; if it stamps the claim time with the database clock, so does the baseline.
"""

from __future__ import annotations

from rowstate import Binding, Edge, FinalizationClaim, Lease, Machine, TimedEdge, Unique

# -- case 1, 2, 5, 6: A <-> B --------------------------------------------------------------

AB = Machine("bench_ab", states=["A", "B"], initial="A",
             edges=[Edge("go", "A", "B"), Edge("back", "B", "A")])
EDGE_INTO = {"B": "go", "A": "back"}
OTHER = {"A": "B", "B": "A"}


def ab_binding(table: str, events: str | None = None) -> Binding:
    return Binding(AB, table=table, key=("id",), state="state", version="version",
                   events=events, column_types={"id": "BIGINT"})


# -- case 3: every move is a leased edge ----------------------------------------------------

LEASED = Machine("bench_leased", states=["A", "B"], initial="A",
                 edges=[Edge("work", "A", "B", lease="work"),
                        Edge("undo", "B", "A", lease="work")])
LEASED_EDGE = {"A": "work", "B": "undo"}


def leased_binding(table: str) -> Binding:
    return Binding(LEASED, table=table, key=("id",), state="state", version="version",
                   lease=Lease(at="acting_at", kind="acting_kind", token="acting_token",
                               ttl=300),
                   events=None, column_types={"id": "BIGINT"})


# -- case 4 and 7: the dataset lifecycle (shared/seeds/dataset-lifecycle.md) ----------------

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELED")
DATASET = Machine(
    "bench_dataset",
    states=["NOT_AVAILABLE", "LOADING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELED"],
    initial="NOT_AVAILABLE",
    active=["LOADING", "CANCELLING"],
    edges=[
        ("load", "NOT_AVAILABLE", "LOADING"),
        ("succeed", "LOADING", "SUCCEEDED"),
        ("fail", "LOADING", "FAILED"),
        ("cancel", "LOADING", "CANCELLING"),
        ("cancel_now", "LOADING", "CANCELED"),
        ("cancelled", "CANCELLING", "CANCELED"),
        ("cancel_failed", "CANCELLING", "FAILED"),
        ("complete_wins", "CANCELLING", "SUCCEEDED"),
        *((f"reload_{s.lower()}", s, "LOADING") for s in TERMINAL),
        *((f"reset_{s.lower()}", s, "NOT_AVAILABLE") for s in TERMINAL),
    ],
)


def dataset_binding(table: str) -> Binding:
    """The seed's columns: composite key, owner ``jobId``, the finalization claim, and the
    reservation flag ``__DR.isJobRunning`` cleared by every move into a non-active state."""
    return Binding(
        DATASET, table=table, key=("userId", "datasetId"), state="dataloadingStatus",
        owner="jobId",
        finalization=FinalizationClaim(holder="finalizingJobId", scope="finalizingScope",
                                       at="finalizingClaimTime", ttl=300),
        json_columns=("__DR",),
        on_enter={s: {"__DR.isJobRunning": False}
                  for s in ("NOT_AVAILABLE", *TERMINAL)},
        events=None,
    )


# -- case 7: the pub scheduler's weekly run (one COLLECTING run at a time) ------------------

RUN = Machine("bench_run", states=["DRAFT", "COLLECTING", "CLOSED", "SENT"], initial="DRAFT",
              active=["COLLECTING", "CLOSED"],
              edges=[Edge("open", "DRAFT", "COLLECTING"), Edge("close", "COLLECTING", "CLOSED"),
                     Edge("send", "CLOSED", "SENT")])


def run_binding(table: str) -> Binding:
    return Binding(RUN, table=table, key=("week_of",), state="v2_state", version="version",
                   invariants=(Unique("COLLECTING"),),
                   timers=(TimedEdge("close", due="deadline_at"),), events=None)


# -- hand-written SQL ----------------------------------------------------------------------
# ``{p}`` is the driver's placeholder, ``{now}`` the database clock, ``{t}``/``{ev}`` tables.

SQLITE_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
SQLITE_STALE = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || {p} || ' seconds')"
PG_STALE = "now() - make_interval(secs => {p})"

CAS = ("UPDATE {t} SET state = {p}, version = version + 1 "
       "WHERE id = {p} AND state = {p} RETURNING id, state, version")

# PostgreSQL: the update and its event row in one statement
CAS_EVENT_PG = (
    "WITH upd AS (UPDATE {t} SET state = %s, version = version + 1 "
    "WHERE id = %s AND state = %s RETURNING id, state, version) "
    "INSERT INTO {ev} (machine, row_key, edge, from_state, to_state, owner, data, version, "
    "created_at) SELECT %s, %s, %s, %s, upd.state, NULL, NULL, upd.version, now() FROM upd "
    "RETURNING id, version"
)
# SQLite: the same two writes in one BEGIN IMMEDIATE transaction
EVENT_SQLITE = (
    "INSERT INTO {ev} (machine, row_key, edge, from_state, to_state, owner, data, version, "
    f"created_at) VALUES (?, ?, ?, ?, ?, NULL, NULL, ?, {SQLITE_NOW})"
)

LEASE_CLAIM = (
    "UPDATE {t} SET acting_at = {now}, acting_kind = {p}, acting_token = acting_token + 1 "
    "WHERE id = {p} AND state = {p} "
    "AND (acting_at IS NULL OR (acting_kind = {p} AND acting_at < {stale})) "
    "RETURNING acting_token"
)
LEASE_FINALIZE = (
    "UPDATE {t} SET state = {p}, version = version + 1, acting_at = NULL, acting_kind = NULL "
    "WHERE id = {p} AND state = {p} AND acting_kind = {p} AND acting_token = {p} "
    "RETURNING version"
)

FCLAIM = (
    'UPDATE {t} SET "finalizingJobId" = {p}, "finalizingScope" = {p}, '
    '"finalizingClaimTime" = {now} WHERE "userId" = {p} AND "datasetId" = {p} '
    'AND ("finalizingJobId" IS NULL OR ("finalizingJobId" = {p} AND "finalizingScope" {same} '
    '{p}) OR "finalizingClaimTime" < {stale}) RETURNING "finalizingJobId"'
)
FTERMINAL = (
    'UPDATE {t} SET "dataloadingStatus" = \'SUCCEEDED\', "finalizingJobId" = NULL, '
    '"finalizingScope" = NULL, "finalizingClaimTime" = NULL, "__DR" = {unreserve} '
    'WHERE "userId" = {p} AND "datasetId" = {p} '
    "AND \"dataloadingStatus\" IN ('LOADING', 'CANCELLING') AND \"jobId\" = {p} "
    'RETURNING "dataloadingStatus"'
)
FRELEASE = (
    'UPDATE {t} SET "finalizingJobId" = NULL, "finalizingScope" = NULL, '
    '"finalizingClaimTime" = NULL WHERE "userId" = {p} AND "datasetId" = {p} '
    'AND "finalizingJobId" = {p} AND "finalizingScope" {same} {p} RETURNING "userId"'
)
# values substituted into the templates (not templates themselves: single braces)
UNRESERVE_PG = "jsonb_set(COALESCE(\"__DR\", '{}'::jsonb), '{isJobRunning}', 'false', true)"
UNRESERVE_SQLITE = "json_set(COALESCE(\"__DR\", '{}'), '$.isJobRunning', json('false'))"


def sql(template: str, *, pg: bool, **tables: str) -> str:
    """A template above in one dialect."""
    p = "%s" if pg else "?"
    parts = {
        "p": p,
        "now": "now()" if pg else SQLITE_NOW,
        "stale": (PG_STALE if pg else SQLITE_STALE).format(p=p),
        "same": "IS NOT DISTINCT FROM" if pg else "IS",
        "unreserve": UNRESERVE_PG if pg else UNRESERVE_SQLITE,
    }
    parts.update(tables)
    return template.format(**parts)
