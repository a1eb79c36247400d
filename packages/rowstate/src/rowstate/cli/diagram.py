"""``rowstate diagram MODULE:ATTR``: a machine (or a binding's machine) as Mermaid."""

from __future__ import annotations

import argparse
from typing import IO

from ..binding import Binding
from .targets import load


def run(args: argparse.Namespace, out: IO[str]) -> int:
    got = load(args.target, django_settings=args.django_settings)
    machine = got.machine if isinstance(got, Binding) else got
    out.write(machine.mermaid())
    return 0
