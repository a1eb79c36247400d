"""The HTML of pubsched's emails: a small kit of inline-styled pieces, no I/O.

Mail apps drop ``<style>`` blocks and ignore most of CSS, so every piece carries its own
``style`` attribute, the layout is one column of tables (what every client lays out the
same way) at most 600px wide, text is 16px, and a link is a big button a thumb can hit.
Every piece escapes what it is given; :class:`Html` marks markup already made here, so a
piece can hold another without escaping it twice.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

INK, MUTED, ACCENT, LINE, PAPER, SHADE = (
    "#1f2328", "#57606a", "#7a2e0e", "#d8dee4", "#ffffff", "#f6f1ea")
FONT = "font-family:-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif"
TEXT = f"{FONT};font-size:16px;line-height:1.5;color:{INK}"


@dataclass(frozen=True)
class Html:
    """Markup made by this module (safe to place as it is)."""

    markup: str


Piece = Html | str


def _put(piece: Piece) -> str:
    return piece.markup if isinstance(piece, Html) else _html.escape(piece)


def join(*pieces: Piece) -> Html:
    return Html("".join(_put(p) for p in pieces))


def strong(text: str) -> Html:
    return Html(f"<strong>{_html.escape(text)}</strong>")


def paragraph(*pieces: Piece, muted: bool = False) -> Html:
    colour = MUTED if muted else INK
    size = "14px" if muted else "16px"
    return Html(f'<p style="margin:0 0 16px;{FONT};font-size:{size};line-height:1.5;'
                f'color:{colour}">{"".join(_put(p) for p in pieces)}</p>')


def heading(text: str) -> Html:
    return Html(f'<h2 style="margin:24px 0 8px;{FONT};font-size:19px;line-height:1.3;'
                f'color:{INK}">{_html.escape(text)}</h2>')


def rows(lines: Iterable[tuple[Piece, Piece, bool]]) -> Html:
    """A list of shifts as a two-column table (what, who), one row each; a row marked
    True is highlighted (the reader's own shift)."""
    cells = []
    for first, second, marked in lines:
        shade = f"background:{SHADE};" if marked else ""
        cells.append(
            f'<tr><td style="{shade}padding:10px 12px;border-bottom:1px solid {LINE};'
            f'{TEXT};vertical-align:top">{_put(first)}</td>'
            f'<td style="{shade}padding:10px 12px;border-bottom:1px solid {LINE};'
            f'{TEXT};vertical-align:top">{_put(second)}</td></tr>')
    return Html('<table role="presentation" width="100%" cellpadding="0" cellspacing="0" '
                f'style="border-collapse:collapse;border-top:1px solid {LINE};'
                f'margin:0 0 16px">{"".join(cells)}</table>')


def stacked(items: Iterable[tuple[str, str]]) -> Html:
    """A one-column list: each item a bold line and a quieter one under it (a phone's
    width keeps a shift's times on one line this way)."""
    cells = "".join(
        f'<tr><td style="background:{SHADE};padding:10px 12px;border-bottom:1px solid '
        f'{LINE};{TEXT}"><strong>{_html.escape(top)}</strong>'
        + (f'<br><span style="color:{MUTED};font-size:15px">{_html.escape(under)}</span>'
           if under else "") + "</td></tr>"
        for top, under in items)
    return Html('<table role="presentation" width="100%" cellpadding="0" cellspacing="0" '
                f'style="border-collapse:collapse;border-top:1px solid {LINE};'
                f'margin:0 0 16px">{cells}</table>')


def bullets(items: Sequence[Piece]) -> Html:
    lis = "".join(f'<li style="margin:0 0 6px">{_put(i)}</li>' for i in items)
    return Html(f'<ul style="margin:0 0 16px;padding-left:22px;{TEXT}">{lis}</ul>')


def button(href: str, label: str, *, primary: bool = True) -> Html:
    """A link drawn as a button: a table cell, so clients that drop padding on ``<a>``
    still draw it big. The address is also written under the buttons by the caller, for
    clients that show no HTML links."""
    fill, ink = (ACCENT, PAPER) if primary else (PAPER, ACCENT)
    link = _html.escape(href, quote=True)
    return Html(
        '<table role="presentation" cellpadding="0" cellspacing="0" style="margin:0 0 12px">'
        f'<tr><td style="background:{fill};border:2px solid {ACCENT};border-radius:8px">'
        f'<a href="{link}" style="display:inline-block;padding:14px 22px;{FONT};'
        f'font-size:16px;font-weight:bold;color:{ink};text-decoration:none">'
        f'{_html.escape(label)}</a></td></tr></table>')


def link(href: str, label: str | None = None) -> Html:
    target = _html.escape(href, quote=True)
    return Html(f'<a href="{target}" style="color:{ACCENT};word-break:break-all">'
                f'{_html.escape(label or href)}</a>')


def page(title: str, header: str, body: Sequence[Html], footer: Sequence[Piece] = ()) -> str:
    """The whole document: the pub's name as a band at the top, one column of ``body``,
    the ``footer`` in small grey text."""
    foot = "".join(paragraph(p, muted=True).markup for p in footer)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_html.escape(title)}</title></head>\n"
        f'<body style="margin:0;padding:0;background:{SHADE}">\n'
        '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" '
        f'style="background:{SHADE}"><tr><td align="center" style="padding:12px 8px">\n'
        '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" '
        f'style="max-width:600px;background:{PAPER};border-radius:10px">\n'
        f'<tr><td style="background:{ACCENT};border-radius:10px 10px 0 0;padding:16px 20px;'
        f'{FONT};font-size:22px;font-weight:bold;color:{PAPER}">{_html.escape(header)}'
        "</td></tr>\n"
        f'<tr><td style="padding:20px">{"".join(b.markup for b in body)}{foot}</td></tr>\n'
        "</table>\n</td></tr></table>\n</body></html>\n"
    )
