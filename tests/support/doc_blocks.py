"""The fenced code blocks of a Markdown page, so that a test can run or check what a page
tells a person to type (a page's commands rot unseen unless something runs them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\S*)((?:[ \t]+\S+)*)\s*$")


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
    tags: tuple[str, ...] = ()
    start = 0
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = _FENCE.match(line)
        if lang is None:
            if fence:
                lang, start, body = fence.group(1), number, []
                tags = tuple(fence.group(2).split())
        elif line.strip() == "```":
            blocks.append(Block(lang, "\n".join(body) + "\n", start, tags))
            lang = None
        else:
            body.append(line)
    if lang is not None:
        raise ValueError(f"{page.name}:{start}: a ``` block is never closed")
    return blocks
