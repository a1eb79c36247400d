"""Three distributions from one repository (docs/releasing.md): each builds an sdist and a
wheel that pass ``twine check``; the engine's wheel requires nothing and installs alone with
no index; each distribution's version comes from git and moves with every commit, so a
newer pubsched wheel installed over an older one upgrades it and ``pubsched init`` then
applies the migration the newer one brings.

The builds run without isolation (``python -m build --no-isolation``), on the hatchling and
hatch-vcs of the dev environment: the same backend as an isolated build, without fetching
it again for every build."""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = {"rowstate": "rowstate", "dataset-lifecycle": "dataset_lifecycle",
                 "pubsched": "pubsched"}


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def build(source: Path, out: Path, *, sdist: bool = True) -> list[Path]:
    """``python -m build`` of one distribution's folder: its sdist then (from the sdist,
    as PyPI's users would) its wheel; or only the wheel."""
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out),
                           *(() if sdist else ("--wheel",)), str(source)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return sorted(set(out.iterdir()) - before)


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(zf.read(name).decode())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    out = tmp_path_factory.mktemp("dist")
    return {name: build(ROOT / "packages" / name, out / name) for name in DISTRIBUTIONS}


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_each_distribution_builds_an_sdist_and_a_wheel_that_twine_accepts(
        built: dict[str, list[Path]], name: str) -> None:
    files = built[name]
    assert sorted(f.suffix for f in files) == [".gz", ".whl"], files
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = [f for f in files if f.suffix == ".whl"]
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/")[0] for n in zf.namelist()}
        assert any(n.endswith("licenses/LICENSE") for n in zf.namelist()), "no licence"
    # one package per wheel: the engine's wheel carries no app, the app's no engine
    assert {t for t in tops if not t.endswith(".dist-info")} == {DISTRIBUTIONS[name]}
    (sdist,) = [f for f in files if f.suffix == ".gz"]
    with tarfile.open(sdist) as tf:
        names = {Path(m.name).name for m in tf.getmembers()}
    assert {"CHANGELOG.md", "LICENSE", "README.md", "pyproject.toml", "PKG-INFO"} <= names


def test_the_engine_requires_nothing_and_each_integration_is_an_extra(
        built: dict[str, list[Path]]) -> None:
    meta = _metadata(next(f for f in built["rowstate"] if f.suffix == ".whl"))
    requires = meta.get_all("Requires-Dist") or []
    assert [r for r in requires if "extra ==" not in r] == []
    extras = set(meta.get_all("Provides-Extra") or [])
    assert extras == {"postgres", "nats", "otel", "prometheus", "sqlalchemy", "django"}
    postgres = sorted(req.name for req in map(Requirement, requires)
                      if req.marker and req.marker.evaluate({"extra": "postgres"}))
    assert postgres == ["psycopg", "psycopg-pool"]
    scripts = {
        name: _entry_points(next(f for f in files if f.suffix == ".whl"))
        for name, files in built.items()}
    assert scripts == {"rowstate": {"rowstate"}, "dataset-lifecycle": set(),
                       "pubsched": {"pubsched"}}


def _entry_points(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")),
                    None)
        if name is None:
            return set()
        text = zf.read(name).decode()
    section, found = "", set()
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line and section == "console_scripts":
            found.add(line.split("=")[0].strip())
    return found


def _python_blocks(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    return "\n".join(block.split("```", 1)[0] for block in text.split("```python\n")[1:])


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        """pip of this interpreter's environment, aimed at the venv (``--python``): the
        venv itself is made without pip, which saves most of its making."""
        return subprocess.run([sys.executable, "-m", "pip", "--python", str(self.python),
                               "--disable-pip-version-check", *args],
                              capture_output=True, text=True, timeout=300, check=False)

    def run(self, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.root / "bin" / args[0]), *args[1:]], cwd=cwd,
                              env={"PATH": f"{self.root / 'bin'}:/usr/bin:/bin",
                                   "HOME": str(cwd), "LANG": "C.UTF-8", **env},
                              capture_output=True, text=True, timeout=120, check=False)


def make_venv(where: Path, *, borrow_dependencies: bool = False) -> Venv:
    """A fresh venv. ``borrow_dependencies``: it also sees this environment's installed
    third-party packages (after its own, through a .pth line), so that the app's wheels
    install with ``--no-deps`` and no index; its own rowstate and pubsched are the wheels'
    (this environment's are editable installs, which a plain path line does not load)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   timeout=120)
    venv = Venv(where)
    if borrow_dependencies:
        own = subprocess.run([str(venv.python), "-c",
                              "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
        Path(own, "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def test_the_engine_installs_alone_from_its_wheel_with_no_index_and_runs_its_readme(
        built: dict[str, list[Path]], tmp_path: Path) -> None:
    wheel = next(f for f in built["rowstate"] if f.suffix == ".whl")
    venv = make_venv(tmp_path / "venv")
    done = venv.pip("install", "--no-index", str(wheel))
    assert done.returncode == 0, done.stderr
    listed = venv.pip("list", "--format=freeze").stdout.split()
    assert [line.split("==")[0] for line in listed] == ["rowstate"]
    program = _python_blocks(ROOT / "packages" / "rowstate" / "README.md")
    assert program, "the engine's README shows a program"
    ran = venv.run("python", "-c", program + "\nprint('ran')\n", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["ran"]
    version = venv.run("rowstate", "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"rowstate {wheel.name.split('-')[1]}"


# -- versions that move ------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """A git repository holding a copy of the engine's and the app's folders, laid out as
    this one (hatch-vcs reads the repository two levels above each distribution)."""
    repo = tmp_path / "repo"
    for name in ("rowstate", "pubsched"):
        shutil.copytree(ROOT / "packages" / name, repo / "packages" / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _git(repo, "init", "-q", "-b", "main")
    yield repo


def _commit(repo: Path, message: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


def _wheel_version(wheel: Path) -> Version:
    return Version(wheel.name.split("-")[1])


def test_every_commit_moves_each_version_forward(repo: Path, tmp_path: Path) -> None:
    _commit(repo, "first")
    first = {name: build(repo / "packages" / name, tmp_path / "a" / name, sdist=False)[0]
             for name in ("rowstate", "pubsched")}
    (repo / "packages" / "rowstate" / "CHANGELOG.md").write_text("a change\n")
    _commit(repo, "second")
    second = {name: build(repo / "packages" / name, tmp_path / "b" / name, sdist=False)[0]
              for name in ("rowstate", "pubsched")}
    for name in first:
        assert _wheel_version(second[name]) > _wheel_version(first[name]), name
    # a release is a tag of that distribution's own, and moves only its own version
    _git(repo, "tag", "rowstate-v1.4.0")
    tagged = build(repo / "packages" / "rowstate", tmp_path / "c", sdist=False)[0]
    assert _wheel_version(tagged) == Version("1.4.0")
    app = build(repo / "packages" / "pubsched", tmp_path / "d", sdist=False)[0]
    assert _wheel_version(app) == _wheel_version(second["pubsched"])


def test_a_newer_pubsched_over_an_older_upgrades_and_init_applies_its_migration(
        repo: Path, tmp_path: Path) -> None:
    """docs/pubsched.md's upgrade, exactly: install the newer wheel over the older one,
    then ``pubsched init``."""
    migrations = repo / "packages" / "pubsched" / "src" / "pubsched" / "db" / "migrations"
    newest = sorted(p.name.split("_")[0] for p in migrations.glob("0*.sql"))[-1]
    held_back = tmp_path / "held-back"
    held_back.mkdir()
    for path in migrations.glob(f"{newest}_*.sql"):
        shutil.move(path, held_back / path.name)
    _commit(repo, "the older release")
    older = [build(repo / "packages" / name, tmp_path / "older", sdist=False)[0]
             for name in ("rowstate", "pubsched")]
    for path in held_back.iterdir():
        shutil.move(path, migrations / path.name)
    _commit(repo, f"migration {newest}")
    newer = build(repo / "packages" / "pubsched", tmp_path / "newer", sdist=False)[0]
    assert _wheel_version(newer) > _wheel_version(older[1])

    venv = make_venv(tmp_path / "venv", borrow_dependencies=True)
    done = venv.pip("install", "--no-index", "--no-deps", *map(str, older))
    assert done.returncode == 0, done.stderr
    home = tmp_path / "home"
    home.mkdir()
    db = {"PUBSCHED_DB": f"sqlite:///{home}/pub.db"}
    init = venv.run("pubsched", "init", cwd=home, **db)
    assert init.returncode == 0, init.stderr
    assert "applied" in init.stdout and newest not in init.stdout

    done = venv.pip("install", "--no-index", "--no-deps", str(newer))
    assert done.returncode == 0, done.stderr
    assert "already installed" not in done.stdout + done.stderr
    assert f"Successfully installed pubsched-{_wheel_version(newer)}" in done.stdout
    version = venv.run("pubsched", "--version", cwd=home)
    assert version.stdout.startswith(f"pubsched {_wheel_version(newer)} (rowstate ")
    init = venv.run("pubsched", "init", cwd=home, **db)
    assert init.returncode == 0, init.stderr
    assert f"applied 1 migration(s) to sqlite:///{home}/pub.db: {newest}" in init.stdout
    again = venv.run("pubsched", "init", cwd=home, **db)
    assert "is up to date" in again.stdout
