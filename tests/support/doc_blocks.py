"""The fenced code blocks of a Markdown page, so that a test can run or check what a page
tells a person to type (a page's commands rot unseen unless something runs them)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# a fence may be indented, as one inside a list item is (its body loses that indentation),
# and may carry tags after its language (```python postgresql)
_FENCE = re.compile(r"^( *)```(\S*)((?:[ \t]+\S+)*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language (``sh``, ``ini``, ...), its text, where it starts, and
    the words after the language in its info string (```` ```python postgresql ```` has
    ``tags == ("postgresql",)``; Markdown renderers read the first word only)."""

    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    tags: tuple[str, ...] = ()

    def where(self, page: Path) -> str:
        return f"{page.name}:{self.line} (```{self.lang})"


def fenced_blocks(page: Path) -> list[Block]:
    """Every ``` block of ``page`` in order; an unclosed fence is an error, not a silent
    end of the page (a test would otherwise check less than it says)."""
    blocks: list[Block] = []
    lang: str | None = None
    indent = ""
    tags: tuple[str, ...] = ()
    start = 0
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = _FENCE.match(line)
        if lang is None:
            if fence:
                indent, lang, start, body = fence.group(1), fence.group(2), number, []
                tags = tuple(fence.group(3).split())
        elif line.strip() == "```":
            blocks.append(Block(lang, "\n".join(body) + "\n", start, tags))
            lang = None
        else:
            body.append(line.removeprefix(indent))
    if lang is not None:
        raise ValueError(f"{page.name}:{start}: a ``` block is never closed")
    return blocks


# Runs in a fresh interpreter: the blocks (a JSON list of [line, text] on stdin) in order, in
# one namespace named "__main__" (a page read top to bottom is a script), each compiled
# under the page's path with its first line at its line in the page, so a traceback points
# at the page's own line.
_RUNNER = """\
import json, sys
page = sys.argv[1]
namespace = {"__name__": "__main__"}
for line, text in json.load(sys.stdin):
    exec(compile("\\n" * line + text, page, "exec"), namespace)
"""


def run_python_blocks(page: Path, cwd: Path, env: Mapping[str, str] | None = None,
                      timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run every ```python block of ``page`` as written, top to bottom in one namespace,
    in a new interpreter (this one's) in ``cwd``, with ``env`` (default: this process's,
    so the code under test is the code these tests import). Whatever the blocks set up
    (settings of Django's, a file database in the current directory, an event loop) dies
    with that process."""
    blocks = [[b.line, b.text] for b in fenced_blocks(page) if b.lang == "python"]
    return subprocess.run([sys.executable, "-c", _RUNNER, str(page)], input=json.dumps(blocks),
                          cwd=cwd, env=dict(os.environ if env is None else env),
                          capture_output=True, text=True, timeout=timeout, check=False)
