"""Bad input never corrupts, and never escapes as a foreign exception (an h11-style fuzz
invariant): every public call of :class:`~rowstate.Lifecycle`, fed hypothesis-generated
input with at least one bad part, either raises :class:`~rowstate.ValidationError` (an
:class:`~rowstate.InvalidTransitionError` before any I/O) or returns a refused result; and
the table and its events table are byte-for-byte what they were.

One database per dialect for the whole module (SQLite file, real PostgreSQL), seeded once;
a call that changed it is reported and the seed restored, so hypothesis can shrink.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

import rowstate
import rowstate.stores
from rowstate import InvalidTransitionError, Lifecycle, ValidationError
from rowstate.dialects import canonical_time
from support import databases
from support import races as rh
from support import strategies as S

TABLES = (S.FUZZ.table, "fuzz_events")
FUZZ_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)


@dataclass
class Target:
    url: str
    store: rowstate.stores.SQLiteStore | rowstate.stores.PostgresStore
    lc: Lifecycle
    reader: Any  # a plain driver connection, for the checksums
    baseline: str = ""
    acts: list[Any] = field(default_factory=list)

    def checksum(self) -> str:
        return rh.checksum(self.url, TABLES, self.reader)

    def act(self, lease: rowstate.ActiveLease) -> bool:
        self.acts.append(lease)
        return True


def seed(url: str) -> None:
    """(Re)write the seeded rows and empty the events table."""
    sqlite = url.startswith("sqlite:")
    rows = S.seed_rows(datetime.now(UTC))
    with rh.raw(url) as conn:
        conn.execute("BEGIN")
        conn.execute(f"DELETE FROM {TABLES[0]}")
        conn.execute(f"DELETE FROM {TABLES[1]}")
        for row in rows:
            values = []
            for v in row.values():
                if isinstance(v, dict):
                    v = json.dumps(v) if sqlite else Jsonb(v)
                elif isinstance(v, datetime) and sqlite:
                    v = canonical_time(v)
                values.append(v)
            cols = ", ".join(f'"{c}"' for c in row)
            marks = ", ".join(["?" if sqlite else "%s"] * len(row))
            conn.execute(f"INSERT INTO {TABLES[0]} ({cols}) VALUES ({marks})", values)
        conn.execute("COMMIT")


@pytest.fixture(scope="module", params=[
    "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    dropped: Callable[[], None] = lambda: None  # noqa: E731
    if request.param == "sqlite":
        url = rh.sqlite_url(Path(tmp_path_factory.mktemp("bad_input")) / "fuzz.db")
    else:
        admin = request.getfixturevalue("pg_admin_dsn")
        name = databases.make_database(admin, template=request.getfixturevalue("pg_template"))
        url = databases.database_dsn(admin, name)
        dropped = lambda: databases.drop_database(admin, name)  # noqa: E731
    store = rowstate.connect(url)
    try:
        lc = Lifecycle(store, S.FUZZ)
        lc.create_schema()
        seed(url)
        with rh.raw(url) as reader:
            t = Target(url, store, lc, reader)
            t.baseline = t.checksum()
            yield t
    finally:
        store.close()
        dropped()


# -- the invariant -------------------------------------------------------------------------


def refused(result: Any) -> bool:
    """Whether a call's result says nothing happened."""
    return not bool(result)


def attempt(t: Target, call: Callable[[], Any], *, read: bool = False) -> Any:
    """Run one bad call: a ValidationError (raised before any I/O when it is an
    InvalidTransitionError) or a refused result (any result for a ``read``); the database
    is unchanged."""
    sent = t.store.statements
    t.acts.clear()
    outcome: Any = "<raised something else>"
    try:
        outcome = call()
    except ValidationError as exc:
        if isinstance(exc, InvalidTransitionError):
            assert t.store.statements == sent, "InvalidTransitionError after I/O"
        outcome = exc
    else:
        assert read or refused(outcome), f"a bad call was applied: {outcome!r}"
    finally:
        if t.checksum() != t.baseline:
            seed(t.url)
            t.baseline = t.checksum()
            pytest.fail(f"a bad call changed the database (outcome {outcome!r})")
    assert t.acts == [], "an act ran for a bad call"
    return outcome


def key_of(key: Any) -> tuple[Any, ...] | None:
    """The seeded key ``key`` names, whatever its shape; None if not one."""
    if isinstance(key, Mapping):
        key = (key.get("tenant"), key.get("n"))
    if isinstance(key, tuple | list):
        key = tuple(key)
        return key if key in S.SEED_KEYS else None
    return None


def pure_move_exists(to: Any, from_: Any) -> bool:
    """Whether the machine has a pure edge for this move (what a well-formed call needs)."""
    m = S.FUZZ_MACHINE
    try:
        froms = m.sources(to) if from_ is None else (
            (from_,) if isinstance(from_, str) else tuple(from_))
        pure = [any(not e.lease for e in m.edges_between(s, to)) for s in froms]
        return any(pure) if from_ is None else bool(pure) and all(pure)
    except TypeError:  # not iterable, unhashable: not states
        return False


good_from = st.one_of(st.none(), S.state_names, st.lists(S.state_names, min_size=1,
                                                         max_size=2))


def tagged(**parts: st.SearchStrategy[tuple[Any, bool]]) -> st.SearchStrategy[dict[str, Any]]:
    """A random call from ``(value, is_bad)`` parts: kwargs, and ``_broken``: the names of
    its bad parts (as :func:`strategies.faulty` gives them)."""
    def build(drawn: dict[str, tuple[Any, bool]]) -> dict[str, Any]:
        call = {name: value for name, (value, _) in drawn.items()}
        call["_broken"] = tuple(name for name, (_, bad) in drawn.items() if bad)
        return call

    return st.fixed_dictionaries(parts).map(build)


# -- the doors -----------------------------------------------------------------------------


transitions = st.one_of(
    S.faulty_transitions,
    tagged(key=S.keys, to=S.mixed(S.state_names, S.unknown_states),
           from_=S.mixed(good_from, S.bad_from), owner=S.owners, payload=S.payloads,
           guards=S.guards, data=S.data),
)


@FUZZ_SETTINGS
@given(call=transitions)
def test_transition(target: Target, call: dict[str, Any]) -> None:
    bad = bool(call.pop("_broken"))
    structural = not pure_move_exists(call["to"], call["from_"])
    assume(bad or structural)
    out = attempt(target, lambda: target.lc.transition(**call))
    if structural and call["to"] in S.STATES:
        assert isinstance(out, ValidationError), out


@FUZZ_SETTINGS
@given(call=transitions)
def test_can_transition(target: Target, call: dict[str, Any]) -> None:
    bad = bool(set(call.pop("_broken")) - {"payload", "data"})
    del call["payload"], call["data"]
    out = attempt(target, lambda: target.lc.can_transition(**call), read=True)
    if bad or not pure_move_exists(call["to"], call["from_"]):
        assert isinstance(out, ValidationError) or not out.allowed, out


leased = S.mixed(st.sampled_from(S.LEASED_EDGES), st.one_of(S.pure_edges, S.unknown_edges))
holders = S.mixed(S.holders, S.bad_holders)


@FUZZ_SETTINGS
@given(call=st.one_of(S.faulty_claims,
                      tagged(key=S.keys, edge=leased, holder=holders, owner=S.owners,
                             guards=S.guards)))
def test_claim(target: Target, call: dict[str, Any]) -> None:
    assume(call.pop("_broken"))
    attempt(target, lambda: target.lc.claim(**call))


@FUZZ_SETTINGS
@given(call=st.one_of(S.faulty_runs,
                      tagged(key=S.keys, edge=leased, holder=holders, owner=S.owners,
                             payload=S.payloads, guards=S.guards, data=S.data,
                             act=S.mixed(st.just(S.GOOD_ACT), S.bad_acts))))
def test_run(target: Target, call: dict[str, Any]) -> None:
    assume(call.pop("_broken"))
    if call["act"] == S.GOOD_ACT:
        call["act"] = target.act
    attempt(target, lambda: target.lc.run(**call))


@FUZZ_SETTINGS
@given(key=S.keys, claim=S.forged_claims, error=S.errors)
def test_release(target: Target, key: Any, claim: Any, error: Any) -> None:
    attempt(target, lambda: target.lc.release(key[0], claim, error=error))


@FUZZ_SETTINGS
@given(key=S.keys, claim=S.forged_claims, owner=S.owners, payload=S.payloads, data=S.data)
def test_finalize(target: Target, key: Any, claim: Any, owner: Any, payload: Any,
                  data: Any) -> None:
    attempt(target, lambda: target.lc.finalize(key[0], claim, owner=owner[0],
                                               payload=payload[0], data=data[0]))


HELD = ("t1", 3)
fin_holders = S.mixed(S.fin_holders, S.bad_fin_values)
fin_scopes = S.mixed(S.fin_scopes, S.bad_fin_values)


@FUZZ_SETTINGS
@given(call=st.one_of(S.faulty_claim_finalizations,
                      tagged(key=S.keys, holder=fin_holders, scope=fin_scopes)))
def test_claim_finalization(target: Target, call: dict[str, Any]) -> None:
    # on the held row, another (holder, scope) is refused HELD_BY_OTHER
    taken = key_of(call["key"]) == HELD and (call["holder"], call["scope"]) != (
        S.FIN_HOLDER, S.FIN_SCOPE)
    assume(call.pop("_broken") or taken)
    attempt(target, lambda: target.lc.claim_finalization(**call))


@FUZZ_SETTINGS
@given(call=st.one_of(S.faulty_release_finalizations,
                      tagged(key=S.keys, holder=fin_holders, scope=fin_scopes)))
def test_release_finalization(target: Target, call: dict[str, Any]) -> None:
    call.pop("_broken")
    # only the holder of the seeded claim, on its row, could release anything
    assume(key_of(call["key"]) != HELD or (call["holder"], call["scope"]) != (
        S.FIN_HOLDER, S.FIN_SCOPE))
    attempt(target, lambda: target.lc.release_finalization(**call))


@FUZZ_SETTINGS
@given(key=S.keys)
def test_get_state_and_history(target: Target, key: Any) -> None:
    got = attempt(target, lambda: target.lc.get(key[0]), read=True)
    if not isinstance(got, Exception):
        assert (got is not None) == (key_of(key[0]) is not None and not key[1])
    state = attempt(target, lambda: target.lc.state(key[0]), read=True)
    assert state is None or state in S.STATES or isinstance(state, ValidationError)
    events = attempt(target, lambda: target.lc.history(key[0]), read=True)
    assert isinstance(events, list | ValidationError)
