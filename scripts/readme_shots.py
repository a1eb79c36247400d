"""The README's pictures (docs/week-page.png, docs/tender-form-phone.png): a pub with its
own week (a Sunday lunch that needs the keys), five tenders, a sent week, a roster to
approve with a pin, and an open form, served on loopback and photographed in Chromium.

Run from the checkout: ``.venv/bin/python scripts/readme_shots.py``; the pictures land in
/tmp/readme-shots/ to be looked at before they are copied into docs/. Needs Chromium and
the dev extras (it borrows the tests' support: the SMTP server, the browser, the login).
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from pubsched import cli
from pubsched.db import open_store
from pubsched.people import links, tenders
from pubsched.pub import Config, Pub
from pubsched.web.app import create_app
from support.browser import desktop, launched, phone, served
from support.pub_web import PASSWORD, web_settings
from support.smtp_server import SmtpTestServer

OUT = "/tmp/readme-shots"
NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)  # the pages' clock: W1's shifts to come
W1, W2, W3 = "2026-12-07", "2026-12-14", "2026-12-21"
TEAM = (("Ana Alvarez", "ana@crown.example", "keys"), ("Ben Brook", "ben@crown.example", None),
        ("Cleo Chen", "cleo@crown.example", None), ("Dev Dara", "dev@crown.example", "keys"),
        ("Eve Ellis", "eve@crown.example", None))
ANSWERS = {"ana": (0, 1, 3), "ben": (1, 2), "cleo": (0, 2, 3), "dev": (2, 3), "eve": (0, 1)}


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    url = f"sqlite:///{tempfile.mkdtemp()}/readme.db"
    with SmtpTestServer() as smtp:
        env = {**smtp.env(PUBSCHED_MAIL_FROM="rota@crown.example",
                          PUBSCHED_OPERATOR_EMAIL="ops@crown.example"),
               "PUBSCHED_PUB_NAME": "The Crown", "PUBSCHED_TZ": "America/New_York",
               "PUBSCHED_PUB_ADDRESS": "1 Market Street, Springfield", "USER": "sam",
               "PUBSCHED_SECRET": "readme-shots-secret-0123456789abcdef"}

        def run(*argv: str) -> str:
            out, err = io.StringIO(), io.StringIO()
            code = cli.run(["--db", url, *argv], environ=env, stdout=out, stderr=err)
            assert code == 0, (argv, code, err.getvalue())
            return out.getvalue()

        run("init")
        run("shift", "add", "Sunday lunch", "--day", "sun", "--start", "12:00", "--end",
            "17:00", "--needs", "keys")
        for name, email, skill in TEAM:
            run("tender", "add", name, email, *(("--skill", skill) if skill else ()))
        for week, at in ((W1, "2026-11-30T15:00:00Z"), (W2, "2026-11-30T16:00:00Z")):
            run("week", "open", week, "--now", at)
            ids = [str(s["id"]) for s in json.loads(run("week", "show", week, "--json"))["shifts"]]
            for who, picks in ANSWERS.items():
                run("avail", week, f"{who}@crown.example", *(ids[i] for i in picks), "--now", at)
            for step in ("close", "generate", *(("approve", "send") if week == W1 else ())):
                run("week", step, week, "--now", at)
        sunday = json.loads(run("week", "show", W2, "--json"))["shifts"][3]
        other = next(e for e in sunday["assigned"] if e != "ana@crown.example")
        run("week", "unassign", W2, str(sunday["id"]), other)
        run("week", "assign", W2, str(sunday["id"]), "eve@crown.example")
        run("week", "open", W3, "--now", "2026-12-01T15:00:00Z")
        photograph(url, env)


def photograph(url: str, env: dict[str, str]) -> None:
    config = Config.from_env({**env, "PUBSCHED_DB": url})
    pub = Pub(open_store(url), config)
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    with launched() as browser, served(app) as base:
        page = desktop(browser)
        page.goto(base + "/admin/login")
        page.fill("#password", PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(base + "/admin/")
        page.set_viewport_size({"width": 1100, "height": 900})
        page.goto(base + f"/admin/weeks/{W2}")
        page.screenshot(path=f"{OUT}/readme-week.png")
        page.goto(base + "/admin/template")
        page.screenshot(path=f"{OUT}/readme-template.png")
        ana = tenders.get(pub, "ana@crown.example")
        tender = phone(browser)
        tender.goto(base + "/t/" + links.tender_token(config, ana.id, ana.link_version))
        tender.screenshot(path=f"{OUT}/readme-tender.png", full_page=True)
    pub.close()
    print(f"pictures in {OUT}: readme-week.png, readme-template.png, readme-tender.png")


if __name__ == "__main__":
    main()
