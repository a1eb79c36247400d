"""Skills: the free words a tender has (``pub_tenders.skills``) and a shift needs
(``pub_shifts.needs``, ``pub_shift_template.needs``). One rule for both, since a need is
met only by the same word: were a shift allowed a longer word than a tender, that need
could never be met.

:func:`check` is the rule for what is typed (each a word, stripped and lower-cased, no
space or comma inside, at most :data:`MAX_LENGTH` characters, each once in the order
first given); :func:`split` reads the web's one text field; :func:`stored` reads a column
back, leniently: the commands that write the columns check them, and a value written by
hand that is not a JSON list of words reads as none rather than stopping a page, a
generate or a send on the night.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..verdicts import BadInput

MAX_LENGTH = 20


def check(raw: Iterable[object], *, most: int, whose: str) -> tuple[str, ...]:
    """The skills typed for ``whose`` ("a tender", "a shift"), at most ``most`` of them,
    or :class:`BadInput` naming the first one that is not a skill."""
    if isinstance(raw, str):  # a lone string would be read letter by letter
        raise BadInput("skills are a list of words")
    out: list[str] = []
    for item in raw:
        word = item.strip().lower() if isinstance(item, str) else None
        if not word:
            raise BadInput(f"a skill is a word, got {item!r}")
        if any(c.isspace() or c == "," for c in word) or not word.isprintable():
            raise BadInput(f"a skill is one word, without spaces or commas: {item!r}")
        if len(word) > MAX_LENGTH:
            raise BadInput(f"a skill is at most {MAX_LENGTH} characters: {item!r}")
        if word not in out:
            out.append(word)
    if len(out) > most:
        raise BadInput(f"at most {most} skills for {whose}, got {len(out)}")
    return tuple(out)


def split(text: str) -> list[str]:
    """Skills typed into one field, separated by commas or spaces (the web's forms); the
    words still go through :func:`check`."""
    return text.replace(",", " ").split()


def stored(value: object) -> tuple[str, ...]:
    """A column's JSON list of words, stripped and lower-cased, each once; anything else
    reads as none."""
    try:
        data = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return ()
    if not isinstance(data, list):
        return ()
    out: list[str] = []
    for item in data:
        word = item.strip().lower() if isinstance(item, str) else ""
        if word and word not in out:
            out.append(word)
    return tuple(out)


__all__ = ["MAX_LENGTH", "check", "split", "stored"]
