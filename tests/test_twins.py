"""The sync twins are generated from their asyncio sources (scripts/unasync.py): they are
current in this checkout, and a stale one is caught."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "unasync.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60, check=False)


def _copy(tmp_path: Path) -> list[tuple[str, str]]:
    twins: list[tuple[str, str]] = _script().TWINS
    for source, target in twins:
        for name in (source, target):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, tmp_path / name)
    return twins


def test_the_generated_twins_are_current() -> None:
    done = _run("--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "current" in done.stdout


def test_a_hand_edit_of_a_generated_twin_is_caught(tmp_path: Path) -> None:
    twins = _copy(tmp_path)
    assert _run("--check", "--root", str(tmp_path)).returncode == 0
    _, target = twins[1]
    edited = tmp_path / target
    edited.write_text(edited.read_text() + "\nHAND_EDIT = 1\n")
    done = _run("--check", "--root", str(tmp_path))
    assert done.returncode == 1
    assert f"--- {target} (on disk)" in done.stdout
    assert "-HAND_EDIT = 1" in done.stdout
    assert "1 stale" in done.stdout
    # writing brings it back, and the check passes again
    assert _run("--root", str(tmp_path)).returncode == 0
    assert _run("--check", "--root", str(tmp_path)).returncode == 0
    assert edited.read_text() == (ROOT / target).read_text()


def test_a_source_changed_without_regenerating_is_caught(tmp_path: Path) -> None:
    twins = _copy(tmp_path)
    source, _ = twins[1]
    path = tmp_path / source
    path.write_text(path.read_text() + "\n\nasync def added(store: AsyncStore) -> None:\n"
                    "    await adrive(store, None)\n")
    done = _run("--check", "--root", str(tmp_path))
    assert done.returncode == 1
    assert "+def added(store: Store) -> None:" in done.stdout
    assert "+    drive(store, None)" in done.stdout


def test_a_generated_file_without_a_source_is_caught(tmp_path: Path) -> None:
    _copy(tmp_path)
    orphan = tmp_path / "packages/dataset-lifecycle/src/dataset_lifecycle/_sync/gone.py"
    orphan.write_text(_script().HEADER.format(source="dataset_lifecycle/_async/gone.py"))
    done = _run("--check", "--root", str(tmp_path))
    assert done.returncode == 1
    assert ("packages/dataset-lifecycle/src/dataset_lifecycle/_sync/gone.py says it is generated"
            in done.stdout)


def test_the_substitutions() -> None:
    unasync = _script()
    source = (
        "from rowstate import AsyncStore, Batch, adrive\n"
        "\n"
        "\n"
        "class C:\n"
        "    async def run(self, store: AsyncStore,\n"
        "                  batch: Batch) -> None:\n"
        "        async with store.lock:\n"
        "            await adrive(store,\n"
        "                         batch)\n"
        "        async for row in store:\n"
        "            await row.aclose()\n"
        "        return (await store.run(batch))[0]\n"
    )
    assert unasync.generate(source, "a.py") == unasync.HEADER.format(source="a.py") + (
        "from rowstate import Batch, Store, drive\n"
        "\n"
        "\n"
        "class C:\n"
        "    def run(self, store: Store,\n"
        "            batch: Batch) -> None:\n"
        "        with store.lock:\n"
        "            drive(store,\n"
        "                  batch)\n"
        "        for row in store:\n"
        "            row.close()\n"
        "        return store.run(batch)[0]\n"
    )


def test_an_async_name_missing_from_the_table_is_an_error() -> None:
    with pytest.raises(SystemExit, match="no sync spelling for AsyncNovelty"):
        _script().generate("x: AsyncNovelty\n", "a.py")
