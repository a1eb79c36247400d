"""``pubsched serve``: the web app under uvicorn, and the every-minute tick in the same
process (APScheduler 3.x: version 4 is still a pre-release).

The tick is scheduled with an interval trigger, ``coalesce=True`` (after a stall, the
missed runs become one run, not a burst), ``max_instances=1`` (a slow tick is never
overlapped by the next one in this process) and a misfire grace time of 50 s (APScheduler's
default of 1 s silently skips a run that starts a little late, as on a busy machine). Several
instances each run their own scheduler; that is safe because the tick is (every due row
moves once through the engine's door, each nudge is claimed before it is sent): the
scheduler only decides when this process asks.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from urllib.parse import urlsplit

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from ..config import Config
from ..pub import Pub
from .app import create_app
from .log_format import configure as configure_logging
from .log_format import log_format
from .logs import AccessLinks
from .settings import WebSettings

log = logging.getLogger("pubsched.serve")

TICK_SECONDS = 60
MISFIRE_GRACE_SECONDS = 50  # under the interval: a run this late still beats skipping it
DEV_SECRET = "pubsched-dev-secret"


MIN_SECRET_BYTES = 32
MAKE_SECRET = ('`pubsched secret new` (or python -c "import secrets; '
               'print(secrets.token_urlsafe(32))")')


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, config: Config, web: WebSettings) -> None:
    """Refuse to be reachable beyond this machine with a secret anyone may know (the
    development default, or one too short to resist guessing): whoever knows it signs any
    tender's link and an operator session. Reachable means listening beyond loopback, or
    handing out links (``PUBSCHED_BASE_URL``) that are not on loopback: behind a proxy,
    ``serve`` listens on 127.0.0.1 but the world reaches it. Cookies allowed over plain
    http are refused beyond loopback too."""
    base_host = urlsplit(config.base_url).hostname or ""
    where = (f"on {host}" if not _loopback(host)
             else None if _loopback(base_host) else config.base_url)
    if where is not None:
        for name, key in (("PUBSCHED_SECRET", config.secret),
                          *(("PUBSCHED_SECRET_PREVIOUS", k) for k in config.previous_secrets)):
            size = len(key.encode())
            what = ("the development secret" if key == DEV_SECRET
                    else f"a {name} key of {size} bytes" if size < MIN_SECRET_BYTES else "")
            if what:  # an old key still verifies: a weak one forges as well as a new one
                fix = ("set PUBSCHED_SECRET to" if name == "PUBSCHED_SECRET"
                       else "take it off PUBSCHED_SECRET_PREVIOUS: every key there must be")
                raise SystemExit(
                    f"refusing to serve {where} with {what} in {name}: {fix} a random value "
                    f"of {MIN_SECRET_BYTES} bytes or more (make one with {MAKE_SECRET})")
    if not _loopback(host) and web.insecure_cookies:
        raise SystemExit(f"refusing to serve on {host} with PUBSCHED_INSECURE_COOKIES=1: "
                         "cookies would travel in clear text")


def proxy_warning(host: str, config: Config, web: WebSettings) -> str | None:
    """What to tell an operator who serves on loopback for a public address (so behind a
    proxy) without naming the proxy: every visitor would have the proxy's address, and a
    stranger's wrong guesses would slow the operator's login down too."""
    base_host = urlsplit(config.base_url).hostname or ""
    if _loopback(host) and not _loopback(base_host) and not web.trusted_proxies:
        return (f"PUBSCHED_BASE_URL is {config.base_url} but PUBSCHED_TRUSTED_PROXIES is "
                "not set: behind a proxy every visitor has the proxy's address (set it to "
                "the proxy's, e.g. 127.0.0.1,::1)")
    return None


def tick_job(pub: Pub, clock: Callable[[], datetime] | None = None) -> None:
    """One tick at the real time, recorded (:mod:`pubsched.tick.status`); an error is
    logged and the next minute tries again."""
    from ..tick.status import run_tick

    now = (clock or (lambda: datetime.now(UTC)))()
    try:
        for verdict in run_tick(pub, now):
            log.info("tick: %s", verdict.message)
    except Exception:
        log.exception("tick failed at %s", now.isoformat())


def scheduler_for(pub: Pub, *, seconds: int = TICK_SECONDS) -> BackgroundScheduler:
    """The ticker, not started."""
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.add_job(tick_job, IntervalTrigger(seconds=seconds, timezone=UTC), args=[pub],
                      id="pubsched-tick", name="pubsched tick", coalesce=True,
                      max_instances=1, misfire_grace_time=MISFIRE_GRACE_SECONDS,
                      next_run_time=datetime.now(UTC))
    return scheduler


def open_pub(config: Config) -> Pub:
    """The pub on the configured database. A database with migrations pending is refused
    at start (``pubsched init`` applies them), rather than failing at the first request; an
    in-memory one is migrated here, as it lives only inside this process's connection."""
    from ..db import open_store
    from ..db.migrate import status

    memory = config.db_url in ("sqlite://", "sqlite:", "sqlite:///:memory:")
    if not memory:
        pending = [version for version, applied in status(config.db_url) if not applied]
        if pending:
            raise SystemExit(f"the database is not ready (migrations {', '.join(pending)} "
                             "pending): run `pubsched init` first")
    return Pub(open_store(config.db_url, migrate=memory, read_url=config.db_reads_url), config)


def main(host: str, port: int, config: Config,
         environ: Mapping[str, str] | None = None, *, tick: bool = True,
         metrics_port: int | None = None) -> None:
    """Serve the admin and the tender pages on ``host:port`` with the tick, until stopped
    (Ctrl-C or SIGTERM: uvicorn stops taking requests, the app's lifespan ends, which stops
    the ticker (waiting for a tick in progress) and closes the database). ``tick=False``
    (``--no-tick``): no ticker here, because something else runs ``pubsched tick`` every
    minute (deploy/pubsched-tick.timer, cron). ``metrics_port``: ``/metrics`` also on a
    listener of its own on 127.0.0.1 (:mod:`pubsched.web.metrics`)."""
    import uvicorn

    env = os.environ if environ is None else environ
    fmt = log_format(env)
    configure_logging(fmt)  # the tick's and the app's lines beside uvicorn's

    def say(line: str) -> None:  # serve's own lines: a record too when the log is JSON
        if fmt == "json":
            log.info("%s", line)
        else:
            print(f"pubsched: {line}", flush=True)

    web = WebSettings.from_env(env)
    check_exposure(host, config, web)
    if (warning := proxy_warning(host, config, web)) is not None:
        log.warning("%s", warning)
    pub = open_pub(config)
    if not web.password.configured:
        from ..people.operators import all_operators

        if not all_operators(pub):
            log.warning("no operator account and no PUBSCHED_ADMIN_PASSWORD: the admin is "
                        "closed (add one with `pubsched operator add EMAIL`)")

    @contextlib.contextmanager
    def ticking() -> Iterator[None]:
        scheduler = scheduler_for(pub) if tick else None
        if scheduler is not None:
            scheduler.start()
        try:
            yield
        finally:
            if scheduler is not None:
                scheduler.shutdown(wait=True)
            pub.close()
            say("stopped (ticker and database closed)" if tick
                else "stopped (database closed)")

    app = create_app(pub, web, around=ticking)
    said = (f"tick every {TICK_SECONDS} s" if tick
            else "no tick here: `pubsched tick` must run every minute elsewhere")
    scraped = None
    if metrics_port is not None:
        try:
            scraped = app.state.metrics.serve_on(metrics_port)
        except OSError as exc:
            pub.close()
            raise SystemExit(f"--metrics-port {metrics_port}: {exc.strerror or exc}") from None
        said += f"; metrics on http://127.0.0.1:{scraped.server_port}/metrics"
    say(f"serving http://{host}:{port}/admin/ ({said})")
    # JSON: no uvicorn log config of its own, so its lines reach the root's JSON handler
    from uvicorn.config import LOGGING_CONFIG

    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, log_level="info", proxy_headers=False,  # ours: .proxy
        log_config=None if fmt == "json" else LOGGING_CONFIG))
    # after uvicorn's Config has set up its loggers: the access line never shows a link
    logging.getLogger("uvicorn.access").addFilter(AccessLinks(config))
    try:
        server.run()
    finally:
        if scraped is not None:
            scraped.shutdown()
    if not server.started:  # as uvicorn.run: the port was taken, or the app did not start
        raise SystemExit(3)
