"""The deployment files (issue 20), checked as far as this machine allows.

``deploy/*.service`` and ``deploy/pubsched-tick.timer`` go through ``systemd-analyze
verify`` (no warning allowed: systemd only warns about an unknown or misspelt key and
starts the unit anyway) and the services through ``systemd-analyze security --offline``
(the exposure score must stay "OK"). verify insists that every program a unit starts
exists, so the paths a deployed machine has (the venv in /opt/pubsched, /etc/pubsched/env,
/var/lib/pubsched) are rewritten to ones that exist here, and nothing else is. The units
must run the script of the venv docs/pubsched.md installs, as the ``pubsched`` user.

No Docker daemon can run here, so the Dockerfile and compose.yaml are read, not built:
a slim base, a user that is not root, the same two commands the wheel test runs
(test_wheel.py runs the very CMD and HEALTHCHECK against the wheel), PostgreSQL with a
health check, the app published on loopback only. docs/pubsched.md's ```console blocks
(the root steps no test may run) are at least valid shell."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import yaml
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict

from pubsched.config import Config
from pubsched.db.urls import database_url
from pubsched.web.settings import WebSettings
from support.doc_blocks import fenced_blocks
from support.pg_server import password_cluster
from support.services import ServiceUnavailable, services_required

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNITS = ("pubsched.service", "pubsched-tick.service", "pubsched-tick.timer")
PAGE = ROOT / "docs" / "pubsched.md"
VENV_BIN = Path(sys.executable).parent
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(SYSTEMD_ANALYZE is None,
                                   reason="systemd-analyze is not installed here")


def documented_venv() -> str:
    for block in fenced_blocks(PAGE):
        found = re.search(r"python3 -m venv (\S+)", block.text)
        if block.lang == "console" and found:
            return found.group(1)
    raise AssertionError("docs/pubsched.md never says where the venv goes")


def unit(name: str) -> str:
    return (DEPLOY / name).read_text(encoding="utf-8")


def settings(text: str) -> dict[str, list[str]]:
    """``Key=value`` lines of a unit (keys may repeat), comments left out."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith(("#", ";", "[")) and "=" in line:
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def on_this_machine(text: str, where: Path) -> str:
    """The unit with a deployed machine's paths moved to ones that exist here."""
    venv = documented_venv()
    return (text.replace(f"{venv}/bin/pubsched", str(VENV_BIN / "pubsched"))
                .replace("/etc/pubsched/env", str(where / "env"))
                .replace("/var/lib/pubsched", str(where / "state")))


@pytest.fixture
def rewritten(tmp_path: Path) -> Path:
    (tmp_path / "env").write_text("PUBSCHED_DB=sqlite:///pub.db\n", encoding="utf-8")
    (tmp_path / "state").mkdir()
    for name in UNITS:
        (tmp_path / name).write_text(on_this_machine(unit(name), tmp_path), encoding="utf-8")
    return tmp_path


@needs_systemd
def test_systemd_analyze_verify_accepts_every_unit_without_a_warning(rewritten: Path) -> None:
    assert SYSTEMD_ANALYZE is not None
    done = subprocess.run([SYSTEMD_ANALYZE, "verify", *(str(rewritten / n) for n in UNITS)],
                          capture_output=True, text=True, timeout=60)
    ours = [line for line in (done.stdout + done.stderr).splitlines()
            if str(rewritten) in line or "pubsched" in line]
    assert done.returncode == 0 and ours == [], done.stdout + done.stderr


@needs_systemd
@pytest.mark.parametrize("name", ["pubsched.service", "pubsched-tick.service"])
def test_the_services_are_hardened(rewritten: Path, name: str) -> None:
    assert SYSTEMD_ANALYZE is not None
    done = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=true", "--no-pager",
                           str(rewritten / name)], capture_output=True, text=True, timeout=60)
    found = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", done.stdout)
    assert found, done.stdout[-2000:] + done.stderr
    assert float(found.group(1)) <= 2.0 and found.group(2) == "OK", found.group(0)


def test_the_units_run_the_documented_venv_as_the_pubsched_user() -> None:
    venv = documented_venv()
    serve, tick = settings(unit("pubsched.service")), settings(unit("pubsched-tick.service"))
    for service in (serve, tick):
        assert service["User"] == ["pubsched"] and service["Group"] == ["pubsched"]
        assert service["WorkingDirectory"] == ["/var/lib/pubsched"]
        assert service["EnvironmentFile"] == ["/etc/pubsched/env"]
        assert service["ProtectSystem"] == ["strict"]
        assert service["ReadWritePaths"] == ["/var/lib/pubsched"]
        assert service["NoNewPrivileges"] == ["yes"]
        for value in (v for vs in service.values() for v in vs):
            assert not re.search(r"\s[#;]", value), f"an inline comment systemd keeps: {value}"
    assert serve["ExecStartPre"] == [f"{venv}/bin/pubsched init"]
    assert serve["ExecStart"] == [f"{venv}/bin/pubsched serve --host 127.0.0.1 --port 8000"]
    assert tick["ExecStart"] == [f"{venv}/bin/pubsched tick"]
    assert tick["Type"] == ["oneshot"]
    timer = settings(unit("pubsched-tick.timer"))
    assert timer["OnCalendar"] == ["*-*-* *:*:00"]  # every minute, on the minute


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
            for line in text.splitlines() if line.strip() and not line.startswith("#")]


def container_command() -> list[str]:
    """The container's CMD (exec form), as test_wheel.py runs it."""
    (cmd,) = [arg for op, arg in dockerfile() if op == "CMD"]
    parsed: list[str] = json.loads(cmd)
    return parsed


def test_the_image_is_slim_and_runs_as_a_user_that_is_not_root() -> None:
    steps = dockerfile()
    bases = [arg.split()[0] for op, arg in steps if op == "FROM"]
    assert bases and all(re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", b) for b in bases), bases
    ops = [op for op, _ in steps]
    users = [arg for op, arg in steps if op == "USER"]
    assert users and users[-1] not in ("root", "0") and ops.index("USER") < ops.index("CMD")
    installs = [arg for op, arg in steps if op == "RUN" and "pip install" in arg]
    assert installs and all(".whl" in arg for arg in installs)  # the wheel, not the source
    assert container_command() == [
        "sh", "-c", "pubsched init && exec pubsched serve --host 0.0.0.0 --port 8000"]
    assert any(op == "HEALTHCHECK" and "/healthz" in arg for op, arg in steps)


def test_compose_runs_it_beside_postgresql_on_loopback_only() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    db, app = services["db"], services["pubsched"]
    assert str(db["image"]).startswith("postgres:")
    assert "pg_isready" in db["healthcheck"]["test"]
    assert any(str(v).endswith(":/var/lib/postgresql/data") for v in db["volumes"])
    assert app["build"] == "."
    assert app["depends_on"]["db"]["condition"] == "service_healthy"
    assert app["environment"]["PUBSCHED_DB"] == "postgresql://pubsched@db:5432/pubsched"
    assert all(str(port).startswith("127.0.0.1:") for port in app["ports"])
    assert "pgdata" in compose["volumes"]


#: the Debian release each slim base is built on, and its PostgreSQL client's major version
DEBIAN_CLIENT = {"trixie": 17, "bookworm": 15}


def test_the_image_has_a_pg_dump_for_composes_postgresql() -> None:
    """``pubsched backup`` runs pg_dump, which refuses a server newer than itself: the image
    installs Debian's client of a major version at least compose's PostgreSQL's (and 15),
    from the release its base is built on, and makes the backups' folder."""
    steps = dockerfile()
    base = [arg.split()[0] for op, arg in steps if op == "FROM"][-1]
    release = base.rsplit("-", 1)[-1]
    assert release in DEBIAN_CLIENT, f"name the Debian release in the tag: {base}"
    runs = " ".join(arg for op, arg in steps if op == "RUN")
    (major,) = {int(n) for n in re.findall(r"postgresql-client-(\d+)", runs)}
    assert major == DEBIAN_CLIENT[release]
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    image = re.fullmatch(r"postgres:(\d+).*", compose["services"]["db"]["image"])
    assert image, compose["services"]["db"]["image"]
    server = int(image[1])
    assert major >= max(server, 15), (major, server)
    assert "install -d -m 0700 -o pubsched -g pubsched /var/lib/pubsched/backups" in runs


def test_compose_keeps_the_apps_folder_in_a_volume_and_documents_a_backup() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    app = compose["services"]["pubsched"]
    (volume,) = [v for v in app["volumes"] if str(v).endswith(":/var/lib/pubsched")]
    assert volume.split(":")[0] in compose["volumes"]  # a named volume, not the host's
    steps = [line for b in fenced_blocks(PAGE) if b.lang == "console"
             for line in b.text.splitlines()]
    assert any(re.fullmatch(r"\$ docker compose exec pubsched pubsched backup "
                            r"/var/lib/pubsched/backups/.+", line) for line in steps)
    assert any(line.startswith("$ docker compose cp pubsched:/var/lib/pubsched/backups/")
               for line in steps)


def substituted(value: str, environ: dict[str, str]) -> str:
    """compose's interpolation of ``${VAR}``, ``${VAR:?message}`` and ``${VAR:-default}``
    (the value is put in as it is: compose never re-reads it)."""
    def one(found: re.Match[str]) -> str:
        name, how, rest = found.group(1), found.group(2) or "", found.group(3) or ""
        if environ.get(name):
            return environ[name]
        if how == ":?":
            raise AssertionError(rest)
        return rest if how == ":-" else ""
    return re.sub(r"\$\{(\w+)(:[?-])?([^}]*)\}", one, value)


def test_a_database_password_with_at_colon_slash_reaches_postgresql_whole() -> None:
    """compose puts the password in as it is; in a URL its ``@``, ``:`` and ``/`` would be
    read as the URL's own (the old ``postgresql://pubsched:${PUBSCHED_DB_PASSWORD}@db...``
    then named another host). As ``PGPASSWORD`` it is only a password, which libpq reads
    (and pubsched backup's pg_dump with it)."""
    password = "p@ss:w/rd#1?%"
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    env = {name: substituted(str(value), {"PUBSCHED_DB_PASSWORD": password})
           for name, value in compose["services"]["pubsched"]["environment"].items()}
    url = database_url({"PUBSCHED_DB": env["PUBSCHED_DB"]})
    params = conninfo_to_dict(url)
    assert (params["host"], params["port"], params["user"], params["dbname"]) == (
        "db", "5432", "pubsched", "pubsched")
    assert "password" not in params
    assert env["PGPASSWORD"] == password
    db_env = compose["services"]["db"]["environment"]
    assert substituted(db_env["POSTGRES_PASSWORD"], {"PUBSCHED_DB_PASSWORD": password}) \
        == password


@pytest.mark.postgres
def test_composes_settings_log_in_with_that_password_and_back_up(tmp_path: Path) -> None:
    """The same, for real: compose's two settings (the host ``db:5432`` moved to a
    throwaway cluster that asks for passwords) let ``pubsched init`` in and ``pubsched
    backup``'s pg_dump too; the URL with the password in it, as compose had it, does not."""
    password = "p@ss:w/rd#1?%"
    try:
        with password_cluster() as admin:
            where = conninfo_to_dict(admin)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(pg_sql.SQL("CREATE ROLE pubsched LOGIN PASSWORD {}").format(
                    pg_sql.Literal(password)))
                conn.execute("CREATE DATABASE pubsched OWNER pubsched")
            compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
            env = {name: substituted(str(value), {"PUBSCHED_DB_PASSWORD": password})
                   .replace("@db:5432/", f"@{where['host']}:{where['port']}/")
                   for name, value in compose["services"]["pubsched"]["environment"].items()}
            base = {k: v for k, v in os.environ.items()
                    if not k.startswith(("PUBSCHED_", "PG"))}
            pubsched = str(VENV_BIN / "pubsched")
            done = subprocess.run([pubsched, "init"], env={**base, **env}, capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            done = subprocess.run([pubsched, "backup", str(tmp_path / "pub.dump")],
                                  env={**base, **env}, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0 and (tmp_path / "pub.dump").stat().st_size > 0, \
                done.stdout + done.stderr
            as_before = env["PUBSCHED_DB"].replace("pubsched@", f"pubsched:{password}@")
            done = subprocess.run([pubsched, "--db", as_before, "init"], env=base,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode != 0  # the finding: the password broke the URL
    except ServiceUnavailable as exc:
        if services_required():
            pytest.fail(f"no throwaway PostgreSQL cluster: {exc}")
        pytest.skip(f"no throwaway PostgreSQL cluster: {exc}")


def test_the_units_documentation_exists_once_installed_as_documented() -> None:
    """Every ``Documentation=`` page: a file the documented install step puts there, or
    the page in this repository on the project's public address."""
    installs = [line for b in fenced_blocks(PAGE) if b.lang == "console"
                for line in b.text.splitlines() if line.startswith("# install ")]
    project = re.search(r'Changelog = "(https://github.com/[^/]+/[^/]+/blob/main/)',
                        (ROOT / "packages/pubsched/pyproject.toml").read_text("utf-8"))
    assert project
    for name in ("pubsched.service", "pubsched-tick.service"):
        (pages,) = settings(unit(name))["Documentation"]
        for page in pages.split():
            if page.startswith("file://"):
                where = Path(page.removeprefix("file://"))
                assert any(f"-t {where.parent} " in line and f"docs/{where.name}" in line
                           for line in installs), f"{name}: nothing installs {where}"
            else:
                assert page.startswith(project.group(1)), page
                assert (ROOT / page.removeprefix(project.group(1))).is_file(), page


def test_the_venv_is_made_from_the_systems_python() -> None:
    """A venv's python links to the one that made it: one under /root or /home (pyenv,
    conda, uv) cannot be run by the service user behind ProtectHome=yes."""
    made = [line for b in fenced_blocks(PAGE) if b.lang == "console"
            for line in b.text.splitlines() if " -m venv " in line]
    assert made == [f"# /usr/bin/python3 -m venv {documented_venv()}"]


def documented_settings() -> dict[str, str]:
    """docs/pubsched.md's /etc/pubsched/env, read as systemd's EnvironmentFile= reads it
    (``NAME=value``, a double-quoted value taken without its quotes)."""
    (block,) = [b.text for b in fenced_blocks(PAGE)
                if b.lang == "ini" and "/etc/pubsched/env" in b.text]
    found: dict[str, str] = {}
    for line in block.splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split("=", 1)
            quoted = value.startswith('"') and value.endswith('"')
            found[name] = value[1:-1] if quoted else value
    return found


def test_the_documented_settings_file_names_the_pub_and_its_zone_and_starts() -> None:
    env = documented_settings()
    assert {"PUBSCHED_PUB_NAME", "PUBSCHED_TZ", "PUBSCHED_DB", "PUBSCHED_SECRET",
            "PUBSCHED_BASE_URL", "PUBSCHED_ADMIN_PASSWORD"} <= set(env)
    config = Config.from_env(env)  # what serve reads at start-up, accepted as written
    assert config.mail.pub_name == env["PUBSCHED_PUB_NAME"]
    assert str(config.tz) == env["PUBSCHED_TZ"]
    assert WebSettings.from_env(env).password.configured


def test_the_documented_root_steps_are_valid_shell() -> None:
    """The ```console blocks are the steps no test may run (root, /opt, /etc): each command
    (a ``# `` or ``$ `` prompt line) must at least parse."""
    commands = 0
    for block in fenced_blocks(PAGE):
        if block.lang != "console":
            continue
        for line in block.text.splitlines():
            if line.startswith(("# ", "$ ")):
                command = line[2:]
                done = subprocess.run(["bash", "-n", "-c", command], capture_output=True,
                                      text=True)
                assert done.returncode == 0, f"{block.where(PAGE)}: {command}: {done.stderr}"
                commands += 1
    assert commands >= 8
