"""``rowstate stuck URL MODULE:BINDING``: the rows that do not move, and for how long.

Four groups, each counted in full and listed oldest first up to ``--limit``: leases past
their TTL (the holder died or hangs), timers ``fire_due`` would fire now (no ticker ran,
or it fails), finalization claims past their TTL, and events no relay delivered for
``--older`` seconds. The queries are the engine's (:meth:`rowstate.core.Core.stuck`),
run in a read-only unit.

Undelivered events count only where a relay is meant to deliver them: the binding says so
(``Binding(relayed=True)``) or the operator asks (``--undelivered``; ``--no-undelivered``
leaves them out of a relayed binding's report). An events table nobody relays is the rows'
history, and every event in it stays undelivered for good: not stuck.

The exit code says whether anything is listed (:data:`EXIT_STUCK`), so a cron job or a
monitor needs no parsing; the report is printed either way.
"""

from __future__ import annotations

import argparse
from typing import IO, Any

from ..binding import Binding
from ..diagnosis import StuckGroup, StuckReport, StuckRow
from .output import cell, dump, iso, key_text, span, stamp, table, wrapped
from .targets import BadInput, load_binding, read_once

#: the exit code when the report lists anything (0 when it lists nothing)
EXIT_STUCK = 3

TITLES = {
    "expired_leases": ("Expired leases", "a lease past its ttl: its holder died or hangs; "
                       "any edge may move the row, and its own kind may reclaim it"),
    "overdue_timers": ("Overdue timers", "fire_due would fire these now: no ticker has "
                       "run since they fell due, or it fails on them"),
    "expired_claims": ("Expired finalization claims", "a claim past its ttl: its "
                       "holder died or hangs; another holder may take it over"),
    "unrelayed_events": ("Undelivered events", "in the outbox, not delivered: no relay "
                         "is running, or it fails on them"),
}


def run(args: argparse.Namespace, out: IO[str]) -> int:
    binding = load_binding(args.target, django_settings=args.django_settings)
    if args.undelivered and binding.events is None:
        raise BadInput(f"{args.target} has no events table (events=None), so no event of "
                       "it is ever undelivered: leave out --undelivered")
    report = read_once(args.url, binding, lambda lc: lc.core.stuck(
        older=args.older, limit=args.limit, undelivered=args.undelivered))
    if args.json:
        dump(document(report), out)
    else:
        text(report, out, events_note=_events_note(binding, report))
    return EXIT_STUCK if report.total else 0


def _events_note(binding: Binding, r: StuckReport) -> str | None:
    """Why the undelivered events were not counted (None: they were, or there is no events
    table to count them in)."""
    if binding.events is None or r.undelivered:
        return None
    if binding.relayed:
        return "left out of this report (--no-undelivered)."
    return ("the binding does not say that a relay delivers its events (Binding("
            "relayed=True)): they are its history, not stuck. --undelivered counts them.")


def document(r: StuckReport) -> dict[str, Any]:
    """One JSON document; every group of the binding is there, empty or not
    (``unrelayed_events`` when ``undelivered_counted``)."""
    return {
        "machine": r.machine,
        "table": r.table,
        "now": iso(r.now),
        "older_seconds": r.older,
        "limit": r.limit,
        "total": r.total,
        "undelivered_counted": r.undelivered,
        "groups": {g.name: {"count": g.total, "rows": [_row_doc(x) for x in g.rows]}
                   for g in r.groups},
    }


def _row_doc(x: StuckRow) -> dict[str, Any]:
    return {"key": list(x.key), "at": iso(x.at), "age_seconds": x.age, **x.detail}


def text(r: StuckReport, out: IO[str], *, events_note: str | None = None) -> None:
    what = "nothing is stuck" if not r.total else f"{r.total} stuck"
    out.write(f"{r.machine} in {r.table}: {what}\n")
    out.write(f"  read at {stamp(r.now)} (the database's clock)\n")
    for g in r.groups:
        title, words = TITLES[g.name]
        if g.name == "unrelayed_events":
            words += f" (older than {span(r.older)})"
        out.write(f"\n{title}: {g.total or 'none'}\n")
        if not g.total:
            continue
        wrapped(words, out)
        _listing(g, out)
        if g.total > len(g.rows):
            out.write(f"  ... and {g.total - len(g.rows)} more (--limit)\n")
    if events_note is not None:
        out.write("\nUndelivered events: not counted\n")
        wrapped(events_note, out)


def _listing(g: StuckGroup, out: IO[str]) -> None:
    if g.name == "expired_leases":
        table(["key", "kind", "holder", "held for", "ttl", "since"],
              [[key_text(x.key), cell(x.detail.get("kind")), cell(x.detail.get("holder")),
                span(x.age), span(x.detail.get("ttl")), stamp(x.at)] for x in g.rows], out)
    elif g.name == "overdue_timers":
        table(["key", "timer", "overdue by", "due"],
              [[key_text(x.key), str(x.detail["edge"]), span(x.age), stamp(x.at)]
               for x in g.rows], out)
    elif g.name == "expired_claims":
        table(["key", "holder", "scope", "held for", "ttl", "since"],
              [[key_text(x.key), cell(x.detail.get("holder")), cell(x.detail.get("scope")),
                span(x.age), span(x.detail.get("ttl")), stamp(x.at)] for x in g.rows], out)
    else:
        table(["event", "key", "edge", "to", "waiting", "created"],
              [[cell(x.detail.get("id")), key_text(x.key), cell(x.detail.get("edge")),
                cell(x.detail.get("to_state")), span(x.age), stamp(x.at)]
               for x in g.rows], out)
