"""Hypothesis strategies, kept in one module (as attrs does in ``tests/strategies.py``).

They feed the bad-input proofs (tests/rowstate/test_bad_input.py) against the ``FUZZ``
binding below: a machine with pure and leased edges, an owner column, a version, a lease with
a fencing token, a finalization claim, a JSON column named ``__DR`` (as the dataset
lifecycle's), payload columns, an entry guard, a per-tenant invariant and an events table:
every door a caller can knock on.

Each "bad" strategy draws input that can never move a row: either the engine must refuse it
with a typed error (unknown state or field, wrong type, oversized, injection-shaped name) or
the database has nothing it could apply it to (a key that matches nothing, a guard value no
row holds, a forged claim). ``mixed(good, bad)`` tags each draw with whether it is bad, so a
test can insist that every call carries at least one bad part.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from rowstate import (
    NOW,
    Binding,
    Edge,
    FinalizationClaim,
    Guard,
    Lease,
    LeaseClaim,
    Machine,
    Unique,
)

# -- the fuzz target -----------------------------------------------------------------------

FUZZ_MACHINE = Machine(
    "fuzz",
    states=["NEW", "OPEN", "RUNNING", "DONE", "FAILED", "ARCHIVED"],
    initial="NEW",
    active=["OPEN", "RUNNING"],
    edges=[
        Edge("open", "NEW", "OPEN"),
        Edge("start", "OPEN", "RUNNING", lease="start"),
        Edge("finish", "RUNNING", "DONE"),
        Edge("fail", "RUNNING", "FAILED"),
        Edge("retry", "FAILED", "OPEN"),
        Edge("archive", "DONE", "ARCHIVED", lease="archive"),
    ],
)

FUZZ = Binding(
    FUZZ_MACHINE,
    table="fuzz_rows",
    key=("tenant", "n"),
    state="state",
    owner="owner",
    version="version",
    lease=Lease(at="acting_at", kind="acting_kind", token="acting_token",
                holder="acting_holder", error="last_error", ttl=3600),
    finalization=FinalizationClaim(holder="fin_holder", scope="fin_scope", at="fin_at",
                                   token="fin_token", ttl=3600),
    payload=("note", "amount", "__DR"),
    json_columns=("__DR",),
    columns=("flag",),
    on_enter={"DONE": {"done_at": NOW, "__DR.isJobRunning": False}},
    enter_guards={"DONE": {"__DR.isJobRunning": Guard((None, False), "JOB_RUNNING")}},
    invariants=(Unique("RUNNING", per=("tenant",)),),
    events="fuzz_events",
    column_types={"n": "BIGINT", "amount": "BIGINT", "flag": "BOOLEAN",
                  "state": "TEXT NOT NULL DEFAULT 'NEW'"},
)

STATES: tuple[str, ...] = FUZZ_MACHINE.states
EDGES: tuple[str, ...] = tuple(e.name for e in FUZZ_MACHINE.edges)
LEASED_EDGES: tuple[str, ...] = tuple(e.name for e in FUZZ_MACHINE.edges if e.lease)
HELD_TOKEN = 7  # the fencing token of the seeded live lease
FIN_HOLDER, FIN_SCOPE = "job-9", "scope-a"  # the seeded finalization claim
NEVER = "\u00a7never\u00a7"  # a value no seeded row holds anywhere


def seed_rows(now: datetime) -> list[dict[str, Any]]:
    """The rows every bad-input test runs against (in several states, one with a live
    lease, one with a live finalization claim, one with an injection-shaped key)."""
    return [
        {"tenant": "t1", "n": 1, "state": "NEW", "owner": "alice", "flag": False},
        {"tenant": "t1", "n": 2, "state": "OPEN", "owner": "alice", "flag": True},
        {"tenant": "t1", "n": 3, "state": "RUNNING", "owner": "bob",
         "__DR": {"isJobRunning": True, "a": {"b": 1}},
         "fin_holder": FIN_HOLDER, "fin_scope": FIN_SCOPE, "fin_at": now, "fin_token": 1},
        {"tenant": "t2", "n": 1, "state": "FAILED", "owner": None},
        {"tenant": "t2", "n": 2, "state": "DONE", "owner": "carol", "__DR": {}},
        {"tenant": "t2", "n": 3, "state": "OPEN", "owner": "carol",
         "acting_at": now, "acting_kind": "start", "acting_token": HELD_TOKEN,
         "acting_holder": "elsewhere"},
        {"tenant": "t3'; DROP TABLE fuzz_rows; --", "n": 4, "state": "NEW", "owner": "dave"},
    ]


SEED_KEYS: tuple[tuple[str, int], ...] = tuple(
    (r["tenant"], r["n"]) for r in seed_rows(datetime(2000, 1, 1, tzinfo=UTC))
)

# -- helpers -------------------------------------------------------------------------------


def mixed(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any],
          ) -> st.SearchStrategy[tuple[Any, bool]]:
    """``(value, is_bad)`` drawn from either strategy."""
    return st.one_of(good.map(lambda v: (v, False)), bad.map(lambda v: (v, True)))


class Opaque:
    """An object no database driver knows how to store."""

    def __repr__(self) -> str:
        return "Opaque()"


HUGE = "\u00e9" * 5000  # over every short-string limit (4096)
VERY_HUGE = "x" * 1_000_100  # over the 1 MB event-data limit
VERY_DEEP: list[Any] = []  # 5,000 nested arrays: over the JSON depth limit (docs/values.md)
for _ in range(4999):
    VERY_DEEP = [VERY_DEEP]
# JSON one of the two databases would refuse or read differently (docs/values.md)
DOOMED_JSON = ({"a": {"b": "x\x00"}}, {"s": ["\ud800"]}, {"n": 2**64}, {"k\x00": 1},
               {1: "int key"}, [math.inf], VERY_DEEP)

# -- text ----------------------------------------------------------------------------------

INJECTIONS = (
    'x"; DROP TABLE fuzz_rows; --',
    "state; DROP TABLE fuzz_rows",
    "' OR '1'='1",
    "1; SELECT pg_sleep(10)",
    "Robert'); DROP TABLE students;--",
    '"state"',
    "state--",
    "state /* */",
    "`state`",
    "$.state",
    "%s",
    "?",
    ":name",
    "\\",
)

texts = st.one_of(
    st.text(max_size=40),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
    st.sampled_from(INJECTIONS),
    st.sampled_from(["", " ", "\t", "\u200b", "\U0001f600", "\uff53\uff54\uff41\uff54\uff45",
                     "\u00e9tat", "NEW "]),
)
"""Any text at all, injection-shaped and unicode included (possibly with NUL)."""

huge_or_nul = st.one_of(
    st.just(HUGE),
    st.text(min_size=1, max_size=10).map(lambda s: s + "\x00"),
)

# -- keys ----------------------------------------------------------------------------------


def _shapes(key: tuple[Any, Any]) -> st.SearchStrategy[Any]:
    tenant, n = key
    return st.sampled_from([key, [tenant, n], {"tenant": tenant, "n": n}])


existing_keys = st.sampled_from(SEED_KEYS).flatmap(_shapes)
"""Keys of seeded rows, as a tuple, a list or a mapping."""

missing_keys = st.tuples(
    st.one_of(texts.filter(lambda s: "\x00" not in s), st.sampled_from(["t1", "t2"])),
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1).filter(lambda n: n > 4 or n < 1),
).filter(lambda k: k not in SEED_KEYS).flatmap(_shapes)
"""Well-formed keys that match no row."""

wrong_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2).map(lambda v: [v]),
    st.just(Opaque()),
    st.just(Decimal("1.5")),
    st.just(datetime(2024, 1, 1, tzinfo=UTC)),
    st.sampled_from([2**63, -(2**63) - 1, 10**30]),
    huge_or_nul,
)
"""Values of a type (or size) a key or a guard never accepts."""

bad_keys = st.one_of(
    wrong_scalars,
    st.text(max_size=10),  # one value for a two-column key
    st.integers(),
    st.tuples(st.just("t1")),  # too short
    st.tuples(st.just("t1"), st.just(1), st.just(1)),  # too long
    st.tuples(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1), st.just(1)),
    st.tuples(st.just("t1"), st.text("abcxyz -_'\"", min_size=1, max_size=8)),
    st.tuples(st.just("t1"), wrong_scalars),
    st.tuples(wrong_scalars, st.just(1)),
    st.fixed_dictionaries({"tenant": st.just("t1")}),  # a column missing
    st.fixed_dictionaries({"tenant": st.just("t1"), "n": st.just(1), "x": st.just(1)}),
    st.fixed_dictionaries({"tenant": st.just("t1"), "n": wrong_scalars}),
    st.sampled_from([(), [], {}, frozenset({"t1", 1}), "t1,1"]),
)
"""Keys of the wrong shape or type (a ValidationError), or of a type the column does not
hold (an int for the text column, a word for the integer one: no row, or a ValidationError
from the database)."""

keys = mixed(existing_keys, st.one_of(missing_keys, bad_keys))

# -- states and edges ----------------------------------------------------------------------

state_names = st.sampled_from(STATES)

unknown_states = st.one_of(
    texts.filter(lambda s: s not in STATES),
    st.sampled_from([s.lower() for s in STATES] + [s + " " for s in STATES]),
    wrong_scalars,
    st.integers(),
)
"""Anything that is not a state of the machine."""

bad_from = st.one_of(
    unknown_states.filter(lambda x: x is not None and not (  # None means "any source"
        isinstance(x, dict) and x and all(k in STATES for k in x))),
    st.lists(st.one_of(state_names, unknown_states), min_size=1, max_size=3).filter(
        lambda xs: any(x not in STATES for x in xs)),
    st.just([]),
    st.just(()),
)
"""A from-set with an unknown member, or empty: always InvalidTransitionError."""

edge_names = st.sampled_from(EDGES)
unknown_edges = st.one_of(
    texts.filter(lambda s: s not in EDGES),
    wrong_scalars,
    st.integers(),
    st.sampled_from([e.upper() for e in EDGES]),
)
pure_edges = st.sampled_from([e for e in EDGES if e not in LEASED_EDGES])

# -- fields and guards ---------------------------------------------------------------------

known_fields = st.sampled_from([*sorted(FUZZ.known), "__DR.isJobRunning", "__DR.a.b", "__DR.a"])

unknown_fields = st.one_of(
    st.sampled_from(INJECTIONS),
    st.sampled_from([
        "__DR..a", "__DR.", ".state", "state.x", "flag.x", "__DR.a b", "__DR.$.a",
        "__DR.a[0]", '"__DR"', "__DR.'a'", "1col", "STATE", "owner\n", "state ", "x" * 300,
        "", "__DR.a.\u00e9", "n.0", "__dr.isJobRunning", "pg_sleep", "version()",
    ]),
    texts.filter(lambda s: s not in FUZZ.known),
    wrong_scalars,
    st.integers(),
    st.tuples(st.just("state")),
)
"""Field names the binding must refuse (ValidationError)."""


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


unknown_field_keys = unknown_fields.filter(_hashable)
"""Unknown field names usable as mapping keys."""

guard_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
)
"""Scalars a guard accepts."""

bad_guard_values = st.one_of(
    st.binary(max_size=4),
    st.dictionaries(st.text(max_size=2), st.integers(), min_size=1, max_size=2),
    st.just([[1]]),
    st.just(Opaque()),
    st.just(math.nan),
    st.just(Decimal("2")),
    st.just(datetime(2024, 1, 1, tzinfo=UTC)),
    st.sampled_from([2**63, -(2**63) - 1]),
    huge_or_nul,
    st.just([]),
    st.sampled_from([math.inf, -math.inf, "lone \udc80"]),
)

good_guards = st.dictionaries(
    known_fields,
    st.one_of(guard_values, st.lists(guard_values, min_size=1, max_size=3)),
    max_size=2,
)
"""Well-formed guards (they may pass or fail on a given row)."""

failing_guards = st.dictionaries(
    known_fields, st.just(NEVER), min_size=1, max_size=2,
)
"""Well-formed guards no seeded row satisfies (refused GUARD_FAILED)."""

bad_guards = st.one_of(
    st.dictionaries(unknown_field_keys, guard_values, min_size=1, max_size=2),
    st.dictionaries(known_fields, bad_guard_values, min_size=1, max_size=2),
    st.dictionaries(known_fields, st.lists(bad_guard_values, min_size=1, max_size=2),
                    min_size=1, max_size=1),
    st.dictionaries(known_fields, st.builds(Guard, st.just(())), min_size=1, max_size=1),
    st.sampled_from([["state"], "state", 1, ("state", "NEW"), [("state", "NEW")], {1: 2}]),
)
"""Guards the engine must refuse (ValidationError)."""

guards = mixed(st.one_of(st.none(), good_guards), st.one_of(failing_guards, bad_guards))

# -- payloads and event data ---------------------------------------------------------------

good_payloads = st.one_of(
    st.none(),
    st.fixed_dictionaries({}, optional={
        "note": st.one_of(st.none(), st.text(st.characters(exclude_characters="\x00"),
                                             max_size=30)),
        "amount": st.one_of(st.none(), st.integers(min_value=-(2**40), max_value=2**40)),
        "__DR": st.one_of(st.none(), st.dictionaries(st.text(max_size=4), st.integers(),
                                                     max_size=2)),
    }),
)

bad_payloads = st.one_of(
    st.dictionaries(st.one_of(unknown_field_keys, st.sampled_from(["state", "version",
                                                                "owner", "n"])),
                    st.integers(), min_size=1, max_size=2),
    st.sampled_from([["note"], "note", 1, ("note", "x"), [("note", "x")]]),
    st.fixed_dictionaries({"note": st.sampled_from(
        [Opaque(), {1, 2}, complex(1, 2), "nul\x00", "lone \ud800"])}),
    st.fixed_dictionaries({"amount": st.sampled_from([2**63, -(2**63) - 1, math.nan,
                                                      math.inf])}),
    st.fixed_dictionaries({"__DR": st.sampled_from(DOOMED_JSON)}),
)
"""Payloads the engine must refuse before writing: a column that is not a payload column,
not a mapping, or a value no column can hold."""

payloads = mixed(good_payloads, bad_payloads)

good_data = st.one_of(
    st.none(),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**53), max_value=2**53),
                  st.text(st.characters(exclude_characters="\x00"), max_size=20)),
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.text(max_size=5), inner, max_size=3)),
        max_leaves=8,
    ),
)

bad_data = st.one_of(
    st.binary(min_size=1, max_size=4),
    st.just(Opaque()),
    st.just({1, 2}),
    st.just(math.nan),
    st.just(math.inf),
    st.just({"x": math.nan}),
    st.just({("a", "b"): 1}),
    st.just(VERY_HUGE),
    st.sampled_from(DOOMED_JSON),
)
"""Event data that is not JSON, or over 1 MB (ValidationError)."""

data = mixed(good_data, bad_data)

# -- owners, holders, claims ---------------------------------------------------------------

good_owners = st.one_of(st.none(), st.sampled_from(["alice", "bob", "carol", "dave"]))
bad_owners = st.one_of(
    st.sampled_from([b"alice", 1.5, True, ["alice"], {"o": 1}, Opaque()]),
    huge_or_nul,
)
wrong_owners = st.text(max_size=20).filter(
    lambda s: s not in ("alice", "bob", "carol", "dave") and "\x00" not in s)
owners = mixed(good_owners, st.one_of(bad_owners, wrong_owners))

holders = st.one_of(st.none(), st.text(st.characters(exclude_characters="\x00"),
                                       min_size=1, max_size=20))
bad_holders = st.one_of(
    st.sampled_from([b"h", 1.5, 3, True, ["h"], {"h": 1}, Opaque()]),
    huge_or_nul,
)

fin_holders = st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=20)
fin_scopes = st.one_of(st.none(), st.text(st.characters(exclude_characters="\x00"),
                                          max_size=20))
bad_fin_values = st.one_of(
    st.sampled_from([b"h", 1.5, 3, True, ["h"], {"h": 1}, Opaque()]),
    huge_or_nul,
)

forged_fences = st.one_of(
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1).filter(lambda n: n != HELD_TOKEN),
    st.none(),
    st.text(st.characters(exclude_characters="\x00"), max_size=10).filter(
        lambda s: s.strip().lstrip("+-").isdigit() is False),
    st.floats(allow_nan=False).filter(lambda f: f != HELD_TOKEN),
    st.just(datetime(2024, 1, 1, tzinfo=UTC)),
)
"""Fences no live lease holds."""

forged_claims = st.one_of(
    # through a lambda: builds() would also draw the defaulted fields, typed Any
    st.builds(lambda **kw: LeaseClaim(**kw), claimed=st.just(True),
              edge=st.one_of(st.sampled_from(EDGES), unknown_edges),
              token=st.none(), fence=forged_fences),
    st.builds(lambda **kw: LeaseClaim(**kw), claimed=st.just(False),
              edge=st.sampled_from(LEASED_EDGES)),
    st.sampled_from([None, "start", 7, {"claimed": True, "edge": "start", "fence": 7},
                     ("start", 7), Opaque()]),
)
"""Lease claims nobody holds, or not claims at all."""

errors = st.one_of(st.none(), texts, st.just(HUGE), st.integers(), st.just(Opaque()))

# -- calls that would apply, with at least one part broken ---------------------------------
#
# A purely random call rarely lines every good part up, so a check done too late (after a
# claim was written, after the act ran) would hide behind an earlier refusal. These start
# from a call that WOULD apply to a seeded row and break one or two of its parts.

ROW_STATE = {(r["tenant"], r["n"]): r["state"] for r in seed_rows(datetime(2000, 1, 1,
                                                                            tzinfo=UTC))}

passing_guards = st.sampled_from([None, {}, {"__DR.zzz": None}, {"__DR.zzz": [None, 1]},
                                  {"__DR.q.r": [None]}])
"""Guards every seeded row passes (a missing JSON key counts as NULL)."""


@st.composite
def faulty(draw: st.DrawFn, bases: list[dict[str, Any]],
           good: dict[str, st.SearchStrategy[Any]],
           faults: dict[str, Any]) -> dict[str, Any]:
    """A call built on one of ``bases`` (kwargs that would apply), the ``good`` optional
    parts drawn, then one or two parts replaced by a draw from ``faults[part]`` (a strategy,
    or a function of the unbroken call giving one); ``_broken`` names the parts replaced."""
    call = dict(draw(st.sampled_from(bases)))
    call["key"] = draw(_shapes(call["key"]))
    for name, strategy in good.items():
        call[name] = draw(strategy)
    broken = draw(st.lists(st.sampled_from(sorted(faults)), min_size=1, max_size=2,
                           unique=True))
    base = dict(call)
    for name in broken:
        fault = faults[name]
        call[name] = draw(fault if isinstance(fault, st.SearchStrategy) else fault(base))
    call["_broken"] = tuple(broken)
    return call


def _state_of(call: dict[str, Any]) -> str:
    key = call["key"]
    return ROW_STATE[(key["tenant"], key["n"]) if isinstance(key, dict) else tuple(key)]


def _other_states(call: dict[str, Any]) -> st.SearchStrategy[str]:
    here = _state_of(call)
    return st.sampled_from([s for s in STATES if s != here])


def _unreachable_targets(call: dict[str, Any]) -> st.SearchStrategy[str]:
    here = _state_of(call)
    pure = {e.dst for e in FUZZ_MACHINE.edges if e.src == here and not e.lease}
    return st.sampled_from([s for s in STATES if s not in pure])


any_key_fault = st.one_of(missing_keys, bad_keys)

faulty_transitions = faulty(
    [{"key": ("t1", 1), "to": "OPEN", "from_": "NEW", "owner": "alice"},
     {"key": ("t2", 1), "to": "OPEN", "from_": None, "owner": None},
     {"key": ("t1", 3), "to": "FAILED", "from_": ["RUNNING"], "owner": "bob"}],
    {"guards": passing_guards, "payload": good_payloads, "data": good_data},
    {"key": any_key_fault,
     "to": lambda c: st.one_of(unknown_states, _unreachable_targets(c)),
     "from_": lambda c: st.one_of(bad_from, _other_states(c)),
     "owner": st.one_of(bad_owners, wrong_owners),
     "guards": st.one_of(failing_guards, bad_guards),
     "payload": bad_payloads,
     "data": bad_data},
)

_leased_faults: dict[str, Any] = {
    "key": any_key_fault,
    "edge": lambda c: st.one_of(pure_edges, unknown_edges,
                                st.sampled_from([e for e in LEASED_EDGES if e != c["edge"]])),
    "holder": bad_holders,
    "owner": st.one_of(bad_owners, wrong_owners),
    "guards": st.one_of(failing_guards, bad_guards),
}
_claim_bases = [{"key": ("t2", 2), "edge": "archive", "owner": "carol"},
                {"key": ("t2", 2), "edge": "archive", "owner": None}]

faulty_claims = faulty(
    [*_claim_bases, {"key": ("t1", 2), "edge": "start", "owner": "alice"}],
    {"holder": holders, "guards": passing_guards}, _leased_faults,
)

GOOD_ACT = "<the test's act>"  # stands for a real act; the test swaps it in
bad_acts = st.sampled_from([None, "act", 42, {"act": 1}, Opaque()])
"""Acts that are not callable (ValidationError before the claim)."""

faulty_runs = faulty(
    _claim_bases,
    {"holder": holders, "guards": passing_guards, "payload": good_payloads,
     "data": good_data, "act": st.just(GOOD_ACT)},
    {**_leased_faults, "payload": bad_payloads, "data": bad_data, "act": bad_acts},
)

faulty_claim_finalizations = faulty(
    [{"key": ("t1", 1), "holder": "h1", "scope": "s"},
     {"key": ("t2", 1), "holder": "h2", "scope": None},
     {"key": ("t1", 3), "holder": FIN_HOLDER, "scope": FIN_SCOPE}],
    {},
    {"key": any_key_fault, "holder": st.one_of(bad_fin_values, st.just("")),
     "scope": bad_fin_values},
)

faulty_release_finalizations = faulty(
    [{"key": ("t1", 3), "holder": FIN_HOLDER, "scope": FIN_SCOPE}],
    {},
    {"key": any_key_fault,
     "holder": st.one_of(bad_fin_values, fin_holders.filter(lambda h: h != FIN_HOLDER)),
     "scope": st.one_of(bad_fin_values, fin_scopes.filter(lambda s: s != FIN_SCOPE))},
)
