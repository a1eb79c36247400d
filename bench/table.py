"""Render bench/results.json as the Markdown table bench/README.md carries:
``python -m bench.table [results.json]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results.json"


def _rate(v: Any) -> str:
    return f"{v:,.0f}" if isinstance(v, int | float) else "-"


def render(rows: list[dict[str, Any]]) -> str:
    out = ["| case | backend | mode | workers | library ops/s | baseline ops/s | ratio "
           "| target | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        target = r.get("target")
        verdict = {True: "PASS", False: "FAIL", None: "info"}[r.get("pass")]
        out.append(
            f"| {r['case']} | {r['backend']} | {r['mode']} | {r['workers']} "
            f"| {_rate(r['library_ops_s'])} | {_rate(r['baseline_ops_s'])} "
            f"| {r['ratio']:.2f} | {'-' if target is None else target} | {verdict} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else RESULTS
    print(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
