"""Reading what a browser posted: a text field, a week's Monday, a ``datetime-local``
field in the pub's wall clock. Bad input is :class:`pubsched.verdicts.BadInput`, which each page
turns into its own answer."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from starlette.datastructures import FormData

from ..verdicts import BadInput


def text(form: FormData, name: str) -> str | None:
    """A text field, or None when it is missing or a file."""
    value = form.get(name)
    return value if isinstance(value, str) else None


def week_of(raw: str) -> str:
    """The Monday a field or a path names, as the week's key."""
    from ..week.runs import week_key

    return week_key(raw.strip())


def local_input(raw: str | None, tz: tzinfo) -> datetime:
    """A ``datetime-local`` field (the pub's wall clock) as an aware instant."""
    if not raw:
        raise BadInput("a new deadline is needed")
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise BadInput(f"not a date and time: {raw!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return moment.astimezone(UTC)
