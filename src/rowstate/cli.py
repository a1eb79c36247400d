"""``rowstate diagram MODULE:ATTR`` prints a machine (or a binding's machine) as Mermaid."""

from __future__ import annotations

import argparse
import importlib
import sys

from .binding import Binding
from .machine import Machine


def load(target: str) -> Machine:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"expected MODULE:ATTR, got {target!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: the current directory is importable
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, Binding):
        return obj.machine
    if not isinstance(obj, Machine):
        raise SystemExit(f"{target} is a {type(obj).__name__}, not a Machine or Binding")
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rowstate")
    sub = parser.add_subparsers(dest="command", required=True)
    diagram = sub.add_parser("diagram", help="print a machine as a Mermaid stateDiagram-v2")
    diagram.add_argument("target", help="MODULE:ATTR naming a Machine or a Binding")
    args = parser.parse_args(argv)
    if args.command == "diagram":
        sys.stdout.write(load(args.target).mermaid())
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
