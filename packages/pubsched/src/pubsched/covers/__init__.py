"""Cover requests (issue 19): a tender who cannot work a shift of a sent week asks for
cover, the tenders who could take it are emailed an offer with an "I'll take it" link,
and the first to take it gets the shift, in one unit of work with the roster's change.

The request is the pub's second machine (:mod:`.machine`: OPEN -> TAKEN | CANCELLED |
EXPIRED on ``pub_covers``); the week stays SENT. The parts:

* :mod:`.requests`: ask, take, cancel, and the tick's expiry;
* :mod:`.eligible`: who may take a request (offered, and re-checked at the take);
* :mod:`.read`: :class:`Cover`, one request with its shift and people named;
* :mod:`.notes`: the emails each move owes, as :mod:`pubsched.deliveries` composers;
* the offer's signed link: :func:`pubsched.people.links.offer_url` (``/c/<token>``).

The commands, the web and the tick use only what this module exports.
"""

from __future__ import annotations

from ..people.links import offer_url, verify_offer
from ..people.tenders import Tender
from ..pub import Pub
from .eligible import judged
from .machine import CANCELLED, COVER, COVERS, EXPIRED, OPEN, STATES, TAKEN
from .notes import COMPOSERS, KINDS, admin_url, deliver, notice_about
from .read import Cover, check_id, existing, get, listed
from .requests import MAX_NOTE, ask, cancel, check_note, expire_due, take


def eligible(pub: Pub, cover_id: int) -> list[Tender]:
    """Who may take request ``cover_id`` now, in offer order (least recently covering
    first, then by name); nobody once it is no longer open."""
    cover = existing(pub, cover_id)
    if cover.state != OPEN:
        return []
    with pub.atomic() as tx:
        found = judged(tx, {"week_of": cover.week_of, "shift_id": cover.shift_id,
                            "asked_by": cover.asked_by})
    return [j.tender for j in found if j.why_not is None]


__all__ = ["CANCELLED", "COMPOSERS", "COVER", "COVERS", "EXPIRED", "KINDS", "MAX_NOTE", "OPEN",
           "STATES", "TAKEN", "Cover", "admin_url", "ask", "cancel", "check_id", "check_note",
           "deliver", "eligible", "existing", "expire_due", "get", "listed", "notice_about",
           "offer_url", "take", "verify_offer"]
