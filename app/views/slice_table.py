"""The Gantt chart's slice table: the measured range's operations and copies by kind, shown
over the chart's top-right corner (the rows come from :func:`app.views.slices.slice_rows`)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTableWidgetItem, QWidget

from app.views.slices import SliceRow
from solver.document.units import format_ms

__all__ = ["fill_slice_table", "make_slice_table"]

_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def make_slice_table(parent: QWidget) -> QTableWidget:
    """The table, hidden, as a child of the chart it is shown over."""
    table = QTableWidget(0, 4, parent)
    table.setHorizontalHeaderLabels(["kind", "count", "time", "share"])
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
    table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    table.setToolTip("The measured range's slices by kind (Shift+drag to measure; Esc clears)")
    table.hide()
    return table


def fill_slice_table(table: QTableWidget, rows: list[SliceRow]) -> None:
    """Fill ``table`` with :func:`app.views.slices.slice_rows`' rows."""
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        cells = (row.kind, str(row.count), format_ms(row.total_ms), f"{row.share:.0%}")
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if c:
                item.setTextAlignment(_RIGHT)
            item.setToolTip(f"longest: {row.longest}")
            table.setItem(r, c, item)
    table.resizeColumnsToContents()
    table.resizeRowsToContents()
