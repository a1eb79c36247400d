"""Secrets (issue 20): ``pubsched secret new`` prints a strong key, and rotating
``PUBSCHED_SECRET`` with the old key in ``PUBSCHED_SECRET_PREVIOUS`` keeps every link
already mailed and every session already open working, while everything new is signed
with the new key; a key taken off the list opens nothing. Checked through the real app
(in-process): a tender's form and calendar links, the operator's
session, and the refusal to serve beyond loopback with a weak old key."""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from pubsched.cli.dispatch import run as cli_run
from pubsched.config import Config
from pubsched.people import links
from pubsched.pub import Pub
from pubsched.web import serve
from pubsched.web.app import create_app
from pubsched.web.settings import WebSettings
from support.pub_web import login, people, web_settings
from support.pubs import NOW

pytestmark = pytest.mark.pub_setup("web")
PUBSCHED = Path(sys.executable).parent / "pubsched"
NEW = "n3w-key-Kq0vVd3oZl8sYw2nQx7RtA1bCe9fHg4uMi6p"
OLDER = "older-key-9fHg4uMi6pLz0aEk5Jq0vVd3oZl8sYw2nQ"


def test_secret_new_prints_a_strong_key_and_only_the_key() -> None:
    """Once as the installed script, once in-process: a new key each time."""
    done = subprocess.run([str(PUBSCHED), "secret", "new"], capture_output=True,
                          text=True, timeout=60)
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(["secret", "new"], stdout=out, stderr=err)
    keys = []
    for ran in ((done.returncode, done.stdout, done.stderr),
                (code, out.getvalue(), err.getvalue())):
        assert ran[0] == 0, ran
        (key,) = ran[1].split()
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", key)  # 32 random bytes, URL-safe
        assert "PUBSCHED_SECRET_PREVIOUS" in ran[2]
        keys.append(key)
    assert keys[0] != keys[1]
    serve.check_exposure("0.0.0.0", Config(secret=keys[0]), WebSettings.from_env({}))


def rotated(pub: Pub, *previous: str) -> Pub:
    """The same database served after PUBSCHED_SECRET became NEW, ``previous`` kept."""
    pub.config = dataclasses.replace(pub.config, secret=NEW, previous_secrets=previous)
    return pub


def test_from_env_reads_several_previous_keys() -> None:
    config = Config.from_env({"PUBSCHED_SECRET": NEW,
                              "PUBSCHED_SECRET_PREVIOUS": f" {OLDER}  second-older\n"})
    assert config.previous_secrets == (OLDER, "second-older")
    assert config.signing_keys == [OLDER, "second-older", NEW]  # the last one signs
    assert Config.from_env({}).previous_secrets == ()


def test_old_links_keep_working_after_a_rotation_and_stop_when_the_key_goes(pub: Pub) -> None:
    alice = people(pub)["Alice"]
    old = pub.config.secret
    form, calendar = alice.form(pub), alice.calendar(pub)  # mailed before the rotation

    with TestClient(create_app(rotated(pub, old), web_settings(), clock=lambda: NOW)) as c:
        assert c.get(form).status_code == 200 and "Alice" in c.get(form).text
        assert c.get(calendar).status_code == 200
        fresh = alice.form(pub)  # a link made now carries the new key
        assert fresh != form and c.get(fresh).status_code == 200
    assert links.verify(Config(secret=old), fresh.rsplit("/", 1)[1]) is None

    with TestClient(create_app(rotated(pub), web_settings(), clock=lambda: NOW)) as c:
        assert c.get(form).status_code == 404  # the old key is off the list: nothing opens
        assert c.get(calendar).status_code == 404
        assert c.get(fresh).status_code == 200


def test_an_open_session_survives_the_rotation_and_ends_with_the_old_key(pub: Pub) -> None:
    old = pub.config.secret
    with TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                    base_url="https://testserver") as before:
        assert login(before).status_code == 303
        cookies = dict(before.cookies)
    for keep, status in (((old,), 200), ((), 303)):
        app = create_app(rotated(pub, *keep), web_settings(), clock=lambda: NOW)
        with TestClient(app, base_url="https://testserver", cookies=cookies) as after:
            assert after.get("/admin/", follow_redirects=False).status_code == status


def test_a_weak_previous_key_is_refused_beyond_loopback() -> None:
    web = WebSettings.from_env({})
    strong = Config(secret=NEW, previous_secrets=(OLDER,))
    serve.check_exposure("0.0.0.0", strong, web)
    for weak in ("pubsched-dev-secret", "short-old-key"):
        with pytest.raises(SystemExit, match="PUBSCHED_SECRET_PREVIOUS"):
            serve.check_exposure("0.0.0.0", Config(secret=NEW, previous_secrets=(weak,)), web)
    serve.check_exposure("127.0.0.1", Config(previous_secrets=("short",)), web)  # loopback
