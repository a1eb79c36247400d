"""The front ends' shape (issue 16): the CLI's week actions and the web's buttons are the rows
of the one table of actions, not lists of their own. (No import circle and no file over 450
lines, for all of ``src/``: tests/test_house.py.)"""

from __future__ import annotations

import re

from pubsched.cli import build_parser
from pubsched.engines.actions import ACTIONS
from pubsched.web.buttons import BUTTONS, CONFIRM


def test_the_cli_week_commands_are_the_table_rows() -> None:
    text = _help(["week", "--help"])
    listed = re.findall(r"^    (\w+)\s", text, re.M)
    # show, then the edits of the week's own data, not moves of the run: its shifts
    # (``week shift add|remove``) and the roster by hand
    assert listed == [a.name for a in ACTIONS if a.cli] + ["show", "shift", "assign", "unassign"]


def test_the_web_buttons_are_the_table_rows() -> None:
    assert {edge: (a.name, label) for a in ACTIONS for edge, label in a.buttons} == BUTTONS
    assert {a.name: a.confirm for a in ACTIONS if a.confirm} == CONFIRM


def _help(argv: list[str]) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args(argv)
    return out.getvalue()
