"""How a machine lives in a table.

A binding names the key, the state column and every other column the engine may touch, and
what happens when a state is entered. Everything optional stays optional, so the engine also
runs on a table an existing service owns, with only the columns it has:

* no ``version`` column: no lost-update counter (the CAS on the state still holds);
* a lease without a ``token`` column: fencing by claim time (a takeover stamps a new time,
  so a zombie's finalize no longer matches; two claims in the same millisecond could not
  be told apart);
* no ``events`` table: events are published after commit, at most once, instead of through
  the transactional outbox (a crash between the commit and the publish loses the event).

An events table is the row's history whether or not a relay reads it; ``relayed=True`` says
that one does (a :class:`~rowstate.Relay` delivers this machine's events), so an event it
has not delivered after a while is stuck (``rowstate stuck``); without it, undelivered is
every event's normal condition and nothing to report.

Every name a caller may pass (a guard field, a payload column) is checked against the
binding before any SQL is built; only checked names ever reach SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import schema, schemacheck
from .conditions import Ref
from .dialects import Dialect, Postgres, SQLite, check_ident
from .errors import DefinitionError, ValidationError
from .machine import Machine
from .protocol import drive
from .specs import (
    Derived,
    FinalizationClaim,
    Guard,
    GuardSpec,
    Lease,
    Notice,
    TimedEdge,
    Unique,
)
from .stale import StaleStates
from .values import (
    INT64_MAX,
    INT64_MIN,
    INT_TEXT,
    INT_TYPES,
    MAX_TEXT,
    check_compared_kind,
    check_declared_kind,
    check_json_column_value,
    check_payload_value,
    check_scalar,
    has_surrogates,
)

_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Binding:
    machine: Machine
    table: str
    key: tuple[str, ...]
    state: str = "state"
    derived: Derived | None = None
    owner: str | None = None
    version: str | None = None
    lease: Lease | None = None
    finalization: FinalizationClaim | None = None
    on_enter: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    enter_guards: Mapping[str, GuardSpec] = field(default_factory=dict)
    payload: tuple[str, ...] = ()
    json_columns: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    invariants: tuple[Unique, ...] = ()
    timers: tuple[TimedEdge, ...] = ()
    notices: tuple[Notice, ...] = ()
    events: str | None = "rowstate_events"
    column_types: Mapping[str, str] = field(default_factory=dict)
    relayed: bool = False  # a relay delivers the events: undelivered ones can be stuck
    table_parts: tuple[str, ...] = field(init=False)
    known: frozenset[str] = field(init=False)
    state_ref: Ref = field(init=False)
    # per key column: "text", "int" or "any", from its declared type (see key_values)
    key_kinds: tuple[str, ...] = field(init=False, repr=False, compare=False)
    # one key column that takes text as given (the hottest path of key_values)
    _one_text_key: bool = field(init=False, repr=False, compare=False)
    _one_int_key: bool = field(init=False, repr=False, compare=False)
    _text_keys: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "key", (self.key,) if isinstance(self.key, str) else tuple(self.key))
        set_(self, "payload", tuple(self.payload))
        set_(self, "json_columns", tuple(self.json_columns))
        set_(self, "columns", tuple(self.columns))
        parts = tuple(self.table.split("."))
        if not 1 <= len(parts) <= 2:
            raise DefinitionError(f"table {self.table!r}: write 'table' or 'schema.table'")
        for p in parts:
            check_ident(p, "table name part")
        set_(self, "table_parts", parts)
        if not self.key:
            raise DefinitionError("a binding needs at least one key column")
        if self.events is not None:
            for p in self.events.split("."):
                check_ident(p, "events table name part")
        if not isinstance(self.relayed, bool):
            raise DefinitionError(f"{self.table}: relayed is True or False, got "
                                  f"{self.relayed!r}")
        if self.relayed and self.events is None:
            raise DefinitionError(f"{self.table}: relayed=True needs an events table (a relay "
                                  "delivers the events table's rows; events=None has none)")
        known = set(self.key) | {self.state} | set(self.payload)
        known |= set(self.json_columns) | set(self.columns)
        for opt in (self.owner, self.version, self.derived and self.derived.column):
            if opt:
                known.add(opt)
        if self.lease:
            known |= {c for c in (self.lease.at, self.lease.kind, self.lease.token,
                                  self.lease.holder, self.lease.error, self.lease.failed_at)
                      if c}
        if self.finalization:
            f = self.finalization
            known |= {c for c in (f.holder, f.scope, f.at, f.token) if c}
        for t in self.timers:
            known.add(t.due)
        for n in self.notices:
            known |= {n.due, n.claim}
        for writes in self.on_enter.values():
            known |= {w.split(".", 1)[0] for w in writes}
        for inv in self.invariants:
            known |= set(inv.per)
        for name in known:
            check_ident(name, "column")
        set_(self, "known", frozenset(known))
        set_(self, "key_kinds", tuple(_key_kind(self.column_types.get(k, "TEXT"))
                                      for k in self.key))
        set_(self, "_one_text_key", len(self.key) == 1 and self.key_kinds[0] != "int")
        set_(self, "_one_int_key", len(self.key) == 1 and self.key_kinds[0] == "int")
        set_(self, "_text_keys", all(k != "int" for k in self.key_kinds))
        derived = None
        if self.derived:
            for old, new in self.derived.mapping.items():
                if new not in self.machine.states or not isinstance(old, str):
                    raise DefinitionError(f"derived state {old!r} -> {new!r}: unknown state")
            derived = (self.derived.column, tuple(self.derived.mapping.items()))
        aliases = tuple(self.machine.aliases.items())
        set_(self, "state_ref", Ref(self.state, (), derived, aliases))
        self._check_definition()

    def _check_definition(self) -> None:
        m = self.machine
        blocked = self.finalization.blocks if self.finalization else ()
        for state in (*self.on_enter, *self.enter_guards, *blocked):
            if state not in m.states:
                raise DefinitionError(f"{self.table}: entry rule for unknown state {state!r}")
        for writes in self.on_enter.values():
            for target in writes:
                self.ref(target, for_write=True)
            # "a" and "a.b" in one entry: their order would decide the document
            for a in writes:
                for b in writes:
                    if b.startswith(a + "."):
                        raise DefinitionError(f"{self.table}: entry writes {a!r} and {b!r} "
                                              "overlap")
        for guards in self.enter_guards.values():
            self.guard_items(guards, DefinitionError)
        if any(e.lease for e in m.edges) and self.lease is None:
            raise DefinitionError(f"{self.table}: side-effecting edges need a Lease binding")
        for inv in self.invariants:
            if inv.state not in m.states:
                raise DefinitionError(f"invariant on unknown state {inv.state!r}")
        for t in self.timers:
            m.edge(t.edge)
            self.guard_items(t.guards, DefinitionError)
        for n in self.notices:
            for s in n.states:
                if s not in m.states:
                    raise DefinitionError(f"notice {n.name!r}: unknown state {s!r}")
            self.guard_items(n.guards, DefinitionError)

    # -- checking what callers pass ------------------------------------------------------

    def ref(self, name: object, *, for_write: bool = False,
            error: type[Exception] = ValidationError) -> Ref:
        """The reference for ``col`` or ``col.path.in.json``; unknown names raise."""
        if not isinstance(name, str) or not name or len(name) > 200:
            raise error(f"{self.table}: field name must be a short string, got {name!r}")
        column, *path = name.split(".")
        if column not in self.known and not for_write:
            raise error(f"{self.table}: unknown field {name!r}")
        if not _SEGMENT.match(column) or not all(_SEGMENT.match(p) for p in path):
            raise error(f"{self.table}: field {name!r} is not a plain (dotted) identifier")
        if path and column not in self.json_columns:
            raise error(f"{self.table}: {column!r} is not a JSON column; cannot read {name!r}")
        if column == self.state and not path:
            return self.state_ref
        return Ref(column, tuple(path))

    def guard_items(self, guards: GuardSpec | None,
                    error: type[Exception] = ValidationError) -> tuple[tuple[Ref, Guard], ...]:
        """Checked ``(ref, Guard)`` pairs; a bare value or list means reason GUARD_FAILED."""
        if not guards:
            return ()
        if not isinstance(guards, Mapping):
            raise error(f"guards must be a mapping of field -> accepted values, got {guards!r}")
        items = []
        for name, spec in guards.items():
            ref = self.ref(name, error=error)
            guard = spec if isinstance(spec, Guard) else Guard(_as_tuple(spec))
            values = _as_tuple(guard.values)
            if not values:
                raise error(f"guard {name!r}: no accepted values")
            declared = None if ref.path else self.column_types.get(ref.column)
            for v in values:
                check_scalar(v, f"guard {name!r}", error, allow_none=True)
                if declared is not None:
                    check_compared_kind(v, declared, f"guard {name!r}", error)
            if ref is self.state_ref and self.machine.aliases:  # an old name: the new one
                values = tuple(self.machine.aliases.get(v, v) if isinstance(v, str) else v
                               for v in values)
            items.append((ref, Guard(values, guard.reason)))
        return tuple(items)

    def check_payload(self, payload: Mapping[str, Any] | None) -> dict[str, Any]:
        if not payload:
            return {}
        if not isinstance(payload, Mapping):
            raise ValidationError(f"payload must be a mapping, got {type(payload).__name__}")
        allowed = set(self.payload)
        out = {}
        for name, value in payload.items():
            if name not in allowed:
                raise ValidationError(
                    f"{self.table}: payload field {name!r} is not a payload column "
                    f"(allowed: {', '.join(sorted(allowed)) or 'none'})"
                )
            what = f"{self.table}: payload field {name!r}"
            if name in self.json_columns:
                check_json_column_value(value, what)
            else:
                check_payload_value(value, what)
                declared = self.column_types.get(name)
                if declared is not None and value is not None:
                    check_declared_kind(value, declared, what)
            out[name] = value
        return out

    def key_values(self, key: object) -> tuple[Any, ...]:
        """The key as a tuple in column order; accepts a scalar, a sequence or a mapping.

        Each value is canonicalised to its column's declared type (undeclared columns are
        TEXT, as :meth:`schema_sql` creates them): an int for a TEXT column becomes its
        decimal text, a decimal text for an integer column its int. SQLite would match
        either through type affinity and PostgreSQL casts an untyped text, but the event
        row records the key as given: without this, one row would have two identities
        (``[1]`` and ``["1"]``) in its history and outbox.
        """
        kind = type(key)
        if kind is str and self._one_text_key:  # the hottest path: one text key, as given
            text: str = key  # type: ignore[assignment]  # (no cast(): a call per key)
            if len(text) > MAX_TEXT or "\x00" in text or (
                    not text.isascii() and has_surrogates(text)):
                raise ValidationError(
                    f"{self.table}: key string too long, holding NUL or not UTF-8")
            return (text,)
        if kind is int and self._one_int_key:  # one integer key, as given
            if not INT64_MIN <= key <= INT64_MAX:  # type: ignore[operator]
                raise ValidationError(f"{self.table}: key integer out of 64-bit range")
            return (key,)
        if kind is str or kind is int:  # the hot path: a scalar key
            values: tuple[Any, ...] = (key,)
        elif kind is tuple:
            values = key  # type: ignore[assignment]
            if self._text_keys and len(values) == len(self.key):  # a tuple of plain texts
                for v in values:
                    if type(v) is not str or len(v) > MAX_TEXT or "\x00" in v or (
                            not v.isascii() and has_surrogates(v)):
                        break
                else:
                    return values
        elif isinstance(key, Mapping):
            missing = [c for c in self.key if c not in key]
            extra = [c for c in key if c not in self.key]
            if missing or extra:
                raise ValidationError(
                    f"{self.table}: key needs exactly {list(self.key)}, got {list(key)}"
                )
            values = tuple(key[c] for c in self.key)
        elif isinstance(key, tuple | list):
            values = tuple(key)
        else:
            values = (key,)
        if len(values) != len(self.key):
            raise ValidationError(f"{self.table}: key needs {len(self.key)} value(s): {key!r}")
        canonical: list[Any] | None = None
        for i, v in enumerate(values):
            kind = type(v)
            want = self.key_kinds[i]
            # exact types first: the hot path of every call; subclasses take the long way
            if kind is str:
                if len(v) > MAX_TEXT or "\x00" in v or (not v.isascii() and has_surrogates(v)):
                    raise ValidationError(
                        f"{self.table}: key string too long, holding NUL or not UTF-8")
                if want != "int":
                    continue
            elif kind is int:
                if not INT64_MIN <= v <= INT64_MAX:
                    raise ValidationError(f"{self.table}: key integer out of 64-bit range")
                if want != "text":
                    continue
            elif v is None or isinstance(v, bool) or not isinstance(v, str | int):
                raise ValidationError(f"{self.table}: key values are str or int, got {v!r}")
            else:  # a str or int subclass (an enum): its plain value, as both drivers send it
                check_scalar(v, "key", ValidationError)
            if canonical is None:
                canonical = list(values)
            canonical[i] = self._key_value(v, want, i)
        return values if canonical is None else tuple(canonical)

    def check_new_key(self, key: object) -> None:
        """Refuse a new row's key value of another type than its column's (undeclared key
        columns are TEXT): lookups convert a key to its column's type, but a row created
        with ``1`` would then be read back as ``'1'``. Called after :meth:`key_values`."""
        if isinstance(key, Mapping):
            given = tuple(key.get(c) for c in self.key)
        elif isinstance(key, tuple | list):
            given = tuple(key)
        else:
            given = (key,)
        for column, kind, value in zip(self.key, self.key_kinds, given, strict=False):
            if kind == "text" and isinstance(value, int) and not isinstance(value, bool):
                raise ValidationError(
                    f"{self.table}: key column {column!r} holds text, got the integer "
                    f"{value!r}: declare column_types={{{column!r}: 'BIGINT'}} for integer "
                    "keys, or pass the key as text")
            if kind == "int" and isinstance(value, str):
                raise ValidationError(
                    f"{self.table}: key column {column!r} holds integers "
                    f"(column_types), got the text {value!r}")

    def _key_value(self, v: str | int, want: str, i: int) -> str | int:
        if isinstance(v, int):
            plain = int(v)
            return str(plain) if want == "text" else plain
        text = str.__str__(v)
        if want != "int":
            return text
        if not INT_TEXT.match(text) or not INT64_MIN <= int(text) <= INT64_MAX:
            raise ValidationError(f"{self.table}: key column {self.key[i]!r} holds 64-bit "
                                  f"integers, got {v!r}")
        return int(text)

    # -- DDL -----------------------------------------------------------------------------

    def dialect_for(self, name: str) -> Dialect:
        if name in ("sqlite", "sqlite3"):
            return SQLite()
        if name in ("postgresql", "postgres", "pg"):
            return Postgres()
        raise ValidationError(f"unknown dialect {name!r}")

    def unique_index_name(self, inv: Unique) -> str:
        return inv.name or f"rs_{self.table_parts[-1]}_one_{inv.state.lower()}"[:63]

    def migration_sql(self, dialect: str | Dialect, *,
                      existing: tuple[str, ...] = ()) -> list[str]:
        """The engine's columns (but the ``existing`` ones the application's table already
        has), indexes and events table as statements for an existing table, to paste into
        the application's own versioned migration."""
        d = dialect if isinstance(dialect, Dialect) else self.dialect_for(dialect)
        return schema.migration_sql(self, d, existing)

    def check_schema(self, store: Any) -> StaleStates:
        """Raise :class:`~rowstate.errors.SchemaMismatch` naming everything a (migrated)
        table lacks for this binding; else the rows in states the machine no longer has
        (:mod:`rowstate.stale`). A sync store (the lifecycles' ``check_schema`` runs on
        either twin)."""
        return drive(store, schemacheck.check_schema(self, self.dialect_for(store.dialect)))

    def schema_sql(self, dialect: str | Dialect) -> str:
        """DDL for the columns and indexes the engine needs, and for the events table.

        Columns are added with ``ADD COLUMN IF NOT EXISTS`` on PostgreSQL so it is safe to run
        on a table a service already owns; on SQLite the statements create the table.
        """
        d = dialect if isinstance(dialect, Dialect) else self.dialect_for(dialect)
        return schema.schema_sql(self, d)


def _as_tuple(spec: Any) -> tuple[Any, ...]:
    if isinstance(spec, list | tuple | set | frozenset):
        return tuple(spec)
    return (spec,)


def _key_kind(declared: str) -> str:
    """What a key column holds, from the first word of its declared type."""
    word = (declared.split() or ["TEXT"])[0].split("(")[0].upper()
    if word in INT_TYPES:
        return "int"
    if "CHAR" in word or "TEXT" in word or "CLOB" in word:
        return "text"
    return "any"
