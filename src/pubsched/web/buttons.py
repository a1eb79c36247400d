"""The week page's buttons: which edge is drawn as which button, the fingerprint a button
carries, and pressing one.

A button posts the fingerprint of the run row the page was drawn from; the server acts
only while the row is still that one, under a per-week lock of this process, so a double
click (or a second tab) has one effect even before the engine's own refusal (wrong state,
lease held) is reached. The button also disables itself on submit (static/app.js). Every
press is one call of :func:`pubsched.actions.perform` (``resend`` aside: one recipient,
after the send), the same call the CLI's week commands make.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import FormData

from ..machine import RUN
from ..pub import BadInput, Verdict
from ..send import resend
from .forms import local_input, text
from .site import Site

# the button each edge of the machine is drawn as: (the action it performs, its label)
BUTTONS: dict[str, tuple[str, str]] = {
    "open": ("open", "Open the form"),
    "extend": ("extend", "Extend the deadline"),
    "close": ("close", "Close the form"),
    "reopen": ("reopen", "Reopen the form"),
    "generate": ("generate", "Generate the roster"),
    "regenerate": ("generate", "Regenerate"),
    "reopen_after_generate": ("reopen", "Reopen (keep the roster)"),
    "approve": ("approve", "Approve"),
    "unapprove": ("unapprove", "Un-approve"),
    "send": ("send", "Send the schedule email"),
}
CONFIRM = {"send": "Send the schedule email to every assigned tender now?"}


def fingerprint(row: Mapping[str, Any]) -> str:
    """What a page saw of a run row: any change to the row (a move, a lease, a stamp, an
    error) makes a button drawn before it stale."""
    text = json.dumps({k: str(v) for k, v in row.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def drawn(edges: list[str]) -> list[dict[str, Any]]:
    """The buttons for the edges an operator may take now, in the machine's order (an edge
    with no button, such as the tick's own, is not drawn)."""
    buttons = []
    for edge in edges:
        if edge in BUTTONS:
            action, label = BUTTONS[edge]
            buttons.append({"edge": edge, "action": action, "label": label,
                            "confirm": CONFIRM.get(action)})
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
        from ..engines import actions
        from ..weeks import week_key

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
            at = self.site.now()
            if name == "resend":  # after the send, one recipient, either engine
                return resend(pub, week, text(form, "email") or "", now=at)
            options: dict[str, Any] = {}
            if name == "extend":
                options["deadline"] = local_input(text(form, "deadline"), pub.config.tz)
            if name == "autopilot":
                options["on"] = text(form, "on") == "1"
            return actions.perform(pub, name, week, now=at, **options)
