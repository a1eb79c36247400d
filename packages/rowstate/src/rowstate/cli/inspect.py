"""``rowstate inspect URL MODULE:BINDING KEY``: one row as the engine sees it now.

The reading is the engine's (:meth:`rowstate.core.Core.inspect`, in a read-only unit):
whether a lease or a claim is expired, a timer overdue or an edge allowed is decided by
the checks the writes themselves carry, not by this module.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import IO, Any

from ..diagnosis import ClaimView, LeaseView, RowReport
from ..results import Event
from .output import (
    ago,
    cell,
    dump,
    fields,
    iso,
    key_text,
    span,
    stamp,
    table,
    when,
    wrapped,
)
from .targets import BadInput, load_binding, parse_key, read_once
from .words import meaning, why


def run(args: argparse.Namespace, out: IO[str]) -> int:
    binding = load_binding(args.target, django_settings=args.django_settings)
    key = parse_key(binding, args.key)
    report = read_once(args.url, binding, lambda lc: lc.core.inspect(key, events=args.events))
    if report is None:
        raise BadInput(f"no row with key {key_text(key)} in {binding.table} "
                       f"(machine {binding.machine.name})")
    if args.json:
        dump(document(report), out)
    else:
        text(report, out)
    return 0


# -- JSON ------------------------------------------------------------------------------


def document(r: RowReport) -> dict[str, Any]:
    """The report as one JSON document (keys in a fixed order; times ISO 8601 UTC)."""
    return {
        "machine": r.machine,
        "table": r.table,
        "key": list(r.key),
        "state": r.state,
        "now": iso(r.now),
        "row": {name: r.row[name] for name in sorted(r.row)},
        "lease": None if r.lease is None else _lease_doc(r.lease),
        "finalization": None if r.finalization is None else _claim_doc(r.finalization),
        "edges": [{"edge": e.edge, "from": e.src, "to": e.dst, "lease": e.lease,
                   "allowed": e.allowed, "reasons": list(e.reasons),
                   "why": [meaning(c) for c in e.reasons]} for e in r.edges],
        "timers": [{"edge": t.edge, "column": t.column, "due": iso(t.due),
                    "overdue": t.overdue, "fires_now": t.fires_now,
                    "blocked": list(t.blocked)} for t in r.timers],
        "notices": [{"name": n.name, "column": n.column, "due": iso(n.due),
                     "sent_at": iso(n.sent_at), "owed_now": n.owed_now,
                     "blocked": list(n.blocked)} for n in r.notices],
        "events": [_event_doc(e) for e in r.events] if r.has_events else None,
        "events_total": r.events_total if r.has_events else None,
    }


def _lease_doc(v: LeaseView) -> dict[str, Any]:
    return {"held": v.held, "kind": v.kind, "holder": v.holder, "token": v.token,
            "at": iso(v.at), "age_seconds": v.age, "ttl_seconds": v.ttl,
            "expired": v.expired, "error": v.error, "failed_at": iso(v.failed_at)}


def _claim_doc(v: ClaimView) -> dict[str, Any]:
    return {"held": v.held, "holder": v.holder, "scope": v.scope, "token": v.token,
            "at": iso(v.at), "age_seconds": v.age, "ttl_seconds": v.ttl,
            "expired": v.expired}


def _event_doc(e: Event) -> dict[str, Any]:
    return {"id": e.id, "at": iso(e.at), "edge": e.edge, "from": e.from_state,
            "to": e.to_state, "by": e.by, "note": e.note, "owner": e.owner, "data": e.data,
            "version": e.version}


# -- text ------------------------------------------------------------------------------


def text(r: RowReport, out: IO[str]) -> None:
    out.write(f"{r.machine} {key_text(r.key)} in {r.table}: {r.state or '(no state)'}\n")
    out.write(f"  read at {stamp(r.now)} (the database's clock)\n")
    out.write("\nRow\n")
    fields([(name, when(v, r.now) if name in _times(r) else cell(v))
            for name, v in sorted(r.row.items())], out)
    if r.lease is not None:
        out.write("\nLease\n")
        fields(_lease_lines(r.lease, r), out)
    if r.finalization is not None:
        out.write("\nFinalization claim\n")
        fields(_claim_lines(r.finalization, r), out)
    out.write("\nEdges (allowed now?)\n")
    table(["edge", "from -> to", "allowed"],
          [[e.edge + (f" [lease {e.lease}]" if e.lease else ""), f"{e.src} -> {e.dst}",
            "yes" if e.allowed else "no: " + ", ".join(e.reasons)] for e in r.edges], out)
    _legend([c for e in r.edges for c in e.reasons], out)
    if r.timers:
        out.write("\nTimers\n")
        table(["edge", "due", "", "now"],
              [[t.edge, stamp(t.due), ago(t.due, r.now),
                _timer_words(t.overdue, t.fires_now, t.blocked)] for t in r.timers], out)
        _legend([c for t in r.timers for c in t.blocked], out)
    if r.notices:
        out.write("\nNotices\n")
        table(["notice", "due", "", "now"],
              [[n.name, stamp(n.due), ago(n.due, r.now),
                f"sent {ago(n.sent_at, r.now)}" if n.sent_at is not None else
                ("owed: fire_due sends it now" if n.owed_now else
                 "not owed: " + ", ".join(n.blocked))]
               for n in r.notices], out)
        _legend([c for n in r.notices for c in n.blocked], out)
    if not r.has_events:
        out.write("\nEvents: the binding has no events table\n")
        return
    shown = len(r.events)
    out.write(f"\nEvents (the last {shown} of {r.events_total}, oldest first)\n"
              if shown < r.events_total else f"\nEvents ({r.events_total}, oldest first)\n")
    table(["id", "at", "edge", "from -> to", "by", "note"],
          [[cell(e.id), stamp(e.at), e.edge or "(created)",
            f"{e.from_state or '-'} -> {e.to_state}", cell(e.by), _said(e)]
           for e in r.events], out)


def _said(e: Event) -> str:
    """The event's note, and its data when it has some."""
    parts = [e.note] if e.note else []
    if e.data is not None:
        parts.append(f"data {cell(e.data)}")
    return "; ".join(parts) or "-"


def _times(r: RowReport) -> set[str]:
    return {name for name, v in r.row.items() if isinstance(v, datetime)}


def _lease_lines(v: LeaseView, r: RowReport) -> list[tuple[str, str]]:
    if not v.held:
        lines = [("status", f"free (ttl {span(v.ttl)})")]
    else:
        status = (f"EXPIRED \u2014 held {span(v.age)}, past its ttl of {span(v.ttl)}: any "
                  "edge may move the row, and its own kind may reclaim it" if v.expired else
                  f"live \u2014 held {span(v.age)} of its ttl of {span(v.ttl)}: it blocks "
                  "every other edge")
        lines = [("status", status), ("kind", cell(v.kind))]
        if v.holder is not None:
            lines.append(("holder", v.holder))
        if v.token is not None:
            lines.append(("token", str(v.token)))
        lines.append(("taken", when(v.at, r.now)))
    if v.error is not None:
        lines.append(("last error", v.error))
    if v.failed_at is not None:
        lines.append(("failed", when(v.failed_at, r.now)))
    return lines


def _claim_lines(v: ClaimView, r: RowReport) -> list[tuple[str, str]]:
    if not v.held:
        return [("status", f"none held (ttl {span(v.ttl)})")]
    status = (f"EXPIRED \u2014 held {span(v.age)}, past its ttl of {span(v.ttl)}: another "
              "holder may take it over" if v.expired else
              f"live \u2014 held {span(v.age)} of its ttl of {span(v.ttl)}")
    lines = [("status", status), ("holder", cell(v.holder)), ("scope", cell(v.scope))]
    if v.token is not None:
        lines.append(("token", str(v.token)))
    lines.append(("taken", when(v.at, r.now)))
    return lines


def _timer_words(overdue: bool, fires_now: bool, blocked: tuple[str, ...]) -> str:
    if fires_now:
        return "OVERDUE: fire_due fires it now"
    codes = ", ".join(blocked)
    return f"overdue, held back: {codes}" if overdue else f"not due: {codes}"


def _legend(codes: list[str], out: IO[str]) -> None:
    """What each reason code above means, once each."""
    seen = list(dict.fromkeys(codes))
    if seen:
        out.write("\n")
        for code in seen:
            wrapped(why(code), out, indent=2, hang=4)
