"""Generate the sync twins from their asyncio sources, or check that they are current.

Why: a sync and an async front end kept by hand drift apart (a fix lands in one twin, a
docstring in the other). Here the asyncio twin is the source, written once; the sync twin is
derived from it by the explicit, line-by-line token substitutions below, and ``--check``
(run by ``make twins``, part of ``make test``) fails with a diff when a generated file is
not what its source gives today. The idea is httpcore's ``scripts/unasync.py``; this is our
own small version of it.

What a source may rely on:

* every substitution is a whole word (``\\bAsyncStore\\b``), applied to every line, strings
  and comments included, in the order of :data:`SUBSTITUTIONS`: ``async def`` -> ``def``,
  ``async with`` -> ``with``, ``async for`` -> ``for``, ``await x`` -> ``x`` (and
  ``(await f(x))[0]`` -> ``f(x)[0]``), the dunder methods, then the names in
  :data:`NAMES`; a name not in the table stays as written;
* ``from m import (...)`` lists are re-sorted afterwards the way ruff's isort sorts them
  (constants, classes, then the rest; case-insensitive), since ``AsyncStore`` -> ``Store``
  moves a name in the alphabet; a name imported twice by then is imported once;
* a generated file starts with :data:`HEADER` (which file it comes from, which command, do
  not edit); a file that carries the header but is no generated twin any more is reported;
* a generated file that still holds an ``Async...`` name (a name missing from the table) is
  an error, so a new async name cannot slip into the sync twin unnoticed.

Usage: ``python scripts/unasync.py`` writes the twins; ``--check`` only compares (exit 1
and a unified diff when one is stale); ``--root DIR`` runs on another checkout (the tests
run it on a copy in a temporary directory).
"""

from __future__ import annotations

import argparse
import difflib
import io
import re
import sys
import tokenize
from pathlib import Path

# (asyncio source, generated sync twin), paths relative to the repository root: each
# distribution's package under packages/<distribution>/src/
_DL = "packages/dataset-lifecycle/src/dataset_lifecycle"
_RS = "packages/rowstate/src/rowstate"
TWINS: list[tuple[str, str]] = [
    (f"{package}/_async/{name}.py", f"{package}/_sync/{name}.py")
    for package, names in ((_DL, ("__init__", "client", "mock", "store_adapter")),
                           (_RS, ("__init__", "lifecycle", "observing", "relay", "units")))
    for name in names
]

# async name -> sync name: names that exist in both flavours under two spellings
NAMES: dict[str, str] = {
    # rowstate's front ends and stores
    "AsyncLifecycle": "Lifecycle",
    "AsyncPostgresStore": "PostgresStore",
    "AsyncStore": "Store",
    "AsyncRunner": "SyncRunner",
    "connect_async": "connect",
    "adrive": "drive",
    "adrive_lane": "drive_lane",
    "AsyncUnit": "Unit",
    "AsyncRaw": "Raw",
    "AsyncRelay": "Relay",
    # the observed front end's runner (rowstate._async.observing)
    "AsyncCountingRunner": "CountingRunner",
    # the unit of work's flow (rowstate._async.units): an async after-commit callback is
    # awaited, a sync one called
    "anested": "nested",
    "aunit_scope": "unit_scope",
    "acall_back": "call_back",
    # the front ends' pairs: rowstate.frontend
    "apublish_one": "publish_one",
    "accept_act_async": "accept_act",
    # psycopg_pool
    "AsyncConnectionPool": "ConnectionPool",
    # dataset_lifecycle's own pairs
    "AsyncDatasetLifecycle": "DatasetLifecycle",
    "AsyncDatasetLifecycleClient": "DatasetLifecycleClient",
    "AsyncDatasetLifecycleApi": "DatasetLifecycleApi",
    "AsyncMockDatasetLifecycle": "MockDatasetLifecycle",
    "AsyncStorePersistenceAdapter": "StorePersistenceAdapter",
    # an awaitable publisher: awaited on the async client, run to completion (or as a task
    # on the thread's running loop) on the sync one: dataset_lifecycle._setup
    "asettle": "settle",
    # init is a plain call on both clients: the async one cannot run the column check, so
    # its store runs it before its first statement: dataset_lifecycle._setup
    "checked_at_first_use": "checked_now",
    # stdlib
    "AsyncIterator": "Iterator",
    "asynccontextmanager": "contextmanager",
    "aclose": "close",
    "asyncio.Lock": "threading.Lock",
}

# the keywords and dunders first, then the names; applied in this order to every line
SUBSTITUTIONS: list[tuple[str, str]] = [
    # ``(await f(x))[0]`` -> ``f(x)[0]``: parentheses that only held an awaited call
    (r"\(await ([\w.]+\((?:[^()]|\([^()]*\))*\))\)", r"\1"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__anext__\b", "__next__"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    # the adapter path's flag: an awaitable from the adapter is an error under the sync API
    (r"\basynchronous=True\b", "asynchronous=False"),
    *((r"\b" + re.escape(a) + r"\b", s) for a, s in NAMES.items()),
]
_COMPILED = [(re.compile(p), r) for p, r in SUBSTITUTIONS]

HEADER = ("# Generated from {source} by scripts/unasync.py: do not edit.\n"
          "# Edit the source, then run `make unasync` (`make twins` checks).\n")
_HEADER_RE = re.compile(r"^# Generated from (\S+) by scripts/unasync\.py: do not edit\.$")
_LEFTOVER = re.compile(r"\bAsync[A-Z]\w*|\basync (?:def|with|for)\b|\bawait ")


def unasync_line(line: str) -> str:
    for pattern, replacement in _COMPILED:
        line = pattern.sub(replacement, line)
    return line


def _member_key(name: str) -> tuple[int, str, str]:
    """ruff's isort order (order-by-type): CONSTANTS, then Classes, then the rest."""
    bare = name.split(" as ")[0]
    if len(bare) > 1 and bare.upper() == bare and bare.lower() != bare:
        kind = 0
    elif bare[:1].isupper():
        kind = 1
    else:
        kind = 2
    return kind, bare.lower(), name


def _sorted_members(names: list[str]) -> list[str]:
    return sorted(dict.fromkeys(names), key=_member_key)


def sort_imports(lines: list[str]) -> list[str]:
    """Re-sort the names of every ``from m import ...`` (one line, or a parenthesized list
    one name per line, as ruff writes it with a trailing comma)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        single = re.match(r"^(\s*from \S+ import )([^()#]+)$", line)
        if single and "," in single.group(2):
            names = [n.strip() for n in single.group(2).split(",") if n.strip()]
            out.append(single.group(1) + ", ".join(_sorted_members(names)) + "\n")
            i += 1
            continue
        if re.match(r"^\s*from \S+ import \($", line.rstrip("\n")):
            j = i + 1
            members: list[str] = []
            while lines[j].strip() != ")":
                members.append(lines[j].strip().rstrip(","))
                j += 1
            indent = re.match(r"^\s*", lines[i + 1]).group(0)  # type: ignore[union-attr]
            out.append(line)
            out.extend(f"{indent}{name},\n" for name in _sorted_members(members))
            out.append(lines[j])
            i = j + 1
            continue
        out.append(line)
        i += 1
    return out


def _open_brackets(source_text: str) -> dict[int, tuple[int, int]]:
    """For each line (0-based) that starts inside brackets: where the innermost open
    bracket is (line, column), from Python's own tokenizer (so brackets in strings and
    comments do not count)."""
    stack: list[tuple[int, int]] = []
    inside: dict[int, tuple[int, int]] = {}
    seen: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source_text).readline):
        row, col = tok.start[0] - 1, tok.start[1]
        if row not in seen:
            seen.add(row)
            if stack and tok.type not in (tokenize.NL, tokenize.NEWLINE):
                inside[row] = stack[-1]
        if tok.type == tokenize.OP and tok.string in "([{":
            stack.append((row, col))
        elif tok.type == tokenize.OP and tok.string in ")]}" and stack:
            stack.pop()
    return inside


def unasync_lines(source_text: str) -> list[str]:
    """Every line substituted; a continuation line that was aligned with its open bracket
    (``def f(a,\n      b)``) stays aligned with it after the bracket moved left
    (``async def`` -> ``def``, ``await adrive(`` -> ``drive(``)."""
    lines = source_text.splitlines(keepends=True)
    inside = _open_brackets(source_text)
    realigned = list(lines)  # each original line, re-indented where it was aligned
    for row, line in enumerate(lines):
        if row not in inside:
            continue
        at_row, at_col = inside[row]
        indent = len(line) - len(line.lstrip(" "))
        if indent != at_col + 1:
            continue  # a hanging indent: not aligned with the bracket, nothing moved
        opener = realigned[at_row]
        shift = len(opener) - len(opener.lstrip(" ")) - (
            len(lines[at_row]) - len(lines[at_row].lstrip(" ")))
        new_col = len(unasync_line(opener[: at_col + shift]))
        realigned[row] = " " * (new_col + 1) + line.lstrip(" ")
    return [unasync_line(line) for line in realigned]


def generate(source_text: str, source: str) -> str:
    """The sync twin of ``source_text`` (from the file ``source``, relative to the root)."""
    body = "".join(sort_imports(unasync_lines(source_text)))
    leftovers = sorted({m.group(0) for m in _LEFTOVER.finditer(body)})
    if leftovers:
        raise SystemExit(f"unasync: {source}: no sync spelling for {', '.join(leftovers)}; "
                         "add it to NAMES in scripts/unasync.py")
    # named from its distribution's import root (packages/<distribution>/src/), which keeps
    # the header one short line
    return HEADER.format(source=source.partition("/src/")[2] or source) + body


def _orphans(root: Path, targets: set[str]) -> list[str]:
    """Files that say they are generated but are no twin in :data:`TWINS` any more."""
    found = []
    for path in sorted((root / "packages").rglob("src/**/*.py")):
        with path.open(encoding="utf-8") as f:
            first = f.readline().rstrip("\n")
        if _HEADER_RE.match(first) and path.relative_to(root).as_posix() not in targets:
            found.append(path.relative_to(root).as_posix())
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff when a twin is stale")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the repository root (default: this script's checkout)")
    args = parser.parse_args(argv)
    root: Path = args.root
    stale = 0
    for source, target in TWINS:
        want = generate((root / source).read_text(encoding="utf-8"), source)
        path = root / target
        have = path.read_text(encoding="utf-8") if path.exists() else ""
        if have == want:
            continue
        if args.check:
            stale += 1
            sys.stdout.writelines(difflib.unified_diff(
                have.splitlines(keepends=True), want.splitlines(keepends=True),
                f"{target} (on disk)", f"{target} (generated from {source})"))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(want, encoding="utf-8")
            print(f"unasync: wrote {target}")
    orphans = _orphans(root, {t for _, t in TWINS})
    for orphan in orphans:
        print(f"unasync: {orphan} says it is generated, but no source in TWINS makes it")
    if stale or orphans:
        print(f"unasync: {stale} stale twin(s), {len(orphans)} orphan(s); "
              "run `python scripts/unasync.py` (and delete the orphans)")
        return 1
    if args.check:
        print(f"unasync: {len(TWINS)} sync twin(s) current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
