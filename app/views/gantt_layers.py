"""The Gantt chart's bar items: one ``pg.BarGraphItem`` per layer, fed arrays, and their look.

Layers, bottom to top: first computations by node kind, recomputations by kind (a lighter fill,
outlined: 1.4 px, or 1 px when a layer has more than ``WIDE_OUTLINES_UP_TO`` bars) with their
hatching on top, copies, offloading copies (kept on their target), then
the hover, selection and step-cursor outlines. Each layer is one item; a redraw only feeds it
``x0``/``width``/``y``/``height`` arrays. SVG cannot express pattern brushes (Qt writes them as
flat fills), so :meth:`GanttLayers.svg_hatching` swaps the hatching for real line segments
while an SVG is written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QPen

from app.theme import Colors
from app.views.gantt_geometry import hatch_segments
from app.views.gantt_lanes import OP_HEIGHT, TRANSFER_HEIGHT, BarArrays, LaneTable
from solver.document.graph import NODE_KINDS
from solver.execution.simulate import Timeline

__all__ = ["GanttLayers", "LAYER_NAMES"]

LAYER_NAMES = (
    *NODE_KINDS,
    *(f"recompute:{k}" for k in NODE_KINDS),
    *(f"hatch:{k}" for k in NODE_KINDS),
    "transfer",
    "offload",
    "measured",
    "hover",
    "selection",
    "cursor",
)
"""Every layer, in drawing order."""
WIDE_OUTLINES_UP_TO = 400
"""A recomputation layer with more bars is outlined 1 px wide: Qt strokes a wider pen on a
slow path (6.5 of the 9 ms that painting a 5,000-operation schedule's bars took), and at
that many bars the outlines are a pixel or two apart anyway."""
GHOST_OFFSET = 0.2
GHOST_HEIGHT = 0.34
"""Measured ghost bars: centred this far below the lane's centre, this tall (in lanes)."""
_HATCH_PIXELS = 6.0
"""Spacing of the hatching lines drawn for SVG export, in screen pixels."""

Span = tuple[float, float, int]
"""A bar as ``(start, end, lane)``."""


class GanttLayers:
    """The layers' items in ``plot`` (see module docstring)."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self._plot = plot
        self._outlines: dict[str, tuple[QPen, QPen]] = {}
        """Per recomputation layer: its outline pen (1.4 px) and the 1 px one for many bars."""
        self._is_link = np.zeros(0, dtype=bool)
        self.items: dict[str, pg.BarGraphItem] = {}
        for name in LAYER_NAMES:
            item = pg.BarGraphItem(x0=[], width=[], y=[], height=[])
            self.items[name] = item
            plot.addItem(item)
        self.hatch_lines = {
            kind: pg.PlotCurveItem(connect="pairs", antialias=False) for kind in NODE_KINDS
        }
        for item in self.hatch_lines.values():
            item.setVisible(False)
            plot.addItem(item, ignoreBounds=True)

    def __getitem__(self, name: str) -> pg.BarGraphItem:
        return self.items[name]

    def restyle(self, colors: Colors) -> None:
        """Apply the theme's colours to every layer (also on a palette change)."""
        for kind in NODE_KINDS:
            fill = colors.kind(kind)
            self.items[kind].setOpts(brush=fill, pen=colors.pen(fill.darker(135), 1))
            outlines = (colors.pen(fill, 1.4), colors.pen(fill, 1.0))
            self._outlines[f"recompute:{kind}"] = outlines
            many = len(self.items[f"recompute:{kind}"].opts["x0"]) > WIDE_OUTLINES_UP_TO
            self.items[f"recompute:{kind}"].setOpts(
                brush=colors.recompute(kind), pen=outlines[many]
            )
            self.items[f"hatch:{kind}"].setOpts(
                brush=colors.recompute_brush(kind), pen=pg.mkPen(None)
            )
            self.hatch_lines[kind].setPen(colors.pen(fill, 1))
        transfer = QColor(colors.transfer)
        self.items["transfer"].setOpts(brush=transfer, pen=colors.pen(transfer.darker(135), 1))
        # offloading copies (kept on their target): the copy colour, cross-hatched, outlined
        self.items["offload"].setOpts(
            brush=QBrush(transfer.darker(140), Qt.BrushStyle.DiagCrossPattern),
            pen=colors.pen(transfer.darker(150), 1.6),
        )
        ghost = QColor(colors.foreground)
        ghost.setAlpha(40)
        self.items["measured"].setOpts(
            brush=ghost, pen=colors.pen(colors.foreground, 1.2, dashed=True)
        )
        self.items["selection"].setOpts(
            brush=pg.mkBrush(None), pen=colors.pen(colors.selection, 2.5)
        )
        self.items["cursor"].setOpts(brush=pg.mkBrush(None), pen=colors.pen(colors.cursor, 3))
        self.items["hover"].setOpts(
            brush=pg.mkBrush(None), pen=colors.pen(colors.selection, 1.5, dashed=True)
        )

    def fill(self, timeline: Timeline | None, table: LaneTable) -> None:
        """Feed every schedule layer from ``timeline`` laid out on ``table``'s lanes (its
        :class:`~app.views.gantt_lanes.BarArrays`: masks, no walk over the operations)."""
        self._is_link = table.is_link
        bars = table.arrays
        is_op = bars.what == 0
        for kind in NODE_KINDS:
            of_kind = is_op & (bars.kind == kind)
            self._set_arrays(kind, bars, of_kind & ~bars.flag)
            again = of_kind & bars.flag
            self._set_arrays(f"recompute:{kind}", bars, again)
            self._set_arrays(f"hatch:{kind}", bars, again)
        for layer, offload in (("transfer", False), ("offload", True)):
            self._set_arrays(layer, bars, ~is_op & (bars.flag == offload))

    def _set_arrays(self, layer: str, bars: BarArrays, mask: np.ndarray) -> None:
        starts, lanes = bars.start[mask], bars.lane[mask]
        heights = np.where(self._is_link[lanes], TRANSFER_HEIGHT, OP_HEIGHT)
        extra = {}
        if layer in self._outlines:
            extra["pen"] = self._outlines[layer][len(starts) > WIDE_OUTLINES_UP_TO]
        self.items[layer].setOpts(
            x0=starts, width=bars.end[mask] - starts, y=lanes.astype(float), height=heights,
            **extra,
        )  # fmt: skip

    def set_bars(self, layer: str, spans: Iterable[Span]) -> None:
        """Feed one layer ``(start, end, lane)`` spans; link lanes get thinner bars."""
        data = np.array(list(spans), dtype=float).reshape(-1, 3)
        lanes = data[:, 2].astype(int)
        heights = np.where(self._is_link[lanes], TRANSFER_HEIGHT, OP_HEIGHT)
        self.items[layer].setOpts(
            x0=data[:, 0], width=data[:, 1] - data[:, 0], y=data[:, 2], height=heights
        )

    def set_ghosts(self, starts: np.ndarray, ends: np.ndarray, lanes: np.ndarray) -> None:
        """The measured operations (an executed schedule): ghost bars over the lower half of
        their lane, so each lane shows the prediction above and the measurement below."""
        self.items["measured"].setOpts(
            x0=starts, width=ends - starts, y=lanes + GHOST_OFFSET, height=GHOST_HEIGHT
        )

    @contextlib.contextmanager
    def svg_hatching(self) -> Iterator[None]:
        """While inside, the recomputations' hatching is line segments (for an SVG export)."""
        vb = self._plot.getViewBox()
        (x0, x1), _ = vb.viewRange()
        px, py = vb.viewPixelSize()
        for name, lines in self.hatch_lines.items():
            bars = self.items[f"hatch:{name}"].opts
            rects = (
                np.column_stack([bars["x0"], bars["width"], bars["y"], bars["height"]])
                if len(bars["x0"])
                else np.zeros((0, 4))
            )
            lines.setData(*hatch_segments(rects.reshape(-1, 4), (x0, x1), px, py, _HATCH_PIXELS))
            lines.setVisible(True)
            self.items[f"hatch:{name}"].setVisible(False)
        try:
            yield
        finally:
            for name, lines in self.hatch_lines.items():
                lines.setVisible(False)
                self.items[f"hatch:{name}"].setVisible(True)
