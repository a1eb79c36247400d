"""How the CLI draws what it was told: listings, a week, a spinner.

rich is imported inside these functions only, so ``--json`` and scripts never load it. What
is drawn is decided by the domain (:mod:`pubsched.week.view`); this module only lays it out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from .context import EXIT_APPLIED, Context


def listing(ctx: Context, as_json: bool, found: list[dict[str, Any]], empty: str,
            headers: tuple[str, ...], row: Callable[[dict[str, Any]], tuple[str, ...]]) -> int:
    """A list command's answer: JSON with ``--json``, else a hint when there is nothing,
    else a table."""
    if as_json:
        ctx.emit_json(found)
        return EXIT_APPLIED
    if not found:
        ctx.say(empty)
        return EXIT_APPLIED
    from rich.table import Table

    table = Table(*headers, box=None)
    for item in found:
        table.add_row(*row(item))
    ctx.console().print(table)
    return EXIT_APPLIED


@contextmanager
def progress(ctx: Context, text: str) -> Iterator[None]:
    """A spinner on a terminal around a long operation; nothing at all otherwise (a pipe, a
    file, ``--json``), so that scripts read only the result."""
    if not ctx.is_tty():
        yield
        return
    with ctx.console().status(text):
        yield


def roster_table(shown: Mapping[str, Any]) -> Any:
    """The week's shifts with who works them and, once a roster exists, the slots left
    empty (before it, no slot is "unfilled": nobody has been picked yet)."""
    from rich.table import Table

    table = Table("id", "shift", "when", "slots", "assigned", box=None)
    known = shown.get("names", {})
    for s in shown["shifts"]:  # by name, as the page shows it; a pin marked
        names = [known.get(e, e) + (" (pinned)" if e in s.get("pinned", ()) else "")
                 for e in s["assigned"]]
        empty = max(0, int(s["slots"]) - len(names)) if shown.get("rostered", True) else 0
        table.add_row(str(s["id"]), s["label"], s.get("when", ""), str(s["slots"]),
                      ", ".join(names + ["(unfilled)"] * empty) if names or empty
                      else "" if shown.get("rostered", True) else "no roster yet")
    return table


def print_week(console: Any, shown: Mapping[str, Any], said: Sequence[str] = ()) -> None:
    """``pubsched week show``: the week's line, where it is and what to do next (``said``,
    the week page's opening sentences), its times, the roster, then the submissions, the
    deliveries and the history when there are any."""
    from rich.table import Table

    console.print(f"week {shown['week_of']}: {shown['state']} "
                  f"(legacy status {shown['legacy_status']}, {shown.get('engine', '')} engine, "
                  f"autopilot {'on' if shown['autopilot'] else 'off'})")
    for line in said:
        console.print(f"  {line}", markup=False, highlight=False)
    console.print(f"  form opens {shown['opens_at']}, deadline {shown['deadline_at']}")
    if shown.get("lease"):
        console.print(f"  in flight: {shown['lease']['kind']} since {shown['lease']['since']}")
    if shown["last_error"]:
        console.print(f"  last error: {shown['last_error']}")
    console.print(roster_table(shown))
    for s in shown["shifts"]:  # what the pub's clocks did to a shift's times
        if s.get("clock_note"):
            console.print(f"  note: {s['label']}: {s['clock_note']}", markup=False,
                          highlight=False)
    if shown["unfilled"]:
        console.print(f"  {shown['unfilled']} slot(s) unfilled")
    if shown.get("covers"):
        from ..words import COVER_STATE_LABELS

        known = shown.get("names", {})
        asked = Table("cover request", "shift id", "from", "state", "taken by", box=None)
        for c in shown["covers"]:
            asked.add_row(str(c["id"]), str(c["shift_id"]), known.get(c["from"], c["from"]),
                          COVER_STATE_LABELS.get(c["state"], c["state"]),
                          known.get(c["taken_by"], c["taken_by"] or ""))
        console.print(asked)
    if shown["submissions"]:
        subs = Table("submitted by", "shift ids", "max", "from", box=None)
        for s in shown["submissions"]:  # "usual": the close answered from their usual
            subs.add_row(s["email"], " ".join(str(i) for i in s["shift_ids"]),
                         "" if s["max"] is None else str(s["max"]),
                         "usual" if s.get("source") == "usual" else "form")
        console.print(subs)
    if shown["deliveries"]:
        sent = Table("delivery to", "status", "error", box=None)
        for d in shown["deliveries"]:
            # in flight after the send: handed to the mail server, no answer (as the week
            # page says it; the JSON keeps the stored status)
            status = "uncertain" if d["status"] == "in_flight" else d["status"]
            sent.add_row(d["email"], status, d.get("error") or "")
        console.print(sent)
    if shown["history"]:
        past = Table("when", "edge", "from", "to", "by", box=None)
        for h in shown["history"]:
            if h.get("what"):  # a hand edit: its words, no state moved
                past.add_row(str(h["at"]), str(h["what"]), "", "", str(h["by"] or ""))
                continue
            past.add_row(str(h["at"]), str(h["edge"]), str(h["from"] or "[*]"), str(h["to"]),
                         str(h["by"] or ""))
        console.print(past)
