"""Mail, the pub's third machine, bound to ``pub_mail`` (migration 0049).

Every email the app owes is one row, keyed by ``(kind, about, recipient)``: once per person
per thing is the primary key, so a second owing of the same email (a racing tick, a
retried command) writes nothing. The row is born OWED in the unit of work that decided the
email, and a sender moves it once, under a lease (:mod:`.send`):

* ``send`` OWED -> SENT: the mail server accepted it;
* ``refuse`` OWED -> REFUSED: certainly not delivered (a refused recipient, the server
  down, the operator's address not set); ``retry`` REFUSED -> OWED is a timed edge on
  ``retry_at``, which the refusal sets a minute, two, four... later, or leaves empty when
  the tries are spent (the operator sees it);
* ``lose`` OWED -> UNKNOWN: handed over with no answer, or the sender stopped mid-send (its
  lease expired): possibly delivered, so never sent again on its own; ``resend``
  UNKNOWN -> OWED is the operator's explicit choice;
* ``drop`` OWED -> DROPPED: no longer true at its turn (an offer of a cover taken since).

The four outcomes share the lease kind ``mail``: the sender claims ``send`` before it
composes and hands the message over, and finishes through the edge its outcome names
(``finalize(to=...)``), fenced by the lease's token, so a sender whose lease was swept
finishes nothing.
"""

from __future__ import annotations

from rowstate import Binding, Edge, Lease, Machine, TimedEdge

OWED, SENT, REFUSED, UNKNOWN, DROPPED = "OWED", "SENT", "REFUSED", "UNKNOWN", "DROPPED"
STATES = (OWED, SENT, REFUSED, UNKNOWN, DROPPED)
LEASE_KIND = "mail"
SEND_TTL = 600.0  # seconds a send may take (compose, connect, the server's answers)

MAIL = Machine(
    "pub_mail",
    states=STATES,
    initial=OWED,
    active=[OWED],
    edges=[
        Edge("send", OWED, SENT, lease=LEASE_KIND, label="the mail server accepted it"),
        Edge("refuse", OWED, REFUSED, lease=LEASE_KIND, label="certainly not delivered"),
        Edge("lose", OWED, UNKNOWN, lease=LEASE_KIND, label="no answer: it may have arrived"),
        Edge("drop", OWED, DROPPED, lease=LEASE_KIND, label="no longer true at its turn"),
        Edge("retry", REFUSED, OWED, label="its wait is over"),
        Edge("resend", UNKNOWN, OWED, label="the operator sends it again"),
    ],
    notes={UNKNOWN: "possibly delivered:\nnever re-sent on its own"},
)

MAILS = Binding(
    MAIL,
    table="pub_mail",
    key=("kind", "about", "recipient"),
    state="state",
    version="version",
    lease=Lease(at="acting_at", kind="acting_kind", token="acting_token", ttl=SEND_TTL),
    payload=("attempts", "retry_at", "sent_at", "error", "address", "subject"),
    columns=("week_of", "owed_at"),
    timers=(TimedEdge("retry", due="retry_at"),),
    column_types={"owed_at": "TIMESTAMPTZ NOT NULL", "sent_at": "TIMESTAMPTZ",
                  "attempts": "INTEGER NOT NULL DEFAULT 0",
                  "state": "TEXT NOT NULL DEFAULT 'OWED'"},
)

__all__ = ["DROPPED", "LEASE_KIND", "MAIL", "MAILS", "OWED", "REFUSED", "SEND_TTL", "SENT",
           "STATES", "UNKNOWN"]
