"""A two-node PostgreSQL cluster under Patroni and etcd, started by the tests, that they can
make fail over: kill the leader node outright, bring it back as a replica, switch
synchronous replication on and off.

The cluster is built from ``deploy/patroni/patroni.yml``, the configuration docs/scale.md
tells operators to run: each node gets that file with its own name, ports and directories
filled in (:func:`node_config`), so what the failover tests prove is about that file, not a
copy of it. Everything runs on 127.0.0.1 on free ports, in one temporary directory, as the
``postgres`` OS user when we are root (initdb refuses root); etcd is ours too unless
``$ROWSTATE_ETCD_HOSTS`` names one (then this cluster's keys live under a namespace of its
own). :meth:`PatroniCluster.stop` ends only the processes this module started, by pid.

A missing ``patroni``/``etcd`` or PostgreSQL binaries is :class:`ServiceUnavailable` (the
tests skip, or fail under ``ROWSTATE_REQUIRE_SERVICES=1``). A cluster that does not reach
the state asked for in time raises :class:`ClusterTimeout`, whose message says what each
process was doing and ends with the tail of each log. ``ROWSTATE_KEEP_CLUSTER=1`` keeps the
temporary directory (configurations, data, logs) after the processes are stopped.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import copy
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import yaml  # type: ignore[import-untyped]  # (types-PyYAML is not a dependency)

from support.pg_server import PG_OS_USER, find_pg_bindir
from support.services import (
    LOCALHOST,
    ServiceUnavailable,
    free_port,
    log_tail,
    pid_alive,
    wait_until,
)

#: The cluster configuration the tests use, the one the docs point to.
CONFIG_TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "patroni" / "patroni.yml"

#: An etcd to use instead of starting one (``host:port[,host:port]``).
ETCD_HOSTS_ENV = "ROWSTATE_ETCD_HOSTS"

NODE_NAMES = ("node1", "node2")


class ClusterTimeout(AssertionError):
    """The cluster did not reach the state a test asked for in time; the message says what
    each process was doing and shows the end of its log."""


def _get_json(url: str, timeout: float = 2.0) -> tuple[int, Any]:
    """(status, parsed body) of a GET; (0, None) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:  # Patroni answers 503 with a body too
        try:
            body = json.loads(exc.read() or b"null")
        except ValueError:
            body = None
        return exc.code, body
    except (OSError, ValueError):
        return 0, None


def _reap(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (a postmaster's backends and workers), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found


@dataclass
class Node:
    """One Patroni node and the PostgreSQL it runs."""

    name: str
    pg_port: int
    api_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def config_file(self) -> Path:
        return self.directory / "patroni.yml"

    @property
    def log_file(self) -> Path:
        """Patroni's log, with its PostgreSQL's (the server logs to stderr, which it shares)."""
        return self.directory / "patroni.log"

    @property
    def api_url(self) -> str:
        return f"http://{LOCALHOST}:{self.api_port}"

    @property
    def dsn(self) -> str:
        """This node alone (a test reading a standby, or measuring its clock)."""
        return f"postgresql://postgres@{LOCALHOST}:{self.pg_port}/postgres"

    @property
    def patroni_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def postmaster_pid(self) -> int | None:
        """The pid in the data directory's postmaster.pid, if that process is alive."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
            if pid_alive(pid):
                return pid
        return None

    def stop_postmaster(self) -> None:
        """Immediate shutdown (SIGQUIT) of a postmaster its Patroni left running."""
        pid = self.postmaster_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)
            wait_until(lambda: not pid_alive(pid), timeout=10)

    def describe(self) -> str:
        patroni = (f"Patroni pid {self.process.pid} " if self.process is not None else "Patroni ")
        patroni += "running" if self.patroni_alive else "not running"
        postmaster = self.postmaster_pid()
        status, body = _get_json(f"{self.api_url}/patroni", timeout=1)
        api = (f"REST API {status}: role={body.get('role')} state={body.get('state')}"
               if isinstance(body, dict) else "REST API not answering")
        return (f"{self.name} (PostgreSQL :{self.pg_port}, API :{self.api_port}): {patroni}, "
                f"postmaster {postmaster or 'not running'}, {api}\n"
                f"--- tail of {self.log_file}:\n{log_tail(self.log_file, 20)}")


def first_writable(nodes: list[Node], until: float) -> tuple[Node, float] | None:
    """Poll the nodes directly until one takes a write (an xid commits there), by
    ``until`` (``time.monotonic()``): the node, and the moment the new primary accepts
    writes as a fresh connection sees it; None if none did."""
    while time.monotonic() < until:
        for node in nodes:
            with (contextlib.suppress(psycopg.Error),
                  psycopg.connect(node.dsn, connect_timeout=1, autocommit=True) as conn):
                conn.execute("SELECT txid_current()")
                return node, time.monotonic()
        time.sleep(0.05)
    return None


def node_config(template: dict[str, Any], node: Node, *, etcd_hosts: str, namespace: str,
                bindir: Path, socket_dir: Path) -> dict[str, Any]:
    """The template with this node's name, addresses and directories filled in: the values
    the template's opening comment lists as per-node, and where this machine keeps things."""
    config = copy.deepcopy(template)
    config["name"] = node.name
    config["namespace"] = namespace
    config["etcd3"] = {"hosts": etcd_hosts}
    api = f"{LOCALHOST}:{node.api_port}"
    config["restapi"].update(listen=api, connect_address=api)
    pg = config["postgresql"]
    address = f"{LOCALHOST}:{node.pg_port}"
    pg.update(listen=address, connect_address=address, data_dir=str(node.data_dir),
              bin_dir=str(bindir), pgpass=str(node.directory / "pgpass"))
    pg.setdefault("parameters", {})["unix_socket_directories"] = str(socket_dir)
    return config


def _patroni_env(home: Path) -> dict[str, str]:
    """A clean environment: Patroni is Debian's, on the system Python; the test process's
    PYTHONPATH and PG* variables are not its business."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("PG", "PYTHON", "PATRONI", "VIRTUAL_ENV"))}
    keep.update(HOME=str(home), LC_ALL="C.UTF-8", LANG="C.UTF-8")
    keep["PATH"] = "/usr/bin:/bin:/usr/sbin:/sbin:" + keep.get("PATH", "")
    return keep


@dataclass
class PatroniCluster:
    """Two Patroni nodes and (unless given one) an etcd, all ours: see the module docstring."""

    base_dir: Path
    patroni: str  # the executable
    nodes: list[Node]
    etcd_hosts: str
    namespace: str
    run_as: str | None
    etcd_process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)
    #: seconds from the first process started to a leader and a sync standby
    start_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    # -- addresses ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The multi-host URL a client uses: libpq tries each host and keeps the primary."""
        hosts = ",".join(f"{LOCALHOST}:{node.pg_port}" for node in self.nodes)
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    @property
    def etcd_log(self) -> Path:
        return self.base_dir / "etcd.log"

    # -- state ----------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (GET /cluster), from the first node that answers."""
        for node in self.nodes:
            if not node.patroni_alive:
                continue
            status, body = _get_json(f"{node.api_url}/cluster")
            if status == 200 and isinstance(body, dict):
                members: list[dict[str, Any]] = body.get("members", [])
                return members
        return []

    def leader(self) -> Node | None:
        """The node whose REST API says it is the primary (GET /leader answers 200)."""
        for node in self.nodes:
            if node.patroni_alive and _get_json(f"{node.api_url}/leader", timeout=1)[0] == 200:
                return node
        return None

    def sync_standby(self) -> Node | None:
        """The node whose REST API says it is the synchronous standby (GET /sync: 200)."""
        for node in self.nodes:
            if node.patroni_alive and _get_json(f"{node.api_url}/sync", timeout=1)[0] == 200:
                return node
        return None

    def synchronous_mode(self) -> bool:
        """The cluster-wide setting (GET /config)."""
        for node in self.nodes:
            if node.patroni_alive:
                status, body = _get_json(f"{node.api_url}/config")
                if status == 200 and isinstance(body, dict):
                    return bool(body.get("synchronous_mode"))
        raise self.explain("no Patroni answered GET /config")

    def _replication(self, leader: Node) -> list[tuple[str, str, str]]:
        """(application_name, state, sync_state) of the leader's walsenders."""
        try:
            with psycopg.connect(leader.dsn, connect_timeout=2, autocommit=True) as conn:
                rows = conn.execute("SELECT application_name, state, sync_state "
                                    "FROM pg_stat_replication").fetchall()
        except psycopg.Error:
            return []
        return [(str(a), str(b), str(c)) for a, b, c in rows]

    def healthy(self, *, synchronous: bool) -> bool:
        """Both nodes up, one the leader taking writes, the other streaming from it: as the
        synchronous standby (PostgreSQL's sync_state is 'sync') or an async one."""
        leader = self.leader()
        if leader is None or not all(node.patroni_alive for node in self.nodes):
            return False
        others = [node for node in self.nodes if node is not leader]
        streaming = {name: sync for name, state, sync in self._replication(leader)
                     if state == "streaming"}
        if any(node.name not in streaming for node in others):
            return False
        if synchronous:
            return (self.sync_standby() in others
                    and all(streaming[node.name] == "sync" for node in others))
        return all(streaming[node.name] == "async" for node in others)

    def wait_healthy(self, *, synchronous: bool, timeout: float = 120) -> Node:
        """Wait for :meth:`healthy`; the leader. ClusterTimeout otherwise, at once when one
        of our processes exits meanwhile (a port taken, a bad setting)."""

        def ready() -> bool:
            exited = [f"{node.name}'s Patroni exited with {node.process.returncode}"
                      for node in self.nodes
                      if node.process is not None and node.process.poll() is not None]
            if self.etcd_process is not None and self.etcd_process.poll() is not None:
                exited.append(f"etcd exited with {self.etcd_process.returncode}")
            if exited:
                raise self.explain("; ".join(exited))
            return self.healthy(synchronous=synchronous)

        if not wait_until(ready, timeout, interval=0.2):
            raise self.explain(f"no leader with a{' synchronous' if synchronous else 'n async'}"
                                f" standby streaming from it within {timeout:g} s")
        leader = self.leader()
        assert leader is not None
        return leader

    # -- what the tests do to it ----------------------------------------------------

    def kill(self, node: Node) -> None:
        """Kill the node outright, as a power cut would: SIGKILL its Patroni first (else it
        restarts its PostgreSQL in place, and no failover happens), then its postmaster and
        every process of that server. Its leader key in etcd then expires after ``ttl``."""
        postmaster = node.postmaster_pid()
        backends = _children(postmaster) if postmaster is not None else []
        if node.process is not None and node.process.poll() is None:
            node.process.kill()
        for pid in ([postmaster] if postmaster is not None else []) + backends:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _reap(node.process)
        gone = wait_until(lambda: node.postmaster_pid() is None
                          and not any(pid_alive(pid) for pid in backends), timeout=10)
        if not gone:
            raise self.explain(f"{node.name}'s PostgreSQL outlived SIGKILL")

    @contextlib.contextmanager
    def replication_paused(self, leader: Node) -> Iterator[None]:
        """Freeze the leader's walsenders (SIGSTOP) for the block: the standby receives
        nothing more, as on a congested link. In asynchronous mode commits go on being
        acknowledged meanwhile; in synchronous mode they wait. A kill of the leader in the
        block ends them; else they go on (SIGCONT) on leaving."""
        with psycopg.connect(leader.dsn, connect_timeout=5, autocommit=True) as conn:
            pids = [int(pid) for (pid,) in conn.execute("SELECT pid FROM pg_stat_replication")]
        if not pids:
            raise self.explain(f"{leader.name} has no walsender to pause")
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def start_node(self, node: Node) -> None:
        """(Re)start the node's Patroni: it brings its PostgreSQL up, and a node that was the
        leader and was killed rejoins as a replica (rewound with pg_rewind when it had WAL
        the new leader never got)."""
        if node.patroni_alive:
            raise RuntimeError(f"{node.name}'s Patroni is already running")
        with node.log_file.open("ab") as log:  # the child keeps its own copy
            node.process = subprocess.Popen(
                [self.patroni, str(node.config_file)],
                cwd=node.directory, env=self.env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, user=self.run_as,
                start_new_session=True,  # a Ctrl-C of pytest does not reach it; stop() does
            )

    def set_synchronous(self, on: bool, *, timeout: float = 60) -> Node:
        """Switch synchronous replication on or off (PATCH /config, as ``patronictl
        edit-config`` does) and wait until the leader replicates that way; the leader."""
        leader = self.leader()
        if leader is None:
            raise self.explain("no leader to change the configuration of")
        request = urllib.request.Request(
            f"{leader.api_url}/config", method="PATCH",
            data=json.dumps({"synchronous_mode": on}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            if response.status != 200:
                raise self.explain(f"PATCH /config answered {response.status}")
        return self.wait_healthy(synchronous=on, timeout=timeout)

    # -- start and stop -------------------------------------------------------------

    def explain(self, what: str) -> ClusterTimeout:
        """A ClusterTimeout saying ``what`` went wrong, then each process's state and log."""
        parts = [what, *(node.describe() for node in self.nodes)]
        if self.etcd_process is not None:
            alive = self.etcd_process.poll() is None
            parts.append(f"etcd pid {self.etcd_process.pid} "
                         f"{'running' if alive else 'exited'} ({self.etcd_hosts})\n"
                         f"--- tail of {self.etcd_log}:\n{log_tail(self.etcd_log, 10)}")
        return ClusterTimeout("\n".join(parts))

    def stop(self) -> None:
        """Stop what we started (Patroni, its PostgreSQL, etcd), by pid; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        for node in self.nodes:
            if node.patroni_alive:
                assert node.process is not None
                node.process.terminate()  # Patroni stops its PostgreSQL (fast) and exits
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    _reap(node.process)
            node.stop_postmaster()  # when Patroni did not
        if self.etcd_process is None:  # someone else's etcd: leave it as we found it
            _delete_prefix(self.etcd_hosts, self.namespace)
        elif self.etcd_process.poll() is None:
            self.etcd_process.terminate()
            try:
                self.etcd_process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.etcd_process.kill()
                _reap(self.etcd_process)
        if os.environ.get("ROWSTATE_KEEP_CLUSTER", "") != "1":
            shutil.rmtree(self.base_dir, ignore_errors=True)


def _delete_prefix(hosts: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (etcd's v3 JSON gateway); best effort."""
    key = prefix.encode()
    body = {"key": base64.b64encode(key).decode(),
            "range_end": base64.b64encode(key[:-1] + bytes([key[-1] + 1])).decode()}
    request = urllib.request.Request(
        f"http://{hosts.split(',')[0]}/v3/kv/deleterange", method="POST",
        data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=5):
        pass


def _etcd_healthy(hosts: str) -> bool:
    first = hosts.split(",")[0]
    status, body = _get_json(f"http://{first}/health", timeout=1)
    return status == 200 and isinstance(body, dict) and body.get("health") == "true"


def _start_etcd(cluster: PatroniCluster) -> None:
    etcd = shutil.which("etcd")
    if etcd is None:
        raise ServiceUnavailable("no `etcd` on PATH (Debian: apt-get install etcd-server)")
    client, peer = free_port(), free_port()
    cluster.etcd_hosts = f"{LOCALHOST}:{client}"
    with cluster.etcd_log.open("ab") as log:  # the child keeps its own copy
        cluster.etcd_process = subprocess.Popen(
            [etcd, "--name", "rowstate-test", "--data-dir", str(cluster.base_dir / "etcd"),
             "--listen-client-urls", f"http://{LOCALHOST}:{client}",
             "--advertise-client-urls", f"http://{LOCALHOST}:{client}",
             "--listen-peer-urls", f"http://{LOCALHOST}:{peer}",
             "--initial-advertise-peer-urls", f"http://{LOCALHOST}:{peer}",
             "--initial-cluster", f"rowstate-test=http://{LOCALHOST}:{peer}",
             "--initial-cluster-state", "new", "--log-outputs", "stderr"],
            cwd=cluster.base_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if not k.startswith("ETCD")},
            start_new_session=True)
    process = cluster.etcd_process
    if not wait_until(lambda: process.poll() is not None or _etcd_healthy(cluster.etcd_hosts),
                      timeout=30, interval=0.1) or process.poll() is not None:
        raise ServiceUnavailable(f"etcd did not become healthy on {cluster.etcd_hosts}:\n"
                                 f"{log_tail(cluster.etcd_log)}")


def start_cluster(*, template: Path = CONFIG_TEMPLATE, timeout: float = 180) -> PatroniCluster:
    """Start etcd (unless ``$ROWSTATE_ETCD_HOSTS``) and two Patroni nodes, and wait for a
    leader with a synchronous standby. ServiceUnavailable when something is missing or the
    cluster does not come up; everything started is stopped again then."""
    patroni = shutil.which("patroni")
    missing = [tool for tool in ("patroni", "etcd") if shutil.which(tool) is None]
    if os.environ.get(ETCD_HOSTS_ENV, "").strip():
        missing = [tool for tool in missing if tool != "etcd"]
    if missing or patroni is None:
        raise ServiceUnavailable(f"not installed: {', '.join(missing)} "
                                 "(Debian: apt-get install patroni etcd-server)")
    bindir = find_pg_bindir()
    if bindir is None:
        raise ServiceUnavailable("no PostgreSQL server binaries (initdb, pg_ctl, postgres)")
    run_as: str | None = None
    owner: tuple[int, int] | None = None
    home = Path(tempfile.gettempdir())
    if os.geteuid() == 0:
        try:
            entry = pwd.getpwnam(PG_OS_USER)
        except KeyError:
            raise ServiceUnavailable(f"running as root and there is no {PG_OS_USER!r} OS user "
                                     "to run Patroni as (initdb refuses root)") from None
        run_as, owner = PG_OS_USER, (entry.pw_uid, entry.pw_gid)

    base = Path(tempfile.mkdtemp(prefix="rowstate-patroni-"))
    template_config = yaml.safe_load(template.read_text())
    cluster = PatroniCluster(
        base_dir=base, patroni=patroni, etcd_hosts=os.environ.get(ETCD_HOSTS_ENV, "").strip(),
        namespace=f"/rowstate-test-{uuid.uuid4().hex[:12]}/", run_as=run_as,
        nodes=[Node(name, pg_port=free_port(), api_port=free_port(), directory=base / name)
               for name in NODE_NAMES],
        env=_patroni_env(home if owner is None else base))
    started = time.monotonic()
    try:
        socket_dir = base / "sock"
        for path in (socket_dir, *(node.directory for node in cluster.nodes)):
            path.mkdir(mode=0o700)
        if owner is not None:
            for path in (base, socket_dir, *(node.directory for node in cluster.nodes)):
                os.chown(path, *owner)
        if not cluster.etcd_hosts:
            _start_etcd(cluster)
        elif not _etcd_healthy(cluster.etcd_hosts):
            raise ServiceUnavailable(f"${ETCD_HOSTS_ENV}={cluster.etcd_hosts} is not a "
                                     "healthy etcd")
        for node in cluster.nodes:
            node.config_file.write_text(yaml.safe_dump(node_config(
                template_config, node, etcd_hosts=cluster.etcd_hosts,
                namespace=cluster.namespace, bindir=bindir, socket_dir=socket_dir)))
            if owner is not None:
                os.chown(node.config_file, *owner)
        for node in cluster.nodes:
            cluster.start_node(node)
        try:
            cluster.wait_healthy(synchronous=True, timeout=timeout)
        except ClusterTimeout as exc:
            raise ServiceUnavailable(f"the Patroni cluster did not come up: {exc}") from None
        cluster.start_seconds = time.monotonic() - started
    except BaseException:
        cluster.stop()
        raise
    atexit.register(cluster.stop)
    return cluster
