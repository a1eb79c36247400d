"""docs/pubsched.md is run, not just read: every ```sh block runs as written, and the
blocks that cannot run here (the systemd unit, the cron line) have their syntax checked.

Issue 17.15: the page's install block failed as written (``init --db sqlite:////...`` and
then a bare ``pubsched tender add`` that found "no database at pubsched.db"; ``pubsched``
was not on PATH without the venv), and its cron line put ``pubsched@host`` where
/etc/cron.d wants a user name. A page's commands rot unseen unless a test runs them.

How a ```sh block runs: with bash ``set -euo pipefail``, in a fresh temporary directory,
in an environment with nothing of this test run in it but what an operator who followed
the page would have: the venv's bin first on PATH (an activated venv, so ``pubsched`` is
this checkout's console script) and the PUBSCHED_* settings, here a temporary SQLite
database and the real SMTP server on loopback. Every block must exit 0, and the state it
leaves is checked with the CLI itself. The tests run as root on some machines, so a block
that names a system path (/opt, /var, /etc, ...) is refused before anything runs: such a
step belongs in a ```console, ```ini or ```cron block, which only has its syntax checked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.doc_blocks import Block, fenced_blocks
from support.smtp_server import SmtpTestServer

PAGE = Path(__file__).resolve().parents[2] / "docs" / "pubsched.md"
VENV_BIN = Path(sys.executable).parent  # the venv pytest runs in: this checkout installed
SYSTEM_PATH = re.compile(r"(?<![\w.~-])/(?:opt|var|etc|usr|srv|root|home|path)/|\bsudo\b")
BLOCKS = fenced_blocks(PAGE)


def blocks(lang: str) -> list[Block]:
    found = [block for block in BLOCKS if block.lang == lang]
    assert found, f"{PAGE.name} has no ```{lang} block"
    return found


# -- the ```sh blocks: run as written -------------------------------------------------------


def operator_env(db: Path, smtp: SmtpTestServer) -> dict[str, str]:
    """What a shell that loaded the page's settings file and activated the venv holds."""
    return {
        "PATH": os.pathsep.join([str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(db.parent),
        "LANG": "C.UTF-8",
        "PUBSCHED_DB": f"sqlite:///{db}",  # absolute: sqlite:////tmp/...
        "PUBSCHED_TZ": "Europe/London",
        "PUBSCHED_MAIL_FROM": "schedule@pub.example",
        "PUBSCHED_OPERATOR_EMAIL": "boss@pub.example",
        "PUBSCHED_BASE_URL": "http://127.0.0.1:8000",
        **smtp.env(),
    }


def run_sh(block: Block, cwd: Path, env: dict[str, str]) -> None:
    script = cwd.parent / f"block_{block.line}.sh"
    script.write_text("set -euo pipefail\n" + block.text, encoding="utf-8")
    done = subprocess.run(["bash", str(script)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (
        f"{block.where(PAGE)} exited {done.returncode} as written:\n{block.text}"
        f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}")


def cli(env: dict[str, str], cwd: Path, *args: str) -> str:
    done = subprocess.run(["pubsched", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, executable=VENV_BIN / "pubsched")
    assert done.returncode == 0, f"pubsched {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_sh_blocks_name_no_system_path() -> None:
    """A ```sh block is what the test runs (as root, maybe): it writes only where it runs."""
    for block in blocks("sh"):
        hit = SYSTEM_PATH.search(block.text)
        assert hit is None, (
            f"{block.where(PAGE)} names {hit.group(0)!r}: a step that needs the machine "
            f"(root, /opt, /etc) goes in a ```console block, not a ```sh one:\n{block.text}")


def test_sh_blocks_run_as_written(tmp_path: Path, smtp: SmtpTestServer) -> None:
    test_sh_blocks_name_no_system_path()  # never run a block that would touch the machine
    work = tmp_path / "work"
    work.mkdir()
    db = tmp_path / "pub.db"
    env = operator_env(db, smtp)
    assert shutil.which("pubsched", path=env["PATH"]) == str(VENV_BIN / "pubsched")

    for block in blocks("sh"):
        run_sh(block, work, env)

    # the state the blocks leave: one database, the one PUBSCHED_DB names, that reads
    assert db.is_file(), "no block created the database PUBSCHED_DB names"
    assert sorted(p.name for p in work.iterdir()) == [], "a block wrote a stray file here"
    assert json.loads(cli(env, work, "weeks", "--json")) == []
    added = {m.group(1) for block in blocks("sh")
             for m in re.finditer(r"pubsched tender add .*?(\S+@\S+)", block.text)}
    listed = {t["email"] for t in json.loads(cli(env, work, "tender", "list", "--json"))}
    assert added and added <= listed
    assert all(mail.accepted for mail in smtp.received)


# -- the blocks that cannot run here: their syntax ------------------------------------------


def venv_dir() -> str:
    """The venv the page installs into (its ```console block), which the unit and the cron
    line must then run the script of."""
    for block in blocks("console"):
        found = re.search(r"python3 -m venv (\S+)", block.text)
        if found:
            return found.group(1)
    raise AssertionError(f"{PAGE.name} never says where the venv goes (python3 -m venv)")


def scripts_named(text: str) -> set[str]:
    return set(re.findall(r"[^\s=]*/bin/pubsched\b", text))


CRON_FIELDS = [("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31),
               ("month", 1, 12), ("day of week", 0, 7)]
CRON_ITEM = re.compile(r"^(?:\*|(\d+)(?:-(\d+))?)(?:/(\d+))?$")
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*=")


def cron_field_ok(text: str, low: int, high: int) -> bool:
    for item in text.split(","):
        match = CRON_ITEM.match(item)
        if match is None:
            return False
        numbers = [int(n) for n in match.groups()[:2] if n is not None]
        if any(not low <= n <= high for n in numbers) or match.group(3) == "0":
            return False
    return True


def test_cron_block_is_an_etc_cron_d_line() -> None:
    """An /etc/cron.d line is ``minute hour dom month dow USER command``: the sixth field is
    a user name; the command runs under /bin/sh with PATH=/usr/bin:/bin (so the script by
    its full path) and an unescaped ``%`` in it would end the command."""
    jobs = 0
    for block in blocks("cron"):
        for line in block.text.splitlines():
            if not line.strip() or line.lstrip().startswith("#") or ASSIGNMENT.match(line):
                continue
            fields = line.split(None, 6)
            assert len(fields) == 7, f"{block.where(PAGE)}: not 7 fields: {line!r}"
            for (name, low, high), text in zip(CRON_FIELDS, fields[:5], strict=True):
                assert cron_field_ok(text, low, high), f"bad {name} {text!r} in {line!r}"
            user, command = fields[5], fields[6]
            assert USER_NAME.match(user), f"cron.d's user field is {user!r}, not a user name"
            assert not re.search(r"(?<!\\)%", command), f"unescaped % in {command!r}"
            assert subprocess.run(["sh", "-n", "-c", command]).returncode == 0, command
            assert not re.search(r"(?:^|[\s;&|])pubsched\s", command), (
                f"{command!r} runs a bare `pubsched`: cron's PATH has no venv")
            assert scripts_named(command) == {f"{venv_dir()}/bin/pubsched"}, command
            jobs += 1
        assert "/etc/cron.d/" in block.text, f"{block.where(PAGE)}: say it is an /etc/cron.d file"
    assert jobs == 2  # the tick without serve, the nightly backup


def test_ini_blocks_have_no_inline_comments() -> None:
    """systemd reads ``Key=value  # note`` as a value that ends in ``# note`` (only whole
    lines are comments), and so does the settings file it loads. (The units themselves are
    deploy/'s files, checked by test_deploy.py.)"""
    for block in blocks("ini"):
        for line in block.text.splitlines():
            if line.lstrip().startswith(("#", ";")) or "=" not in line:
                continue
            assert not re.search(r"\s[#;]", line.split("=", 1)[1]), (
                f"{block.where(PAGE)}: an inline comment systemd keeps as value: {line!r}")
