"""Prometheus' own checker, ``promtool`` (Debian's ``prometheus`` package; ``.ci/run``
installs it): what a real Prometheus would say of our metrics and our alert rules. Missing,
a test skips, or fails under ``ROWSTATE_REQUIRE_SERVICES=1``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from support.services import services_required


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        why = "promtool is not installed (apt-get install prometheus)"
        if services_required():
            pytest.fail(why)
        pytest.skip(why)
    return found


def promtool_says(*args: str, stdin: str | None = None, cwd: Path | None = None
                  ) -> subprocess.CompletedProcess[str]:
    """``promtool ARGS`` run to its end (its answer on stdout and stderr)."""
    return subprocess.run([promtool(), *args], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=cwd)


__all__ = ["promtool", "promtool_says"]
