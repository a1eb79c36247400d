"""``make demo``: a week's run through the whole lifecycle on an embedded SQLite file."""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rowstate
from pubsched.machine import RUNS


def show(what: str, result: object) -> None:
    print(f"  {what:<34} -> {result}")


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="rowstate-demo-"), "pub.db")
    url = sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{path}"
    store = rowstate.connect(url)
    runs = rowstate.Lifecycle(store, RUNS, publishers=[])
    runs.create_schema()
    week = "2026-12-07"
    runs.create(week, status="pending")  # born through the door: [*] -> DRAFT
    print(f"database: {url}\n")
    print(RUNS.machine.mermaid())

    def step(label: str, result: rowstate.TransitionResult | rowstate.RunResult) -> None:
        state = result.state
        verdict = "applied" if result.applied else f"refused ({result.reason})"
        show(label, f"{verdict}: {result.previous} -> {state}")

    print("A week's run (legacy status 'pending' is read as DRAFT until the first move):")
    step("open the form", runs.transition(week, "COLLECTING"))
    step("extend the deadline", runs.transition(week, "COLLECTING", from_="COLLECTING"))
    step("close the form (leased)", runs.run(week, "close", lambda lease: True))
    step("generate (leased)", runs.run(week, "generate", lambda lease: "3 shifts"))
    step("approve", runs.transition(week, "APPROVED"))
    step("send twice: first", runs.run(week, "send", lambda lease: "email sent"))
    step("send twice: second", runs.run(week, "send", lambda lease: "email sent"))
    print("\nThe row:", runs.get(week))
    print("\nIts history (events table = audit log and outbox):")
    for e in runs.history(week):
        edge, src = e.edge or "(born)", e.from_state or "[*]"
        print(f"  #{e.id} v{e.version} {edge:<10} {src} -> {e.to_state}")
    store.close()


if __name__ == "__main__":
    main()
