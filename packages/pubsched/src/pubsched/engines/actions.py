"""The ONE table of the operator's actions on a week, and :func:`perform`, which reads it.

Every front end reads this table and nothing else to know what an operator may ask of a
week: the CLI builds its ``pubsched week NAME`` commands from it (their help, their
arguments), the web admin draws its buttons from it (their labels, the edges they stand
for, the confirmation they ask, the form fields they post), and both call :func:`perform`,
so the two can never disagree about what an action is called, what it takes or which code
runs it (h11's "everything that affects the state machine lives in this file").

The engine the flag selects performs it (:func:`pubsched.engines.choose.engine_for`);
operator actions are not time-gated: ``now`` is the instant they act at.

An :class:`Action`'s fields
===========================

``name``
    The action's one name: ``perform(pub, name, ...)``, the CLI's ``pubsched week NAME``,
    the web's ``POST /admin/weeks/{week}/do/{name}``.
``help``
    One line, the CLI command's help and description (``pubsched week --help``).
``run``
    What it does: ``run(engine, pub, week, now, options)`` calls the engine's method (or,
    for ``resend``, which is the same for both engines, :func:`pubsched.week.send.resend`).
``buttons``
    ``(edge, label)`` pairs: the machine edges (:data:`pubsched.machine.RUN`) this action
    is drawn as, one button per edge the engine reports enabled (``generate`` is "Generate
    the roster" from CLOSED and "Regenerate" from ASSIGNED). Empty: no edge button (the
    admin page draws ``autopilot`` and ``resend`` with forms of their own).
``confirm``
    The question a button asks before it posts (None: it posts at once).
``options``
    The keywords ``perform`` passes on to the engine, each an :class:`Option` (below).
``cli``
    Whether ``pubsched week NAME WEEK ...`` exists (every such command takes the week's
    Monday, ``WEEK``, as its first positional; ``resend`` is a web action only).
``progress``
    The CLI's spinner text on a terminal while the action runs (``{week}`` and
    ``{people}``, the number of assigned tenders, are filled in); None: no spinner.

An :class:`Option`'s fields
===========================

``name``
    The keyword of ``perform`` (``deadline``, ``on``, ``email``).
``kind``
    The value's shape: :data:`INSTANT` an aware ``datetime`` (CLI: ISO 8601 with an offset
    or ``Z``, a naive time refused; web: a ``datetime-local`` field in the pub's zone, empty
    is "a new deadline is needed"); :data:`WALL` an aware ``datetime`` given on the pub's
    wall clock (CLI: ISO 8601, without an offset the pub's local time, with one that
    instant; web: a ``datetime-local`` field in the pub's zone, empty is the default when
    the option has one, else "a new deadline is needed");
    :data:`ON_OFF` a ``bool`` (CLI: ``on`` or ``off``; web:
    ``"1"`` is on); :data:`TEXT` a ``str`` (web: a missing field is ``""``).
``required``, ``default``
    Whether ``perform`` needs it; what the engine assumes when it is left out.
``cli_arg``
    The CLI argument that carries it: ``"--deadline"`` (an option flag) or a positional's
    name (``"value"``); None: not on the CLI. ``cli_metavar``, ``cli_choices`` and
    ``cli_help`` (None: argparse prints none) complete its argparse spelling.
``field``
    The web form field that carries it; None: not on the web (``holder``, the worker
    named in a side effect's lease, is on neither: tests and scripts pass it).

:data:`ACTIONS` is the table, in the order the CLI lists its commands; :data:`NAMES` its
names; :data:`BY_NAME` the lookup; :func:`buttons` the edge -> (action, label) map the web
draws from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from ..pub import Pub
from ..verdicts import BadInput, Verdict
from ..week.runs import week_key
from ..week.send import resend
from .base import Engine
from .choose import chosen, engine_for
from .facts import in_words
from .flags import FLAG_CHANGED, FlagChanged

INSTANT: Final = "instant"
WALL: Final = "wall"
ON_OFF: Final = "on_off"
TEXT: Final = "text"

Run = Callable[[Engine, Pub, str, datetime | None, Mapping[str, Any]], Verdict]


@dataclass(frozen=True)
class Option:
    """One keyword an action takes, and how each front end asks for it (module docstring)."""

    name: str
    kind: str
    required: bool = True
    default: Any = None
    cli_arg: str | None = None
    cli_metavar: str | None = None
    cli_choices: tuple[str, ...] = ()
    cli_help: str | None = None
    field: str | None = None


@dataclass(frozen=True)
class Action:
    """One operator action on a week (module docstring)."""

    name: str
    help: str
    run: Run
    buttons: tuple[tuple[str, str], ...] = ()
    confirm: str | None = None
    options: tuple[Option, ...] = ()
    cli: bool = True
    progress: str | None = None


# the worker named in a side effect's lease (tests, scripts, a second ticker): no front end
# asks for it, so it has neither a CLI argument nor a form field
HOLDER = Option("holder", TEXT, required=False, default=None)

ACTIONS: tuple[Action, ...] = (
    Action("create", "create the week as a draft: its shifts, the form not open yet",
           lambda engine, pub, week, now, o: engine.create(pub, week, now=now, **o)),
    Action("open", "open the availability form (the week is created first if new)",
           lambda engine, pub, week, now, o: engine.open_form(pub, week, now=now, **o),
           buttons=(("open", "Open the form"),),
           options=(Option("deadline", WALL, required=False, default=None,
                           cli_arg="--deadline", cli_metavar="ISO",
                           cli_help="when the form closes, the pub's local time (such as "
                                    "2026-12-02T20:00); default: the week's usual deadline",
                           field="deadline"),)),
    Action("close", "close the form: no more answers",
           lambda engine, pub, week, now, o: engine.close(pub, week, now=now, **o),
           buttons=(("close", "Close the form"),), options=(HOLDER,)),
    Action("generate", "make the roster (again, once made: pins and take-offs kept)",
           lambda engine, pub, week, now, o: engine.generate(pub, week, now=now, **o),
           buttons=(("generate", "Generate the roster"), ("regenerate", "Regenerate")),
           options=(HOLDER,)),
    Action("reopen", "open the form again (after the roster: the roster is kept)",
           lambda engine, pub, week, now, o: engine.reopen(pub, week, now=now, **o),
           buttons=(("reopen", "Reopen the form"),
                    ("reopen_after_generate", "Reopen (keep the roster)"))),
    Action("approve", "approve the roster (reversible until it is sent)",
           lambda engine, pub, week, now, o: engine.approve(pub, week, now=now, **o),
           buttons=(("approve", "Approve"),)),
    Action("unapprove", "take back the approval, to change the roster",
           lambda engine, pub, week, now, o: engine.unapprove(pub, week, now=now, **o),
           buttons=(("unapprove", "Un-approve"),)),
    Action("send", "email each tender the schedule (once: never twice)",
           lambda engine, pub, week, now, o: engine.send(pub, week, now=now, **o),
           buttons=(("send", "Send the schedule email"),),
           confirm="Send the schedule email to every assigned tender now?", options=(HOLDER,),
           progress="sending the schedule of week {week} to {people} tender(s)..."),
    Action("extend", "move the form's deadline (the later times follow)",
           lambda engine, pub, week, now, o: engine.extend(pub, week, now=now, **o),
           buttons=(("extend", "Extend the deadline"),),
           options=(Option("deadline", WALL, cli_arg="--deadline", cli_metavar="ISO",
                           cli_help="the new deadline, the pub's local time (such as "
                                    "2026-12-03T20:00) unless an offset is given",
                           field="deadline"),)),
    Action("autopilot",
           "let the tick advance the week's timed steps (never approve or send)",
           lambda engine, pub, week, now, o: engine.autopilot(pub, week, now=now, **o),
           options=(Option("on", ON_OFF, required=False, default=True, cli_arg="value",
                           cli_metavar="on|off", cli_choices=("on", "off"), field="on"),)),
    Action("resend", "resend the sent schedule to one recipient left uncertain or failed",
           lambda engine, pub, week, now, o: resend(
               pub, week_key(week), now=now,
               state_of=lambda row: engine.state_of(pub, row), **o),
           options=(Option("email", TEXT, field="email"),), cli=False),
)

NAMES: tuple[str, ...] = tuple(a.name for a in ACTIONS)
# actions whose email goes out between a claim and a finalize that must then land: not
# fenced by the flag (a refused finalize would lose the record of a sent email). None
# needs it: send acts on an APPROVED week, which the idle gap excludes, so an unforced
# flip is refused (NOT_IDLE) for as long as it can run; resend acts on a SENT week, read
# alike and resent by the same code under either engine (test_flag_race.py checks the
# machine for this)
LEASE_GUARDED: frozenset[str] = frozenset({"send", "resend"})
BY_NAME: Mapping[str, Action] = {a.name: a for a in ACTIONS}


def buttons() -> dict[str, tuple[str, str]]:
    """The web's buttons: machine edge -> (the action it performs, its label)."""
    return {edge: (a.name, label) for a in ACTIONS for edge, label in a.buttons}


def perform(pub: Pub, name: str, week: str, *, now: datetime | None = None,
            **options: Any) -> Verdict:
    """Run the action ``name`` on ``week`` with the engine the flag selects; the verdict's
    message is said in the operator's words (:func:`pubsched.engines.facts.in_words`).

    An unknown name is :class:`BadInput`; an option the action does not take, or a
    required one left out, is a ``TypeError`` (a caller's mistake, as a wrong call is)."""
    action = BY_NAME.get(name)
    if action is None:
        raise BadInput(f"unknown action {name!r}; one of {', '.join(NAMES)}")
    known = {o.name for o in action.options}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"action {name!r} takes no option(s) {', '.join(unknown)}")
    missing = [o.name for o in action.options if o.required and o.name not in options]
    if missing:
        raise TypeError(f"action {name!r} needs the option(s) {', '.join(missing)}")
    if name in LEASE_GUARDED:
        verdict = action.run(engine_for(pub), pub, week, now, options)
    else:
        try:
            with chosen(pub) as engine:
                verdict = action.run(engine, pub, week, now, options)
        except FlagChanged as changed:
            verdict = Verdict(False, FLAG_CHANGED,
                              message=f"{name} week {week} refused: {changed}")
    return in_words(pub, name, week_key(week), verdict)
