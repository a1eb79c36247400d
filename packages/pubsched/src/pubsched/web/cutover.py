"""The cutover page, ``/admin/cutover``: which engine runs, whether this is the idle gap,
the flag's switch, and the dress rehearsal's wizard (#17.7).

The wizard's state is the rehearsal's record (:mod:`pubsched.rehearsal.record`), never the
browser's: the page draws the steps done with their messages and one "Run next step"
button, which posts the record's id and the number of steps the page saw done. Each press
runs exactly one step (:func:`pubsched.rehearsal.step`, claimed by a compare-and-set), so a
double click or a second operator pressing at the same moment runs it once and the other
is told to reload. Until a rehearsal has passed on a database with weeks, the switch to v2
is drawn disabled with the reason (and the flip itself refuses it: REHEARSAL_REQUIRED).
A pub that began on v2 (:func:`pubsched.engines.cutover.began_on_v2`) has nothing to cut
over: its page says it runs the current engine and offers nothing to press.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .. import rehearsal
from ..db.ids import row_number
from ..engines import cutover
from ..engines.flags import v2_enabled
from ..rehearsal import record
from ..rehearsal.steps import day, next_week
from ..verdicts import BadInput, Verdict
from .forms import text
from .pages import ADMIN_PATH
from .site import Site

BACK = ADMIN_PATH + "/cutover"


class CutoverPages:
    """The cutover page's handlers (the page, the flag, the wizard's three buttons)."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    def _context(self) -> dict[str, Any]:
        pub = self.site.pub
        if cutover.began_on_v2(pub):  # nothing to cut over: the page says so, and no more
            return {"began_on_v2": True}
        current = record.unfinished(pub)
        shown = current or record.latest(pub)
        needed = cutover.rehearsal_needed(pub)
        week = shown.week_of if shown else next_week(pub, self.site.now())
        steps = []
        for number, each in enumerate(rehearsal.STEPS):
            entry = shown.steps[number] if shown and number < len(shown.steps) else None
            steps.append({"number": number + 1, "words": each.words(week), "entry": entry})
        return {"check": cutover.cutover_check(pub, now=self.site.now()),
                "v2": v2_enabled(pub), "mail": pub.config.mail, "current": current,
                "shown": shown, "steps": steps, "total": len(rehearsal.STEPS),
                "needed": needed, "passed": record.last_passed(pub),
                "week_day": day(week),
                "busy": current is not None and current.busy(self.site.now())}

    async def page(self, request: Request) -> Response:
        context = await self.site.run(self._context)
        return self.pages.admin_page(request, "cutover.html", context)

    async def flag(self, request: Request) -> Response:
        form = await request.form()
        on = text(form, "on") == "1"
        force = text(form, "force") == "1"
        outcome = await self.site.run(
            lambda: cutover.flip(self.site.pub, on, force=force, now=self.site.now()))
        return self.pages.told(BACK, outcome)  # a flip is applied or refused

    async def start(self, request: Request) -> Response:
        """"Start a rehearsal": the record and the throwaway copy; no step run yet."""
        def go() -> Verdict:
            made = rehearsal.start(self.site.pub, now=self.site.now(), by="web")
            return Verdict(True, message=f"rehearsal {made.id} started on a throwaway copy: "
                           f"the week of {day(made.week_of)}; run its steps one by one")
        return await self._run(go)

    async def next_step(self, request: Request) -> Response:
        """"Run next step": exactly the step the page showed as next, or a refusal."""
        form = await request.form()

        def go() -> Verdict:
            rehearsal_id, seen = _number(form, "rehearsal"), _number(form, "step")
            got = rehearsal.step(self.site.pub, rehearsal_id, seen - 1, now=self.site.now())
            head = f"step {got.number}/{len(rehearsal.STEPS)} {got.words}"
            if not got.ok:
                return Verdict(False, failed=got.message, message=f"{head} failed: "
                               f"{got.message}; the rehearsal stopped there")
            if got.rehearsal.outcome == rehearsal.PASSED:
                return Verdict(True, message="Rehearsal passed: you can now switch to the "
                               "new engine")
            return Verdict(True, message=f"{head}: done ({got.message})")
        return await self._run(go)

    async def stop(self, request: Request) -> Response:
        """"Stop the rehearsal": abandoned, its copy dropped."""
        form = await request.form()

        def go() -> Verdict:
            rehearsal_id = _number(form, "rehearsal")
            if rehearsal.stop(self.site.pub, rehearsal_id, now=self.site.now()):
                return Verdict(True, message="rehearsal stopped; its throwaway copy is gone")
            return Verdict(False, "NOT_RUNNING", message="that rehearsal had already ended")
        return await self._run(go)

    async def _run(self, go: Any) -> Response:
        try:
            outcome: Verdict = await self.site.run(go)
        except (rehearsal.Refused, BadInput) as exc:
            return self._back("refused", str(exc))
        kind = "ok" if outcome.applied else "failed" if outcome.failed else "refused"
        return self._back(kind, outcome.message)

    def _back(self, kind: str, message: str) -> Response:
        return self.pages.flash(RedirectResponse(BACK, status_code=303), kind, message)


def _number(form: FormData, name: str) -> int:
    """A whole number the page posted (a hidden field); anything else is bad input."""
    found = row_number(text(form, name))
    if found is None:
        raise BadInput(f"the form's {name} is not a number")
    return found
