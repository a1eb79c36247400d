"""docs/contrib.md's two applications are programs, not fragments (issue 27): each is saved
as the file the page names, in an empty directory, and run there with this interpreter (the
SQLAlchemy one on its SQLite file, then on a real PostgreSQL through the variable it reads);
it prints what the page says it prints, and again on a second run. And each file passes
``mypy --strict`` with the repository's settings (pyproject.toml: Django is untyped there),
checked against this checkout's packages, as an adopter's type check would see them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.contrib_stores import sqlalchemy_url
from support.doc_blocks import Block, fenced_blocks

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "contrib.md"
SOURCES = [ROOT / "packages" / name / "src"
           for name in ("rowstate", "dataset-lifecycle", "pubsched")]
APPS = {"SQLAlchemy": "shop.py", "Django": "shop_django.py"}  # section -> the file it names


def section_blocks(section: str) -> list[Block]:
    """The blocks under ``## section``, up to the next ``## `` heading."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"## {section}") + 1
    end = next((n for n in range(start, len(lines)) if lines[n].startswith("## ")), len(lines))
    return [b for b in fenced_blocks(PAGE) if start < b.line <= end]


def app(section: str, where: Path) -> tuple[Path, str]:
    """The section's application written to ``where``/its file name, and what the page
    says it prints (the first ```text block after it)."""
    blocks = section_blocks(section)
    code = next(b for b in blocks if b.lang == "python")
    printed = next(b for b in blocks if b.lang == "text" and b.line > code.line)
    name = APPS[section]
    assert f"(`{name}`)" in PAGE.read_text(encoding="utf-8"), f"the page names {name}"
    where.mkdir(parents=True, exist_ok=True)
    path = where / name
    path.write_text(code.text, encoding="utf-8")
    return path, printed.text


def run(path: Path, **env: str) -> str:
    """Run the program as a person would, with ``env`` on top of this process's (without a
    SHOP_DATABASE_URL of its own: the program's default is the page's)."""
    base = {k: v for k, v in os.environ.items() if k != "SHOP_DATABASE_URL"}
    done = subprocess.run([sys.executable, path.name], cwd=path.parent, env={**base, **env},
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"{path.name} failed as written:\n{done.stderr}"
    return done.stdout


def test_the_sqlalchemy_app_runs_on_an_sqlite_file(tmp_path: Path) -> None:
    path, printed = app("SQLAlchemy", tmp_path)
    assert run(path) == printed
    assert (tmp_path / "shop.db").is_file()  # in the current directory
    assert run(path) == printed  # a second run makes a new order


def test_the_sqlalchemy_app_runs_on_postgresql(tmp_path: Path, pg_dsn: str) -> None:
    path, printed = app("SQLAlchemy", tmp_path)
    url = sqlalchemy_url(pg_dsn).render_as_string(hide_password=False)
    assert run(path, SHOP_DATABASE_URL=url) == printed
    assert not (tmp_path / "shop.db").exists()


def test_the_django_app_runs_on_an_sqlite_file(tmp_path: Path) -> None:
    path, printed = app("Django", tmp_path)
    assert run(path) == printed
    assert (tmp_path / "shop_django.db").is_file()
    assert run(path) == printed  # its tables are made once


@pytest.mark.parametrize("section", sorted(APPS))
def test_the_app_passes_mypy_strict(section: str, tmp_path: Path,
                                    request: pytest.FixtureRequest) -> None:
    path, _ = app(section, tmp_path)
    cache = request.config.cache.mkdir("mypy-contrib-docs") if request.config.cache else None
    env = {**os.environ, "MYPYPATH": os.pathsep.join(map(str, SOURCES))}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
         *(["--cache-dir", str(cache)] if cache else []), path.name],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"mypy --strict {path.name}:\n{done.stdout}{done.stderr}"
