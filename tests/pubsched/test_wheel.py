"""The built wheel runs anywhere (issue 20): built from this checkout, installed with pip into
a fresh virtual environment outside it, and used from a directory that is not the
checkout, with an environment that names nothing of it. ``pubsched init``, ``pubsched
demo`` and ``pubsched serve`` (a page, the stylesheet and the vendored mermaid fetched over
HTTP) must all work from what the wheel carries: the templates, the static files and the
migrations are package data, and nothing may be read from the source tree.

The dependencies come from the package index as a user's would (pip's own cache makes a
second run quick). The wheels are built without isolation, on the dev environment's
hatchling and hatch-vcs (as tests/test_distributions.py builds), and the venv is made
without pip, the dev environment's pip installing into it (``--python``): the same wheels
and the same install, without fetching the backend or bootstrapping pip each time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.services import free_port, http_answers, wait_for_process

CHECKOUT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    venv: Path
    bin: Path

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """Only what a user's shell would have: the venv's bin first on PATH, a HOME."""
        return {"PATH": f"{self.bin}{os.pathsep}/usr/bin{os.pathsep}/bin",
                "HOME": str(home), "LANG": "C.UTF-8", **extra}


@pytest.fixture(scope="module")  # one worker runs this module: tests/conftest.py ONE_WORKER
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    where = tmp_path_factory.mktemp("wheel")
    dist = where / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(dist),
                    *(str(CHECKOUT / "packages" / name) for name in ("rowstate", "pubsched"))],
                   check=True, capture_output=True, timeout=300)
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["pubsched", "rowstate"]
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    bin_dir = venv / "bin"
    pip_env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PUBSCHED_", "PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"),
                           "--disable-pip-version-check", "install", "-q", *map(str, wheels)],
                          env=pip_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    yield Installed(venv, bin_dir)


def test_the_installed_package_is_the_wheels_not_the_checkouts(
        installed: Installed, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(installed.bin / "python"), "-c",
         "import pubsched, rowstate; print(pubsched.__file__); print(rowstate.__file__)"],
        cwd=tmp_path, env=installed.env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for path in done.stdout.split():
        assert Path(path).is_relative_to(installed.venv), path
        assert not Path(path).is_relative_to(CHECKOUT), path


def test_init_and_demo_run_from_the_wheel(installed: Installed, tmp_path: Path) -> None:
    env = installed.env(tmp_path, PUBSCHED_DB=f"sqlite:///{tmp_path}/pub.db")
    init = subprocess.run(["pubsched", "init"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    assert "migration(s)" in init.stdout and "engine: v2" in init.stdout
    demo = subprocess.run(["pubsched", "demo"], cwd=tmp_path, env=installed.env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "SENT" in demo.stdout and "pubsched serve" in demo.stdout
    assert "Traceback" not in demo.stdout + demo.stderr


def fetch(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.status, reply.headers.get("content-type", ""), reply.read()


def wait_for(base: str, server: subprocess.Popen[str]) -> None:
    wait_for_process(server, lambda: http_answers(f"{base}/healthz"), "pubsched serve")


def dockerfile_json(op: str) -> list[str]:
    """The exec-form argument list of the Dockerfile's ``op`` (CMD, or HEALTHCHECK's CMD)."""
    text = (CHECKOUT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.split(None, 1)[:1] == [op]]
    parsed: list[str] = json.loads(line[line.index("["):])
    return parsed


def test_the_containers_command_and_health_check_run_against_the_wheel(
        installed: Installed, tmp_path: Path) -> None:
    """What the image runs (no Docker daemon here): its CMD, listening on loopback rather
    than 0.0.0.0 (only loopback addresses here) on a free port, then its HEALTHCHECK."""
    port = free_port()
    command = [arg.replace("--host 0.0.0.0 --port 8000", f"--host 127.0.0.1 --port {port}")
               for arg in dockerfile_json("CMD")]
    assert command != dockerfile_json("CMD"), "the CMD's host and port moved"
    env = installed.env(tmp_path, PUBSCHED_DB=f"sqlite:///{tmp_path}/pub.db",
                        PUBSCHED_SECRET="k5Jq0vVd3oZl8sYw2nQx7RtA1bCe9fHg4uMi6pLz0aE")
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(f"http://127.0.0.1:{port}", server)
        check = [arg.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
                 for arg in dockerfile_json("HEALTHCHECK")]
        done = subprocess.run(check, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0, done.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
    assert "applied" in out and "Traceback" not in out, out


def test_serve_from_the_wheel_answers_a_page_and_its_static_files(
        installed: Installed, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/pub.db"
    env = installed.env(tmp_path, PUBSCHED_DB=url, PUBSCHED_ADMIN_PASSWORD="a long password",
                        PUBSCHED_INSECURE_COOKIES="1")
    assert subprocess.run(["pubsched", "init"], cwd=tmp_path, env=env, capture_output=True,
                          timeout=120).returncode == 0
    port = free_port()
    server = subprocess.Popen(["pubsched", "serve", "--port", str(port)], cwd=tmp_path,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(base, server)
        status, kind, body = fetch(f"{base}/admin/login")
        assert status == 200 and kind.startswith("text/html") and b"Log in" in body
        status, kind, body = fetch(f"{base}/static/style.css")
        assert status == 200 and kind.startswith("text/css") and len(body) > 1000
        status, kind, body = fetch(f"{base}/static/mermaid.min.js")
        assert status == 200 and "javascript" in kind and len(body) > 100_000
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
    assert "Traceback" not in out, out
