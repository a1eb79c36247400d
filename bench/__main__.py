"""``python -m bench [--quick]``: the benchmark suite of issue 4.

Prints one table row per measurement as it lands and writes ``bench/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any

from .harness import Result, Settings, print_header, print_row

ALL_CASES = ("pure_transition", "outbox_transition", "leased_edge", "finalization_path",
             "contention", "django_fsm2", "growth", "relay_nats", "bulk_transition",
             "pub_picker", "pub_week_page", "pub_rush", "observer_cost", "import_cost")
PUB_CASES = {"pub_picker", "pub_week_page", "pub_rush"}
RESULTS = Path(__file__).resolve().parent / "results.json"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="short phases and smaller growth tables (< 2 minutes)")
    ap.add_argument("--cases", default=",".join(ALL_CASES),
                    help="comma-separated subset of: " + ", ".join(ALL_CASES))
    ap.add_argument("--backends", default="sqlite,postgresql",
                    help="comma-separated subset of: sqlite, postgresql")
    ap.add_argument("--rounds", type=int, help="alternating rounds per measurement")
    ap.add_argument("--seconds", type=float, help="seconds per phase (one side, one round)")
    ap.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    cases = {c.strip() for c in args.cases.split(",") if c.strip()}
    unknown = cases - set(ALL_CASES)
    if unknown:
        print(f"unknown case(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    settings = Settings(
        quick=args.quick,
        rounds=args.rounds or (5 if args.quick else 25),
        phase_s=args.seconds or (0.12 if args.quick else 0.25),
        warmup_ops=40 if args.quick else 150,
    )
    from .env import Env

    env = Env()
    # a SIGTERM (timeout, Ctrl-C in make) still drops the database and the SQLite file
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: list[Result] = []
    started = time.perf_counter()

    def report(r: Result) -> None:
        results.append(r)
        print_row(r)

    try:
        if "postgresql" in backends and env.start_postgres() is None:
            backends.remove("postgresql")
        print(f"rowstate bench ({'quick' if args.quick else 'full'}): {settings.rounds} "
              f"alternating rounds of ~{settings.phase_s:g} s per side; machine: "
              f"{platform.machine()}, {os.cpu_count()} CPU, Python {platform.python_version()}, "
              f"{_versions(env)}")
        print_header()
        if "import_cost" in cases:
            from . import imports

            imports.run(settings, report)
        from . import cas

        cas.run(env, settings, backends, cases, report)
        if "bulk_transition" in cases:
            from . import bulk

            bulk.run(env, settings, backends, report)
        if "observer_cost" in cases:
            from . import observer

            observer.run(env, settings, backends, report)
        if "contention" in cases:
            from . import contention

            contention.run(env, settings, backends, report)
        if "django_fsm2" in cases and "postgresql" in backends:
            from . import django_fsm

            django_fsm.run(env, settings, report)
        if "growth" in cases and "postgresql" in backends:
            from . import growth

            growth.run(env, settings, report)
        if "growth" in cases:
            from . import rename

            rename.run(env, settings, backends, report)
        if "relay_nats" in cases and "postgresql" in backends:
            from . import relay

            relay.run(env, settings, report)
        if cases & PUB_CASES:
            from . import pubsched

            pubsched.run(env, settings, backends, cases, report)
    finally:
        env.close()
    _bulk_against_django(results)
    elapsed = time.perf_counter() - started
    _write(args.output, results, settings, elapsed)
    failed = [r for r in results if r.passed is False]
    print(f"\n{len(results)} measurements in {elapsed:.0f} s; "
          f"{sum(r.passed is True for r in results)} PASS, {len(failed)} FAIL; "
          f"written to {args.output}")
    return 0


def _bulk_against_django(results: list[Result]) -> None:
    """The set-based move's per-row speed against django-fsm-2's one-row loop, measured in
    the same run (the django case's baseline is django-fsm-2's transitions per second)."""
    django = next((r for r in results if r.case == "django_fsm2"), None)
    if django is None or not django.baseline_ops_s:
        return
    for r in results:
        if r.case == "bulk_transition":
            r.detail["django_fsm2_loop_rows_s"] = round(django.baseline_ops_s)
            r.detail["library_over_django_loop"] = round(
                r.library_ops_s / django.baseline_ops_s, 1)


def _versions(env: Any) -> str:
    import sqlite3

    import psycopg

    parts = [f"SQLite {sqlite3.sqlite_version}", f"psycopg {psycopg.__version__}"]
    if env.pg_dsn:
        with psycopg.connect(env.pg_dsn) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            parts.append(f"PostgreSQL {row[0].split()[0] if row else '?'}")
    return ", ".join(parts)


def _write(path: Path, results: list[Result], settings: Settings, elapsed: float) -> None:
    path.write_text(json.dumps([r.as_json() for r in results], indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
