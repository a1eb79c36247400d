"""The command line's surface: one sub-command per module, each with its ``run``."""

from __future__ import annotations

import argparse

from . import diagram, inspect, stuck


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 < n <= 10_000:
        raise argparse.ArgumentTypeError(f"expected 1..10000, got {n}")
    return n


def _events(text: str) -> int:
    return 0 if text.strip() == "0" else _positive(text)


def _seconds(text: str) -> float:
    try:
        n = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= n < 10**9:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return n


def _version() -> str:
    from importlib.metadata import version

    return f"rowstate {version('rowstate')}"


def _loading() -> argparse.ArgumentParser:
    """What every command takes to import the app's module."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--django-settings", metavar="MODULE", default=None,
                   help="the Django settings module: Django is set up before the binding's "
                   "module is imported (default: $DJANGO_SETTINGS_MODULE, when set)")
    return p


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="rowstate", description="Durable state machines for database rows: look at "
        "a machine, one row, or the rows that are stuck.")
    top.add_argument("--version", action="version", version=_version(),
                     help="print the installed rowstate's version and exit")
    sub = top.add_subparsers(dest="command", required=True)
    loading = [_loading()]

    d = sub.add_parser("diagram", help="print a machine as a Mermaid stateDiagram-v2",
                       parents=loading)
    d.add_argument("target", metavar="MODULE:ATTR",
                   help="MODULE:ATTR naming a Machine or a Binding")
    d.set_defaults(run=diagram.run)

    url_help = ("database URL: sqlite:///path.db or postgresql://... (the commands only "
                "read: a standby's URL, or every node's with "
                "target_session_attrs=prefer-standby, keeps them off the primary)")
    binding_help = "MODULE:ATTR naming the Binding (the current directory is importable)"
    i = sub.add_parser(
        "inspect", parents=loading,
        help="one row: its columns, lease, claim, edges, timers, last events",
        description="Print one row as the engine sees it now: every column, its lease and "
        "finalization claim (expired?), every edge with whether it is allowed and why not, "
        "its timers and notices, and its last events. Read-only.")
    i.add_argument("url", metavar="URL", help=url_help)
    i.add_argument("target", metavar="MODULE:BINDING", help=binding_help)
    i.add_argument("key", metavar="KEY", help="the row's key: the text for a one-column "
                   "key (converted by the column's type), a JSON array for several "
                   "('[\"v1\", 3]')")
    i.add_argument("--events", type=_events, default=10, metavar="N",
                   help="how many of the last events to show (default 10; 0: none)")
    i.add_argument("--json", action="store_true", help="one JSON document on stdout")
    i.set_defaults(run=inspect.run)

    s = sub.add_parser(
        "stuck", parents=loading,
        help="rows that do not move: expired leases, overdue timers, stale "
        "claims, undelivered events",
        description="List the rows of a binding with an expired lease, an overdue timer "
        "(one fire_due would fire now), a finalization claim past its TTL, and, when a "
        "relay delivers the binding's events (Binding(relayed=True)) or --undelivered "
        "asks, the events no relay delivered for --older seconds. Read-only. Exit "
        "status: 0 nothing is stuck, 3 something is (listed), 1 the database failed, "
        "2 bad usage.")
    s.add_argument("url", metavar="URL", help=url_help)
    s.add_argument("target", metavar="MODULE:BINDING", help=binding_help)
    s.add_argument("--undelivered", action=argparse.BooleanOptionalAction, default=None,
                   help="count the events no relay delivered (default: when the binding "
                   "is relayed=True)")
    s.add_argument("--older", type=_seconds, default=60.0, metavar="SECONDS",
                   help="an undelivered event is stuck after this long (default 60)")
    s.add_argument("--limit", type=_positive, default=50, metavar="N",
                   help="rows listed per group (default 50; the counts are complete)")
    s.add_argument("--json", action="store_true", help="one JSON document on stdout")
    s.set_defaults(run=stuck.run)
    return top
