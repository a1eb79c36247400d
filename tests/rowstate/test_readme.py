"""The README's examples run as written, top to bottom, in one namespace (every ```python
block of the page: the engine's five minutes, the ORM doors, async)."""

from __future__ import annotations

from pathlib import Path

from support.doc_blocks import fenced_blocks, run_python_blocks

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_examples_run(tmp_path: Path) -> None:
    assert len([b for b in fenced_blocks(README) if b.lang == "python"]) >= 8
    done = run_python_blocks(README, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
