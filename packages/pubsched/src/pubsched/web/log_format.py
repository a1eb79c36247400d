"""How ``pubsched serve`` logs: ``PUBSCHED_LOG_FORMAT=text`` (the default: one readable line
per record) or ``json`` (one JSON object per line, for a log collector: ``time``,
``level``, ``logger``, ``message``, and ``exc_info`` when there is a traceback). In JSON
every line is a record, uvicorn's access lines included (their links masked as always by
:class:`pubsched.web.logs.AccessLinks`), and serve's own start and stop lines too, so a
collector never meets a line it cannot parse. python-json-logger does the formatting.

In JSON, ``time`` is ISO 8601 in UTC with its offset (``2026-12-03T11:36:23.120+00:00``):
a collector on another machine, or a reader in another zone, never has to guess the
zone, and the lines sort as text. uvicorn hands each record a ``color_message`` (the
same message with terminal colour codes, for its own formatter): it is left out, as are
the attributes every record has."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Literal

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

LogFormat = Literal["text", "json"]
TEXT_LINE = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: what uvicorn adds to a record for its coloured console, never written here
NOT_LOGGED = ("color_message",)


class JsonLines(JsonFormatter):
    """One JSON object per record, its time with its zone (module docstring)."""

    def formatTime(self, record: logging.LogRecord,
                   datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


def log_format(environ: Mapping[str, str]) -> LogFormat:
    """``PUBSCHED_LOG_FORMAT``, checked at start-up (a typo is an error naming it)."""
    raw = (environ.get("PUBSCHED_LOG_FORMAT") or "text").strip().lower()
    if raw == "json":
        return "json"
    if raw == "text":
        return "text"
    raise SystemExit(f"PUBSCHED_LOG_FORMAT is text or json, not {raw!r}")


def configure(fmt: LogFormat) -> None:
    """The root logger's one handler (left alone if the embedding program made one)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonLines(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            reserved_attrs=[*RESERVED_ATTRS, *NOT_LOGGED]))
    else:
        handler.setFormatter(logging.Formatter(TEXT_LINE))
    root.addHandler(handler)
    root.setLevel(logging.INFO)


__all__ = ["JsonLines", "LogFormat", "configure", "log_format"]
