"""The operator's tender pages under ``/admin/tenders``: the list (with the add form and
each active tender's personal links), one tender's edit page, and the buttons: deactivate,
reactivate, revoke links, invite one, invite all.

Deactivate is :func:`pubsched.covers.leaving.deactivate`, as ``pubsched tender deactivate``:
a tender who works shifts to come on a sent roster is not deactivated by the button
alone; the answer is a page that names those shifts (409) with the choice the CLI's
``--cover`` gives: "Deactivate and ask for cover" (the same button with ``cover=1``), or
keep them. The requests' emails go right after the answer, as a cover's do.

Every action is the domain's (:mod:`pubsched.people.tenders`,
:mod:`pubsched.people.invite`), the same function the CLI calls, run in the thread pool. A
form that cannot be saved (bad input, an address another tender has) is drawn again with
what was typed and the reason (400 or 409), nothing written; every button answers with a
redirect carrying a flash in words. Pages name a tender by id (the URL), the domain by
email: each handler reads the tender by id first, so an unknown id is a 404 page, never a
traceback. """

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..covers import leaving
from ..people import invite, links, tenders
from ..people.tenders import Tender
from ..verdicts import BadInput, Verdict
from ..week import view
from .cover_mail import deliver_after
from .forms import text
from .pages import ADMIN_PATH
from .site import Site

LIST = ADMIN_PATH + "/tenders"
FIELDS = ("name", "email", "max_shifts", "skills", "shift_reminders")


def max_field(raw: str | None) -> int | None:
    """The maximum as typed: empty is "no maximum"; otherwise a whole number the domain
    checks (0 to 14)."""
    cleaned = (raw or "").strip()
    if not cleaned:
        return None
    try:
        return int(cleaned)
    except ValueError:  # "two", "1.5", a superscript digit, ...
        raise BadInput(f"the maximum is a whole number from 0 to 14, or empty; got {cleaned!r}"
                       ) from None


def reminders_field(form: FormData, values: Mapping[str, str]) -> bool | None:
    """The reminders box, written only when the operator changed it from what the page
    showed (``shift_reminders_was``): a save of the name does not undo the switch the
    tender flipped on their page meanwhile."""
    ticked = values.get("shift_reminders") == "1"
    return None if ticked == (text(form, "shift_reminders_was") == "1") else ticked


def typed(form: FormData) -> dict[str, str]:
    """What the operator typed, to draw the form again as it was."""
    return {name: text(form, name) or "" for name in FIELDS}


def shown(tender: Tender) -> dict[str, str]:
    """A tender's details as the edit form's fields."""
    return {"name": tender.name, "email": tender.email,
            "max_shifts": "" if tender.max_shifts is None else str(tender.max_shifts),
            "skills": " ".join(tender.skills),
            "shift_reminders": "1" if tender.shift_reminders else ""}


class TenderAdmin:
    """The tender pages' handlers; they share only the site."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    # -- the pages ------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        return await self._list_page(request)

    async def _list_page(self, request: Request, *, problem: str | None = None,
                         values: Mapping[str, str] | None = None,
                         status: int = 200) -> Response:
        pub = self.site.pub

        def rows() -> list[dict[str, Any]]:
            out = []
            now = self.site.now()
            for t in tenders.all_tenders(pub):
                row: dict[str, Any] = {"t": t, "form": None, "calendar": None,
                                       "shifts": 0}
                if t.active:  # an inactive tender's links do nothing: none are shown
                    row["form"] = links.tender_url(pub.config, t.id, t.link_version)
                    row["calendar"] = links.calendar_url(pub.config, t.id, t.link_version)
                    # shifts to come on a sent roster: the button leads to the page naming them
                    row["shifts"] = len(leaving.shifts_to_come(pub, t.id, now))
                out.append(row)
            return out

        found = await self.site.run(rows)
        return self.pages.admin_page(request, "tenders.html", {
            "rows": found, "problem": problem, "values": values or {},
            "active": sum(1 for r in found if r["t"].active)}, status=status)

    async def edit_page(self, request: Request) -> Response:
        tender = await self._tender(request)
        if tender is None:
            return self._missing(request)
        return await self._edit(request, tender, shown(tender))

    async def _edit(self, request: Request, tender: Tender, values: Mapping[str, str], *,
                    problem: str | None = None, status: int = 200) -> Response:
        away = await self.site.run(view.time_off_shown, self.site.pub, tender,
                                       self.site.now())
        return self.pages.admin_page(request, "tender_edit.html", {
            "t": tender, "values": values, "problem": problem,
            # their time off (_time_off.html, its forms handled by away.py)
            "time_off": away, "away_to": f"{LIST}/{tender.id}", "away_who": tender.name},
            status=status)

    # -- the forms ------------------------------------------------------------------------

    async def add(self, request: Request) -> Response:
        form = await request.form()
        values = typed(form)

        def go() -> Verdict:
            return tenders.add(self.site.pub, values["name"], values["email"],
                               max_shifts=max_field(values["max_shifts"]),
                               skills=tenders.split_skills(values["skills"]),
                               now=self.site.now())

        try:
            outcome = await self.site.run(go)
        except BadInput as exc:
            return await self._list_page(request, problem=str(exc), values=values,
                                         status=400)
        if not outcome.applied:
            return await self._list_page(request, problem=outcome.message, values=values,
                                         status=409)
        name = values["name"].strip()
        return self._back(LIST, "ok",
                          f"{name} is added. Press Invite to email them their personal link.")

    async def save(self, request: Request) -> Response:
        tender = await self._tender(request)
        if tender is None:
            return self._missing(request)
        form = await request.form()
        values = typed(form)

        def go() -> Verdict:
            return tenders.edit(self.site.pub, tender.email, name=values["name"],
                                new_email=values["email"],
                                max_shifts=max_field(values["max_shifts"]),
                                skills=tenders.split_skills(values["skills"]),
                                shift_reminders=reminders_field(form, values))

        try:
            outcome = await self.site.run(go)
        except BadInput as exc:
            return await self._edit(request, tender, values, problem=str(exc), status=400)
        if not outcome.applied:
            return await self._edit(request, tender, values, problem=outcome.message,
                                    status=409)
        return self._back(LIST, "ok", outcome.message)

    # -- the buttons ----------------------------------------------------------------------

    async def deactivate(self, request: Request) -> Response:
        tender = await self._tender(request)
        if tender is None:
            return self._back(LIST, "refused", "no such tender")
        cover = text(await request.form(), "cover") == "1"
        try:
            outcome = await self.site.run(lambda: leaving.deactivate(
                self.site.pub, tender.email, cover=cover, now=self.site.now()))
        except BadInput as exc:  # e.g. the email was changed meanwhile
            return self._back(LIST, "refused", str(exc))
        if outcome.reason == leaving.HAS_SHIFTS:
            return self.pages.admin_page(request, "tender_deactivate.html", {
                "t": tender, "shifts": outcome.detail["shifts"]}, status=409)
        answer = self._flash_verdict(outcome, None)
        if outcome.applied and cover:
            answer.background = deliver_after(self.site)
        return answer

    async def activate(self, request: Request) -> Response:
        return await self._button(request, tenders.activate, lambda t: (
            f"{t.name} is active again: their current links work again"))

    async def revoke(self, request: Request) -> Response:
        # what revoking does, said whole: every link handed out so far is refused (the
        # calendar feed's too, web/tender.py), and nobody is mailed the new ones
        return await self._button(request, tenders.revoke_links, lambda t: (
            f"revoked the links of {t.name}: the form link and the calendar feed they have "
            "stop working now (their calendar stops updating until they subscribe to the "
            f"new one). {t.name} is not mailed about it: the new links are on this page, "
            "and Invite emails them"))

    async def invite_one(self, request: Request) -> Response:
        return await self._button(request, lambda pub, email: invite.invite(
            pub, email, now=self.site.now()), None)

    async def invite_all(self, request: Request) -> Response:
        outcome = await self.site.run(
            lambda: invite.invite_all(self.site.pub, now=self.site.now()))
        return self._flash_verdict(outcome, None)

    async def _button(self, request: Request, act: Callable[[Any, str], Verdict],
                      said: Callable[[Tender], str] | None) -> Response:
        tender = await self._tender(request)
        if tender is None:
            return self._back(LIST, "refused", "no such tender")
        try:
            outcome = await self.site.run(act, self.site.pub, tender.email)
        except BadInput as exc:  # e.g. the email was changed meanwhile
            return self._back(LIST, "refused", str(exc))
        return self._flash_verdict(outcome, said(tender) if said else None)

    def _flash_verdict(self, outcome: Verdict, words: str | None) -> Response:
        if outcome.applied:
            return self._back(LIST, "ok", words or outcome.message)
        kind = "failed" if outcome.failed else "refused"
        return self._back(LIST, kind, outcome.message or (outcome.reason or ""))

    # -- shared ---------------------------------------------------------------------------

    async def _tender(self, request: Request) -> Tender | None:
        tender_id = int(request.path_params["tender_id"])  # {..:id}: fits a row
        return await self.site.run(tenders.by_id, self.site.pub, tender_id)

    def _missing(self, request: Request) -> Response:
        return self.pages.admin_page(request, "problem.html", {
            "title": "No such tender",
            "text": "There is no tender with this number: see the list of tenders."},
            status=404)

    def _back(self, where: str, kind: str, words: str) -> Response:
        return self.pages.flash(RedirectResponse(where, status_code=303), kind, words)
