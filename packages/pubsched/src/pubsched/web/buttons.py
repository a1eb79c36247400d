"""The week page's buttons: which edge is drawn as which button, the fingerprint a button
carries, and pressing one.

A button posts the fingerprint of the run row the page was drawn from; the server acts
only while the row is still that one, under a per-week lock of this process, so a double
click (or a second tab) has one effect even before the engine's own refusal (wrong state,
lease held) is reached. The button also disables itself on submit (static/app.js). Every
press is one call of :func:`pubsched.engines.actions.perform`, the same call the CLI's week
commands make; which edge is which button, what it asks first and which form fields carry
its options are rows of that module's one table of actions, not a list of ours.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from datetime import tzinfo
from typing import Any

from starlette.datastructures import FormData

from ..engines.actions import ACTIONS, BY_NAME, INSTANT, ON_OFF, WALL, buttons, perform
from ..machine import RUN
from ..verdicts import BadInput, Verdict
from .forms import local_input, text
from .site import Site

# the button each edge of the machine is drawn as: (the action it performs, its label), and
# the question an action's button asks first; both read from the one table of actions
BUTTONS: dict[str, tuple[str, str]] = buttons()
CONFIRM: dict[str, str] = {a.name: a.confirm for a in ACTIONS if a.confirm is not None}
# the buttons drawn as the next step (the page's one coloured button in a state)
PRIMARY = ("send", "approve", "generate", "close", "open")


def fingerprint(row: Mapping[str, Any]) -> str:
    """What a page saw of a run row: any change to the row (a move, a lease, a stamp, an
    error) makes a button drawn before it stale."""
    canonical = json.dumps({k: str(v) for k, v in row.items()}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def drawn(edges: list[str], *, early_close: str | None = None) -> list[dict[str, Any]]:
    """The buttons for the edges an operator may take now, in the machine's order (an edge
    with no button, such as the tick's own, is not drawn), each ``primary`` when it is the
    week's next step.

    ``early_close``: the deadline in words while it is still ahead. Closing then is not the
    next step but a choice that shuts out whoever has not answered yet, so "Close the form"
    is drawn plain and asks first; at or past the deadline it is the next step."""
    buttons = []
    for edge in edges:
        if edge in BUTTONS:
            action, label = BUTTONS[edge]
            early = action == "close" and early_close is not None
            confirm = (f"Close the form now, before its deadline ({early_close})? Tenders "
                       "who have not answered yet cannot answer any more."
                       if early else CONFIRM.get(action))
            buttons.append({"edge": edge, "action": action, "label": label,
                            "confirm": confirm, "primary": action in PRIMARY and not early})
    return buttons


def diagram(state: str) -> str:
    """The machine's own Mermaid diagram, the week's state highlighted (the spacing that
    keeps the labels of opposite edges apart is set where it is drawn: static/app.js)."""
    return (RUN.mermaid() + "    classDef current fill:#ffd166,stroke:#b5651d,"
            "stroke-width:3px,color:#000,font-weight:bold\n"
            f"    class {state} current\n")


class Buttons:
    """Pressing a button: one action at a time per week in this process, and only on the
    row the page was drawn from."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._week_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _week_lock(self, week: str) -> threading.Lock:
        with self._locks_guard:
            return self._week_locks.setdefault(week, threading.Lock())

    def press(self, week: str, name: str, form: FormData, check_seen: bool) -> Verdict:
        """The action ``name`` on ``week`` (synchronous: handlers run it in the thread
        pool); a stale fingerprint is refused as ``STALE`` before the engine is asked."""
        from ..week.runs import week_key

        pub = self.site.pub
        week = week_key(week)
        with self._week_lock(week):
            if check_seen:
                row = pub.runs.get(week)
                if row is None:
                    raise BadInput(f"no week {week}")
                if text(form, "seen") != fingerprint(row):
                    return Verdict(False, "STALE", message=(
                        "Refused: the week changed since this page was drawn (a second "
                        "click, another tab or the tick). Here it is as it is now."))
            return perform(pub, name, week, now=self.site.now(),
                           **_options(name, form, pub.config.tz))


def _options(name: str, form: FormData, tz: tzinfo) -> dict[str, Any]:
    """The options the action ``name`` takes from the form, by the table's field names and
    kinds (an unknown name takes none: :func:`perform` refuses it as bad input)."""
    action = BY_NAME.get(name)
    options: dict[str, Any] = {}
    for option in action.options if action is not None else ():
        if option.field is None:  # not asked on the web (e.g. the holder)
            continue
        raw = text(form, option.field)
        if option.kind == WALL and not raw and not option.required:
            continue  # left empty: the engine's default
        if option.kind in (INSTANT, WALL):
            options[option.name] = local_input(raw, tz)
        elif option.kind == ON_OFF:
            options[option.name] = raw == "1"
        else:
            options[option.name] = raw or ""
    return options
