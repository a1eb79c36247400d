"""The README's engine examples run as written, top to bottom, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def engine_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## The engine in five minutes", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_engine_examples_run(capsys: object) -> None:
    blocks = engine_blocks()
    assert len(blocks) >= 8
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
