"""Case ``import_cost``: what ``import rowstate`` costs a program that starts (issue 27).

The anchor is python-statemachine, the engine a Python engineer would otherwise pick, which
requires nothing either: ``import statemachine`` in the same run. Each measurement is a
fresh interpreter (``-I``: no site customisation from the environment, no user site) that
times its own import with ``perf_counter`` around the statement, so interpreter start-up is
not counted on either side; rounds alternate the two, and the best of the rounds is kept
(the least disturbed by the rest of the machine), as ``timeit`` advises. The ratio is
statemachine's time over rowstate's (as every ratio here, higher is better); the target,
"at most twice python-statemachine's", is a ratio of at least 0.5.

Reported beside it: what ``import rowstate`` loads (modules, all from the standard library
but rowstate's own) and the largest of them by ``-X importtime``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from .harness import Result, Settings

PROGRAM = ("{prelude}import time\nstarted = time.perf_counter()\nimport {module}\n"
           "print(time.perf_counter() - started)\n")
#: python-statemachine imports Django when it is installed (its Django integration), and the
#: bench's environment has Django for the django-fsm-2 case: blocked, as in a program
#: without Django, so that its figure is the library's own
PRELUDE = {"statemachine": "import sys\nsys.modules['django'] = None\n"}


def _import_s(module: str) -> float:
    program = PROGRAM.format(module=module, prelude=PRELUDE.get(module, ""))
    done = subprocess.run([sys.executable, "-I", "-c", program],
                          capture_output=True, text=True, check=True, timeout=60)
    return float(done.stdout)


def _loaded(module: str) -> list[str]:
    code = (f"import sys\nbefore = set(sys.modules)\nimport {module}\n"
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.split()


def _largest(module: str, n: int = 5) -> list[str]:
    """The ``n`` modules with the largest own import time under ``-X importtime``."""
    done = subprocess.run([sys.executable, "-I", "-X", "importtime", "-c", f"import {module}"],
                          capture_output=True, text=True, check=True, timeout=60)
    rows = []
    for line in done.stderr.splitlines()[1:]:
        own, _, name = line.removeprefix("import time:").split("|")
        rows.append((int(own), name.strip()))
    return [f"{name} {own / 1000:.1f} ms" for own, name in sorted(rows, reverse=True)[:n]]


def run(settings: Settings, report: Callable[[Result], None]) -> None:
    rounds = 7 if settings.quick else 21
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(_import_s("rowstate"))
        theirs.append(_import_s("statemachine"))
    best_ours, best_theirs = min(ours), min(theirs)
    loaded = _loaded("rowstate")
    outside = sorted({m.partition(".")[0] for m in loaded}
                     - set(sys.stdlib_module_names) - {"rowstate"})
    report(Result(
        "import_cost", "-", "fresh interpreter", 1, 1 / best_ours, 1 / best_theirs,
        ">= 0.50", threshold=0.5, extra_ok=not outside,
        detail={"rowstate_ms": round(best_ours * 1000, 2),
                "statemachine_ms": round(best_theirs * 1000, 2),
                "rounds": rounds, "modules_loaded": len(loaded),
                "outside_the_standard_library": outside,
                "largest": _largest("rowstate")}))
