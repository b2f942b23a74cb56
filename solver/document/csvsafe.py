"""CSV cells that a spreadsheet will not run as formulas (CSV injection).

Excel, LibreOffice and Google Sheets treat a cell that starts with ``=``, ``+``, ``-`` or ``@``
(and, in some versions, a tab or carriage return) as a formula, so a node or device named
``=HYPERLINK(...)`` in a graph file would run when the exported table is opened. Such cells get
a leading apostrophe, which spreadsheets show as text (OWASP's advice). Plain numbers such as
``-3.5`` or ``+1e-3`` stay numbers. Both the command line's ``sweep -o`` and the GUI's CSV
export write their rows through :func:`neutralise_row`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["neutralise_csv_cell", "neutralise_row"]

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def neutralise_csv_cell(text: str) -> str:
    """Return ``text`` with a leading apostrophe if a spreadsheet would read it as a formula.

    Examples
    --------
    >>> neutralise_csv_cell("=1+1"), neutralise_csv_cell("@SUM(A1)"), neutralise_csv_cell("relu")
    ("'=1+1", "'@SUM(A1)", 'relu')
    >>> neutralise_csv_cell("-3.5"), neutralise_csv_cell("+1e-3"), neutralise_csv_cell("-1+2")
    ('-3.5', '+1e-3', "'-1+2")
    """
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def neutralise_row(cells: Iterable[object]) -> list[object]:
    """A CSV row with every string cell neutralised; numbers are written as they are.

    Examples
    --------
    >>> neutralise_row(["=cmd|' /C calc'!A0", -2, 0.5, "gpu"])
    ["'=cmd|' /C calc'!A0", -2, 0.5, 'gpu']
    """
    return [neutralise_csv_cell(c) if isinstance(c, str) else c for c in cells]
