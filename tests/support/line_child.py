"""A warm child process for the pub scheduler's process races: Python started once, running
a script that answers each line written to its stdin with one JSON line on its stdout.

A race of many rounds used to start a fresh interpreter per process per round (~0.6 s each
to start Python and import pubsched, more on a busy machine); a ``LineChild`` pays that once
and serves every round. Each child is still its own process with its own connections (its
script opens them, per round or once), and a round's children are released together by
writing their lines one after the other, as the fresh processes were released by their "go"
lines. A crash test that SIGKILLs its process needs a fresh one per round and does not use
this.

The script reads ``sys.stdin.readline()`` until it returns "" (stdin closed: exit 0) and
prints one line of JSON per line read, with ``flush=True``.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Self


class LineChild:
    def __init__(self, script: str, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ if env is None else env))
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._pumps = [threading.Thread(target=self._pump, args=(stream, put), daemon=True)
                       for stream, put in ((self.proc.stdout, self._lines.put),
                                           (self.proc.stderr, self._stderr.append))]
        for pump in self._pumps:
            pump.start()

    @staticmethod
    def _pump(stream: IO[str], put: Any) -> None:
        for line in stream:
            put(line)
        put(None)

    def send(self, job: Any) -> None:
        """One line of JSON to the child's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = 120.0) -> Any:
        """The child's next line of JSON (fails with its stderr if it ended instead)."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer in {timeout} s: {self.stderr}") from None
        if line is None:
            raise AssertionError(f"the child ended ({self.proc.wait()}): {self.stderr}")
        return json.loads(line)

    @property
    def stderr(self) -> str:
        return "".join(line for line in self._stderr if line is not None)

    def close(self, timeout: float = 30.0) -> None:
        """Close its stdin and wait for it to exit 0 (killed if it does not exit)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise AssertionError(f"the child did not exit: {self.stderr}") from None
        self._release()
        assert code == 0, f"the child exited {code}: {self.stderr}"

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._release()

    def _release(self) -> None:
        """The pipes, once the child has ended and its output is read to the end."""
        for pump in self._pumps:
            pump.join(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:  # a failing test: do not wait for a hung child
            self._kill()


def at_once(children: Sequence[LineChild], jobs: Sequence[Any]) -> list[Any]:
    """Each child its job, written one after the other (released together); their answers,
    in the children's order."""
    for child, job in zip(children, jobs, strict=True):
        child.send(job)
    return [child.answer() for child in children]
