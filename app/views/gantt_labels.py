"""Names on the Gantt chart's bars: a pool of text items, placed after each zoom or pan.

Only bars wide enough on screen to hold their node's name get one, at most :data:`MAX_LABELS`
(beyond that the names are unreadable anyway and each text item costs paint time). The items
are reused from one placement to the next instead of being created per frame.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetrics

from app.theme import Colors
from app.views.gantt_lanes import Bar, LaneTable
from solver.execution.simulate import Timeline

__all__ = ["BarLabels", "MAX_LABELS"]

MAX_LABELS = 250


class BarLabels:
    """The label pool of one plot (see module docstring)."""

    def __init__(self, plot: pg.PlotItem, font: QFont) -> None:
        self._plot = plot
        self._font = QFont(font)
        self._font.setPointSizeF(max(self._font.pointSizeF() - 1, 7))
        self._metrics = QFontMetrics(self._font)
        self._items: list[pg.TextItem] = []

    @property
    def shown(self) -> list[str]:
        """The texts of the labels on display."""
        return [item.textItem.toPlainText() for item in self._items if item.isVisible()]

    def place(self, table: LaneTable, timeline: Timeline | None, colors: Colors) -> None:
        """Label the bars of ``table`` that the plot's view shows wide enough."""
        vb = self._plot.getViewBox()
        (x0, x1), _ = vb.viewRange()
        pixel = vb.viewPixelSize()[0] or 1.0
        wanted: list[Bar] = []
        for starts, ends, row in table.rows:
            visible = np.nonzero((ends >= x0) & (starts <= x1))[0]
            widths = (np.minimum(ends[visible], x1) - np.maximum(starts[visible], x0)) / pixel
            # a name needs at least ~5 px per character: skip measuring hopeless bars
            for j in visible[widths > 12]:
                bar = row[j]
                width = (min(bar.end, x1) - max(bar.start, x0)) / pixel
                if width > self._metrics.horizontalAdvance(bar.node) + 6:
                    wanted.append(bar)
                if len(wanted) >= MAX_LABELS:
                    break
        while len(self._items) < len(wanted):
            label = pg.TextItem(anchor=(0.5, 0.5))
            label.setFont(self._font)
            self._plot.addItem(label, ignoreBounds=True)
            self._items.append(label)
        for label, bar in zip(self._items, wanted, strict=False):
            middle = (max(bar.start, x0) + min(bar.end, x1)) / 2
            label.setText(bar.node, color=_color(bar, timeline, colors))
            label.setPos(middle, bar.lane)
            label.setVisible(True)
        for label in self._items[len(wanted) :]:
            label.setVisible(False)


def _color(bar: Bar, timeline: Timeline | None, colors: Colors) -> str:
    """Recomputations have a light fill: their name is drawn in the text colour."""
    if bar.what == "op" and timeline is not None and timeline.ops[bar.index].recompute:
        return colors.foreground
    return colors.text_on_bar
