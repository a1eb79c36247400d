"""What an engine of the pub run is: the :class:`Engine` protocol.

Two engines run a week (the seed's cutover): the legacy implicit-status flow and the v2
state machine. Everything outside ``pubsched.engines`` that depends on which one runs
(the actions, the tick, the week's page, a tender's submission) asks the one chosen by
:func:`pubsched.engines.choose.engine_for` through this protocol, never the flag, so the
choice is made in one place and the two engines can only differ where the protocol lets
them.

Each engine is a module, :mod:`pubsched.engines.legacy` and :mod:`pubsched.engines.v2`:
a module satisfies a protocol by its own functions and names (PEP 544; mypy checks both
where :data:`pubsched.engines.choose.ENGINES` holds them), so no class forwards to them.
The members below take ``self`` only because a protocol is written as a class. Both
engines implement every member with the same meaning:

* **the actions** (``create``, ``open_form`` ... ``autopilot``): one per operator action, the same
  names and signatures in both engines; operator actions are not time-gated, ``now`` is
  the instant they act at. A lost race, a wrong state or a held lease is a refused
  :class:`~pubsched.verdicts.Verdict`, never an exception; bad input raises
  :class:`~pubsched.verdicts.BadInput` with nothing written. ``holder`` names the worker in
  the lease a side effect runs under (the legacy close and generate have none and accept
  it for the signature's sake);
* **the tick** (``tick``): what the every-minute cron does as of ``now``;
* **the state of a week** (``state_of``, ``enabled_edges``): the state as this engine
  reads the run row (one of :data:`pubsched.machine.STATES`), and the machine's edges an
  operator may take from here, in the machine's order (what the admin draws buttons for);
* **its times** (``times``): the week's four moments as this engine judges them;
* **the open week** (``open_week``): which other week's form is open, by this engine's
  reading (what a refused open names);
* **the submission hold** (``hold_form``): inside a tender's unit of work, hold the run
  open for the unit, or say why the form takes no submission now.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, TypedDict

from ..pub import Pub
from ..verdicts import Verdict


class Times(TypedDict):
    """A week's moments as its engine judges them (aware UTC instants; None where the
    row has none yet)."""

    opens_at: datetime | None
    deadline_at: datetime | None
    generate_at: datetime | None
    send_window_at: datetime | None


class Engine(Protocol):
    """One engine of the pub run (module docstring)."""

    @property
    def name(self) -> str:
        """``"v2"`` or ``"legacy"``: what ``week show --json`` reports as ``engine``."""
        ...

    # -- the actions ----------------------------------------------------------------------

    def create(self, pub: Pub, week: str, *, now: datetime | None = None) -> Verdict: ...

    def open_form(self, pub: Pub, week: str, *, now: datetime | None = None,
                  deadline: datetime | None = None) -> Verdict: ...

    def close(self, pub: Pub, week: str, *, now: datetime | None = None,
              holder: str | None = None) -> Verdict: ...

    def reopen(self, pub: Pub, week: str, *, now: datetime | None = None) -> Verdict: ...

    def extend(self, pub: Pub, week: str, deadline: datetime, *,
               now: datetime | None = None) -> Verdict: ...

    def generate(self, pub: Pub, week: str, *, now: datetime | None = None,
                 holder: str | None = None) -> Verdict: ...

    def approve(self, pub: Pub, week: str, *, now: datetime | None = None) -> Verdict: ...

    def unapprove(self, pub: Pub, week: str, *, now: datetime | None = None) -> Verdict: ...

    def send(self, pub: Pub, week: str, *, now: datetime | None = None,
             holder: str | None = None) -> Verdict: ...

    def autopilot(self, pub: Pub, week: str, on: bool = True, *,
                  now: datetime | None = None) -> Verdict: ...

    # -- the tick -------------------------------------------------------------------------

    def tick(self, pub: Pub, now: datetime) -> list[Verdict]: ...

    # -- the state of a week, its times ---------------------------------------------------

    def state_of(self, pub: Pub, row: dict[str, Any]) -> str: ...

    def enabled_edges(self, pub: Pub, week: str) -> list[str]: ...

    def times(self, pub: Pub, row: dict[str, Any]) -> Times: ...

    def open_week(self, pub: Pub, besides: str) -> str | None:
        """The first week (by date), other than ``besides``, that this engine reads as
        COLLECTING: the one whose open form refuses another (one survey at a time). One
        query, its filter and limit in SQL."""
        ...

    # -- the submission hold --------------------------------------------------------------

    def hold_form(self, tx: Any, week: str) -> Verdict | Mapping[str, Any]:
        """Hold the run open for the unit ``tx``: the run's row when held (its deadline is
        read from it), else the refusal (the unit can then no longer commit). An unknown
        week is :class:`BadInput`."""
        ...

    def hold_week(self, tx: Any, week: str, states: tuple[str, ...], *,
                  exclusive: bool = False) -> Verdict | None:
        """Hold the run in one of ``states`` (the machine's names, as :meth:`state_of`
        reads them) for the unit ``tx``: an edit of the week's own data (its shifts, its
        roster) that is only allowed there commits before a move out of them, or is
        refused. None when held, else the refusal (``STATE_MISMATCH`` or the hold's own
        reason, ``detail["state"]`` the state it is in): the caller then writes nothing.
        An unknown week is :class:`BadInput`. ``exclusive``: no other unit holds the
        week meanwhile (rowstate's exclusive hold), for an edit that must not run beside
        an approve or another edit of the week.
        """
        ...
