"""The mail log: every message handed to the mail server, with what the server said.

Since 0050 the log is the mail machine's own history: each handover finishes through one
edge (``send`` delivered, ``refuse`` refused, ``lose`` unknown) whose event carries the
address, the subject and the server's answer (:class:`~.deliver.Sender`), with who sent it
(``by``). What was handed over before lives on in ``pub_mail_log``, read here the same
way, so a week's log reads whole across the migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..db.instants import instant
from ..pub import Pub
from .outbox import listed

OUTCOME_OF_EDGE = {"send": "delivered", "refuse": "refused", "lose": "unknown"}


@dataclass(frozen=True)
class Logged:
    """One handover: the mail's ``kind``, the address it went to, its subject, when and
    by whom, the ``outcome`` (delivered, refused, unknown) and the server's ``answer``."""

    week_of: str | None
    kind: str
    recipient: str
    subject: str
    at: datetime
    outcome: str
    by: str | None = None
    answer: str | None = None

    @property
    def label(self) -> str:
        """The kind with its outcome when it was not delivered (``schedule:refused``)."""
        return self.kind if self.outcome == "delivered" else f"{self.kind}:{self.outcome}"


def mail_log(pub: Pub, week: str | None = None) -> list[Logged]:
    """The handovers of ``week`` (None: of every week and of none), oldest first."""
    where, params = ("WHERE week_of = %s", [week]) if week is not None else ("", [])
    out = [_of_old_log(r) for r in pub.query(
        f"SELECT week_of, kind, recipient, subject, at FROM pub_mail_log {where} "
        "ORDER BY id", params)]
    if pub.schema.mail:
        for mail in listed(pub, week=week):
            for event in pub.mail.history(mail.key):
                data = event.data if isinstance(event.data, dict) else {}
                if event.edge in OUTCOME_OF_EDGE and "to" in data and event.at is not None:
                    out.append(Logged(mail.week_of, mail.kind, str(data["to"]),
                                      str(data.get("subject", "")), event.at,
                                      OUTCOME_OF_EDGE[event.edge], event.by,
                                      data.get("answer")))
    return sorted(out, key=lambda line: line.at)


def _of_old_log(row: dict[str, object]) -> Logged:
    kind, _, outcome = str(row["kind"]).rpartition(":")  # "nudge:late_open:refused"
    if outcome not in OUTCOME_OF_EDGE.values():  # logged before outcomes were: delivered
        kind, outcome = str(row["kind"]), "delivered"
    week = row["week_of"]
    return Logged(None if week is None else str(week), kind, str(row["recipient"]),
                  str(row["subject"]), instant(row["at"]), outcome)


__all__ = ["OUTCOME_OF_EDGE", "Logged", "mail_log"]
