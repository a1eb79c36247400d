"""Every page of docs/ runs as written (issue 27): its ```python blocks, top to bottom in
one namespace, in a fresh interpreter in an empty directory (support.doc_blocks). A block
that needs the page's earlier ones has them above it, in view: a page whose examples share a
start says so in a setup block ("The examples on this page start from:"), never in hidden
test code. Every other block says what it is instead (```text for a tree or an output,
```sh for commands...), and the page's own test checks what of it can be checked.

The README is run by tests/rowstate/test_readme.py, docs/dataset_lifecycle.md by
tests/dataset_lifecycle/test_dataset_docs.py (on PostgreSQL, through the variable the page
configures); docs/contrib.md's two apps are also run as programs and type-checked by
tests/rowstate/test_contrib_docs.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.doc_blocks import fenced_blocks, run_python_blocks

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RUN_ELSEWHERE = {"dataset_lifecycle.md"}  # its own test, on PostgreSQL (see above)
PAGES = sorted(p.name for p in DOCS.glob("*.md") if p.name not in RUN_ELSEWHERE)
# what a block that is not run may be: each a language a reader (and a highlighter) knows
NOT_RUN = {"text", "sh", "console", "json", "cron", "ini", "sql", "nginx", "caddy", "yaml"}


@pytest.mark.parametrize("page", ["README.md", *(f"docs/{p}" for p in PAGES)])
def test_every_block_says_what_it_is(page: str) -> None:
    unnamed = [b.where(ROOT / page) for b in fenced_blocks(ROOT / page)
               if b.lang not in NOT_RUN | {"python"}]
    assert not unnamed, f"blocks that are neither python nor {sorted(NOT_RUN)}: {unnamed}"


@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_of_a_page_run(page: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ROWSTATE_URL", "SHOP_DATABASE_URL")}
    done = run_python_blocks(DOCS / page, cwd=tmp_path, env=env)
    assert done.returncode == 0, f"docs/{page} failed as written:\n{done.stderr}"


def test_the_engine_pages_examples_run_on_postgresql(tmp_path: Path, pg_dsn: str) -> None:
    """docs/engine.md's setup block reads ROWSTATE_URL, as it tells a reader to."""
    page = DOCS / "engine.md"
    assert 'os.environ.get("ROWSTATE_URL"' in page.read_text(encoding="utf-8")
    done = run_python_blocks(page, cwd=tmp_path, env={**os.environ, "ROWSTATE_URL": pg_dsn})
    assert done.returncode == 0, f"docs/engine.md failed on PostgreSQL:\n{done.stderr}"
    assert not list(tmp_path.iterdir())  # nothing of SQLite's was made
