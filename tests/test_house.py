"""The house rules of ``src/`` (docs/architecture.md), checked by reading the code.

- **Imports run one way.** No module imports a module that imports it back, directly or
  through others: not at the top, not inside a function, not under ``TYPE_CHECKING``.
  Every ``import``/``from ... import`` statement anywhere in a file counts; ``from . import
  x`` counts as importing the submodule ``x`` (the package itself is not re-entered), and
  ``from pkg import Name`` as importing ``pkg``; importing ``pkg.sub.mod`` also counts the
  package ``__init__`` files Python runs first (``pkg.sub``), but the importer's own.
- **Small files.** No file in ``src/`` is over :data:`MAX_LINES` lines.
- **A house by feature.** The pub scheduler's root holds at most :data:`MAX_ROOT_MODULES`
  modules (the ground floor); its features are packages, and docs/architecture.md's map of
  them is the one ``scripts/house_map.py`` draws from the code.
- **One way to send mail.** One module talks SMTP (``mail/mailer.py``: ``smtplib``), and
  one hands it mail (``deliveries/deliver.py``: ``pub.mailer``'s sessions); every other
  module owes mail to the mail machine.
- **No twin kept by hand without its reason.** A module that defines both a class and its
  ``Async`` twin (``X`` and ``AsyncX``) is either generated (its first lines say so) or
  says at its top why it is kept by hand.

The walker is tested too, on a made-up tree, so a broken walker cannot pass a broken
house.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from support.layout import SRC, circles, python_files

MAX_LINES = 450
MAX_ROOT_MODULES = 12
PUBSCHED = Path(__file__).resolve().parents[1] / "packages/pubsched/src/pubsched"
ROOT = PUBSCHED.parents[3]


def test_src_has_no_import_circle() -> None:
    assert circles(SRC) == []


def test_src_has_no_file_over_the_limit() -> None:
    long = {str(p.relative_to(root)): n for root, p in python_files(SRC)
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_pub_schedulers_root_is_its_ground_floor() -> None:
    root = sorted(p.name for p in PUBSCHED.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_the_architecture_map_is_the_code() -> None:
    """docs/architecture.md's map of pubsched is what scripts/house_map.py draws now (run
    it and paste its output there after a move)."""
    drawn = subprocess.run([sys.executable, str(ROOT / "scripts/house_map.py"),
                            str(PUBSCHED)], capture_output=True, text=True, check=True).stdout
    doc = (ROOT / "docs/architecture.md").read_text()
    section = doc[doc.index("## packages/pubsched/src/pubsched"):]
    block = section[section.index("```text\n") + 8:]
    assert block[:block.index("```\n")] == drawn


def _callers(method: str, owner: str) -> list[str]:
    """The modules that call ``<something>.<owner>.<method>(...)`` in code."""
    found = []
    for path in PUBSCHED.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == method and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == owner):
                found.append(str(path.relative_to(PUBSCHED)))
    return sorted(set(found))


def test_one_module_talks_smtp_and_one_hands_it_mail() -> None:
    smtp = sorted(str(p.relative_to(PUBSCHED)) for p in PUBSCHED.rglob("*.py")
                  if "import smtplib" in p.read_text())
    assert smtp == ["mail/mailer.py"]
    assert _callers("session", "mailer") == ["deliveries/deliver.py"]


def _twins(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    return sorted(c for c in classes if f"Async{c}" in classes)


def test_no_twin_kept_by_hand_without_its_reason() -> None:
    """A file defining ``X`` and ``AsyncX`` side by side says why at its top."""
    unexplained = []
    for root, path in python_files(SRC):
        if _twins(path):
            head = "\n".join(path.read_text().splitlines()[:40]).lower()
            if "generated" not in head and "by hand" not in head:
                unexplained.append(str(path.relative_to(root)))
    assert unexplained == []


# -- the walker itself ----------------------------------------------------------------


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return tmp


@pytest.mark.parametrize(("files", "expected"), [
    # a top-level circle
    ({"p/__init__.py": "", "p/a.py": "from . import b\n", "p/b.py": "from .a import x\n"},
     [["p.a", "p.b"]]),
    # one hidden in a function
    ({"p/__init__.py": "", "p/a.py": "import p.b\n",
      "p/b.py": "def f():\n    from p import a\n"}, [["p.a", "p.b"]]),
    # one hidden under TYPE_CHECKING, through a third module
    ({"p/__init__.py": "", "p/a.py": "from .b import y\n", "p/b.py": "from .c import z\n",
      "p/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import q\n"},
     [["p.a", "p.b", "p.c"]]),
    # a package re-exporting its submodules is not a circle...
    ({"p/__init__.py": "from .a import x\n", "p/a.py": "from . import b\n", "p/b.py": ""}, []),
    # ...but a submodule reaching back for a name the package defines is
    ({"p/__init__.py": "from .a import x\nY = 1\n", "p/a.py": "from . import Y\n"},
     [["p", "p.a"]]),
    # importing p.q.m runs p.q's __init__ first, and that one imports back
    ({"p/__init__.py": "", "p/a.py": "from .q.m import x\n",
      "p/q/__init__.py": "from .n import y\n", "p/q/m.py": "", "p/q/n.py": "from ..a import z\n"},
     [["p.a", "p.q", "p.q.n"]]),
    # a module of p.q importing its sibling does not re-enter p.q
    ({"p/__init__.py": "", "p/q/__init__.py": "from .m import x\n",
      "p/q/m.py": "from .n import y\n", "p/q/n.py": ""}, []),
])
def test_the_walker_finds_circles_wherever_they_hide(
        tmp_path: Path, files: dict[str, str], expected: list[list[str]]) -> None:
    assert circles(_tree(tmp_path, files)) == expected
