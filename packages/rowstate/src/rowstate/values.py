"""The value rules (docs/values.md): what both databases store and compare alike.

Checked before any I/O, by the binding (keys, guards, payloads), the core (owners, holders,
event data) and the units of work. Pure functions of a value: nothing here knows a table, a
machine or a database, so every layer may use them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from .errors import ValidationError

MAX_TEXT = 4096  # key and guard strings longer than this are refused as bad input
SCALARS = (str, int, float, bool)
# The value rules (docs/values.md): what both databases store alike, checked before any I/O
MAX_VALUE_BYTES = 1_000_000  # one text, bytes or JSON value (UTF-8 / JSON text bytes)
MAX_JSON_DEPTH = 64  # containers nested in one JSON document
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# PostgreSQL numeric's range: digits before and after the decimal point
NUMERIC_BEFORE, NUMERIC_AFTER = 131072, 16383

INT_TYPES = frozenset({"INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "MEDIUMINT", "INT2",
                        "INT4", "INT8", "SERIAL", "BIGSERIAL", "SMALLSERIAL"})
INT_TEXT = re.compile(r"^-?[0-9]{1,19}$")


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate: not UTF-8, so neither driver can send it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "holds NUL (PostgreSQL text and jsonb cannot)"
    if not text.isascii() and has_surrogates(text):
        return "holds a lone surrogate (not UTF-8)"
    return None


def check_scalar(value: object, what: str, error: type[Exception],
                 allow_none: bool = False) -> None:
    """A key, guard, owner or holder value: what both databases compare alike."""
    if value is None and allow_none:
        return
    if not isinstance(value, SCALARS):
        raise error(f"{what}: {value!r} is not a str, int, float or bool")
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise error(f"{what}: string longer than {MAX_TEXT} characters")
        problem = _text_problem(value)
        if problem:
            raise error(f"{what}: string {problem}")
    elif isinstance(value, bool):
        return
    elif isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise error(f"{what}: integer out of 64-bit range")
    elif isinstance(value, float) and not math.isfinite(value):
        raise error(f"{what}: {value!r} is not comparable alike on both databases")


MAX_BY = 200  # who moved a row: a name, an email, "cli:ann", "tick"
MAX_NOTE = 2000  # why: a sentence or a short paragraph, not a document (that is ``data``)
# control characters: a ``by`` takes none; a ``note`` may break lines and indent
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NOTE_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def check_by(value: object) -> str | None:
    """Who moved a row (``by=``), as the history shows it: one line of printable text.
    Refused rather than cleaned, so what the history says is exactly what the caller
    said; an empty name names nobody (leave ``by`` out instead)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"by: {value!r} is not text (who moved the row, e.g. 'ann')")
    if not value.strip():
        raise ValidationError("by: empty (leave by= out when nobody is named)")
    return _event_text(value, "by", MAX_BY, _CONTROL, "a control character (one line only)")


def check_note(value: object) -> str | None:
    """Why a row moved (``note=``): text of at most :data:`MAX_NOTE` characters, lines and
    tabs allowed. A blank note is no note (None): a form's empty field says nothing."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"note: {value!r} is not text (why the row moved)")
    if not value.strip():
        return None
    return _event_text(value, "note", MAX_NOTE, _NOTE_CONTROL,
                       "a control character (line breaks and tabs are allowed)")


def _event_text(value: str, what: str, limit: int, control: re.Pattern[str],
                said: str) -> str:
    if len(value) > limit:
        raise ValidationError(f"{what}: {len(value)} characters, at most {limit}")
    if control.search(value):
        raise ValidationError(f"{what}: holds {said}")
    problem = _text_problem(value)
    if problem:
        raise ValidationError(f"{what}: {problem}")
    return value


def check_json(value: object, what: str) -> str:
    """The JSON text of ``value``, once the JSON rules hold for every part of it.

    Checked with an explicit stack, not recursion, so a 5,000-deep document is a
    ValidationError and never a RecursionError. Strings (keys too) hold no NUL and no lone
    surrogate (jsonb refuses both); object keys are strings (``json.dumps`` would turn
    ``1`` and ``"1"`` into one key); ints fit in 64 bits (SQLite's JSON functions read
    bigger ones as floats); floats are finite; containers nest at most
    ``MAX_JSON_DEPTH`` deep; the text is at most ``MAX_VALUE_BYTES``.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                raise ValidationError(f"{what}: a JSON string {problem}")
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                raise ValidationError(f"{what}: a JSON integer out of 64-bit range")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValidationError(f"{what}: {item!r} is not JSON")
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                raise ValidationError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH}")
            if isinstance(item, dict):
                for k, v in item.items():
                    if not isinstance(k, str):
                        raise ValidationError(f"{what}: JSON object keys are strings, "
                                              f"got {k!r}")
                    problem = _text_problem(k)
                    if problem:
                        raise ValidationError(f"{what}: a JSON key {problem}")
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in item)
        else:
            raise ValidationError(f"{what}: a {type(item).__name__} is not JSON")
    text = json.dumps(value, allow_nan=False)
    if len(text) > MAX_VALUE_BYTES:
        raise ValidationError(f"{what}: {len(text)} bytes of JSON; the limit is "
                              f"{MAX_VALUE_BYTES}")
    return text


PAYLOAD_TYPES = (str, int, float, bool, bytes, Decimal, datetime, date, time, timedelta,
                 UUID, dict, list)


def check_payload_value(value: object, what: str) -> None:
    """A value a column can hold, checked before any write: a claim and an act must not
    happen for a finalize that could never land. The rules are those of docs/values.md,
    one per kind and the same on both databases: a value one of them would refuse (or
    store differently: NaN) is refused on both."""
    if value is None or isinstance(value, bool):
        return
    if not isinstance(value, PAYLOAD_TYPES):
        raise ValidationError(f"{what}: a {type(value).__name__} cannot be stored")
    if isinstance(value, str):
        problem = _text_problem(value)
        if problem:
            raise ValidationError(f"{what}: text {problem}")
        if len(value) * 4 > MAX_VALUE_BYTES and len(value.encode()) > MAX_VALUE_BYTES:
            raise ValidationError(f"{what}: text over {MAX_VALUE_BYTES} bytes")
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValidationError(f"{what}: integer out of 64-bit range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{what}: {value!r} cannot be stored alike on both "
                                  "databases (SQLite stores NaN as NULL)")
    elif isinstance(value, bytes):
        if len(value) > MAX_VALUE_BYTES:
            raise ValidationError(f"{what}: bytes over {MAX_VALUE_BYTES}")
    elif isinstance(value, Decimal):
        _check_decimal(value, what)
    elif isinstance(value, datetime):
        if value.utcoffset() is None:
            raise ValidationError(f"{what}: a datetime must be timezone-aware")
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise ValidationError(f"{what}: {value!r} is outside years 1-9999 in UTC"
                                  ) from None
    elif isinstance(value, dict | list):
        check_json(value, what)


def check_json_column_value(value: object, what: str) -> None:
    """A value for a JSON payload column: a dict or a list (by the JSON rules), or JSON text
    (PostgreSQL parses it, SQLite stores it as it is: both hold the same document once it
    parses, by the same rules, without duplicate keys). A bare number or boolean is refused:
    SQLite would store it, PostgreSQL refuses a number or boolean for a jsonb column."""
    if value is None or isinstance(value, dict | list):
        if value is not None:
            check_json(value, what)
        return
    if not isinstance(value, str):
        raise ValidationError(f"{what}: a JSON column takes a dict, a list or JSON text, "
                              f"got a {type(value).__name__}")
    check_payload_value(value, what)  # NUL, surrogates, size
    try:
        doc = json.loads(value, object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"{what}: not JSON text: {exc}") from None
    check_json(doc, what)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):  # jsonb keeps the last; SQLite's text keeps them all
        raise ValueError("an object with a duplicate key")
    return doc


# What a column of a declared type takes alike on both databases: PostgreSQL refuses the
# rest (a str for a bigint, an int for a boolean) at the write, or it and SQLite's type
# affinity store it differently (a bool in a text column: "true" and "1"; a float in an
# integer one: rounded and kept). Keyed by the declared type's first word.
_DECLARED: dict[str, tuple[type, ...]] = {}
for _words, _kinds in (
        (INT_TYPES, (int,)),
        (("BOOLEAN", "BOOL"), (bool,)),
        (("REAL", "DOUBLE", "FLOAT", "FLOAT4", "FLOAT8"), (int, float)),
        (("NUMERIC", "DECIMAL"), (int, float, Decimal)),
        (("TIMESTAMPTZ", "TIMESTAMP", "DATETIME"), (datetime,)),
        (("DATE",), (date,)),
        (("TIME", "TIMETZ"), (time,)),
        (("INTERVAL",), (timedelta,)),
        (("UUID",), (UUID,)),
        (("BYTEA", "BLOB"), (bytes,)),
        (("TEXT", "VARCHAR", "CHAR", "CHARACTER", "CITEXT"), (str, int, Decimal, UUID, date)),
):
    for _word in _words:
        _DECLARED[_word] = _kinds


def check_declared_kind(value: object, declared: str, what: str) -> None:
    """A payload value for a column of a declared type (``Binding.column_types``): one of
    the kinds both databases store alike in it (an undeclared or unknown type: no check)."""
    word = (declared.split() or [""])[0].split("(")[0].upper()
    kinds = _DECLARED.get(word)
    if kinds is None:
        return
    ok = isinstance(value, kinds)
    if ok and isinstance(value, bool):
        ok = bool in kinds
    elif ok and isinstance(value, datetime):
        ok = datetime in kinds
    if not ok and isinstance(value, str) and int in kinds and str not in kinds:
        # decimal text for an integer: cast alike by both
        ok = bool(INT_TEXT.match(value)) and INT64_MIN <= int(value) <= INT64_MAX
        value = int(value) if ok else value
    if not ok:
        raise ValidationError(f"{what}: a {type(value).__name__} for a {declared} column")
    bits = _INT_BITS.get(word)
    if bits and isinstance(value, int) and not -(2**bits) <= value < 2**bits:
        # PostgreSQL's integer is 32 bits and smallint 16; SQLite stores any 64-bit int
        raise ValidationError(f"{what}: {value} is out of range for a {declared} column")


# What a guard or where= value may be for a column of a declared type, so that both
# databases judge the comparison alike: SQLite's affinity matches True to 1 and 1 to '1',
# PostgreSQL refuses ``integer = boolean`` and ``text = bigint``. Decimal text for an
# integer column is cast alike by both (as for a payload value).
_COMPARED_KINDS: tuple[tuple[Iterable[str], tuple[type, ...]], ...] = (
    (INT_TYPES, (int, float)),
    (("BOOLEAN", "BOOL"), (bool,)),
    (("REAL", "DOUBLE", "FLOAT", "FLOAT4", "FLOAT8", "NUMERIC", "DECIMAL"), (int, float)),
    (("TEXT", "VARCHAR", "CHAR", "CHARACTER", "CITEXT"), (str,)),
)
_COMPARED = {word: kinds for words, kinds in _COMPARED_KINDS for word in words}


def check_compared_kind(value: object, declared: str, what: str,
                        error: type[Exception] = ValidationError) -> None:
    """A guard's (or ``where=``'s) scalar compared with a column of a declared type: one of
    the kinds both databases compare alike with it (None, an undeclared or other type: no
    check, the comparison is left to the database as before)."""
    word = (declared.split() or [""])[0].split("(")[0].upper()
    kinds = _COMPARED.get(word)
    if kinds is None or value is None:
        return
    ok = isinstance(value, kinds) and (not isinstance(value, bool) or bool in kinds)
    if not ok and isinstance(value, str) and word in INT_TYPES:
        ok = bool(INT_TEXT.match(value)) and INT64_MIN <= int(value) <= INT64_MAX
    if not ok:
        raise error(f"{what}: a {type(value).__name__} ({value!r}) cannot be compared alike "
                    f"on both databases with a {declared} column")


_INT_BITS = {"INT": 31, "INTEGER": 31, "INT4": 31, "SERIAL": 31, "SMALLINT": 15, "INT2": 15,
             "SMALLSERIAL": 15}


def _check_decimal(value: Decimal, what: str) -> None:
    if not value.is_finite():
        raise ValidationError(f"{what}: {value!r} cannot be stored alike on both databases")
    sign_digits_exp = value.as_tuple()
    exponent = int(sign_digits_exp.exponent)
    before = len(sign_digits_exp.digits) + exponent
    if before > NUMERIC_BEFORE or -exponent > NUMERIC_AFTER:
        raise ValidationError(f"{what}: {value!r} is beyond PostgreSQL numeric's range")


def safe_text(text: str) -> str:
    """``text`` made storable (NUL and lone surrogates escaped): for the engine's own
    stamps, such as a lease's ``last_error`` from an act's exception, which must never
    make the release that carries them fail."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii() and has_surrogates(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
