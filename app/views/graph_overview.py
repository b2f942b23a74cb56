"""The graph drawn as one item when it is too small on screen for its boxes to say anything.

A frame of a 5,000-node graph at Fit took most of a second: every node and edge item is
painted by a Python call (and asked for its bounds), whatever its size. Zoomed out that far a
box is a coloured rectangle and an edge a line, so :class:`OverviewItem` draws them all with a
few batched calls (``drawRects`` per colour, one ``drawLines``), prepared once per layout, and
the view hides the detailed items meanwhile (``app.views.graph_view``). It also answers which
node lies under a point, so a click still selects. Selection, hover and step colours are drawn
over it from the node items' state.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from app.theme import Colors
from app.views.graph_items import CHIP_HEIGHT, NODE_WIDTH, EdgeItem, NodeItem, status_colour

__all__ = ["OverviewItem"]


def _mix(a: QColor, b: QColor, amount: float) -> QColor:
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


class OverviewItem(QGraphicsItem):
    """Every node as a rectangle in its kind's colour and every edge as a line (see module
    docstring); :meth:`prepare` takes the detailed items' places once per layout."""

    def __init__(self) -> None:
        super().__init__()
        self._bounds = QRectF()
        self._rects: dict[str, list[QRectF]] = {}
        self._lines: list[QLineF] = []
        self._ids: list[str] = []
        self._nodes: dict[str, NodeItem] = {}
        self._centres = np.zeros((0, 2))
        self._half = np.zeros((0, 2))
        self._colors: Colors | None = None
        self.marked: set[str] = set()
        """Drawn ids selected or hovered (set by the view): ringed."""
        self.stepping = False
        """The step cursor is set: every node shows its residency chips."""
        self.setZValue(0)

    def prepare(
        self, nodes: Mapping[str, NodeItem], edges: Mapping[object, EdgeItem], colors: Colors
    ) -> None:
        """Take the places of ``nodes`` and ``edges`` (after a layout or a relayout)."""
        self.prepareGeometryChange()
        self._colors = colors
        self._nodes = dict(nodes)
        self._ids = list(nodes)
        self._rects = {}
        kind_colour: dict[str, str] = {}
        centres, half = [], []
        for item in nodes.values():
            box = item.box.translated(item.pos())
            kind = item.node.kind
            if kind not in kind_colour:
                kind_colour[kind] = colors.kind(kind).name()
            self._rects.setdefault(kind_colour[kind], []).append(box)
            centres.append((box.center().x(), box.center().y()))
            half.append((box.width() / 2, box.height() / 2))
        self._centres = np.array(centres, dtype=float).reshape(-1, 2)
        self._half = np.array(half, dtype=float).reshape(-1, 2)
        self._lines = [QLineF(*edge.endpoints()) for edge in edges.values()]
        if len(self._centres):
            low = (self._centres - self._half).min(axis=0)
            high = (self._centres + self._half).max(axis=0)
            bounds = QRectF(*low, *(high - low))
        else:
            bounds = QRectF()
        self._bounds = bounds.adjusted(-4, -4, 4, 4 + CHIP_HEIGHT + 3)

    def node_at(self, point: QPointF) -> str | None:
        """The node whose box holds scene ``point`` (a little leeway at small scales)."""
        if not len(self._ids):
            return None
        d = np.abs(self._centres - np.array([point.x(), point.y()])) - self._half
        inside = np.nonzero((d[:, 0] <= 4) & (d[:, 1] <= 4))[0]
        return self._ids[int(inside[0])] if len(inside) else None

    # ----- QGraphicsItem ------------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        colors = self._colors
        if colors is None:
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)  # pixels: no blending
        # opaque: blending thousands of long translucent lines took 45 ms a frame
        edge = _mix(QColor(colors.muted), QColor(colors.background), 0.4)
        pen = QPen(edge, 0)  # cosmetic: a pixel at any zoom
        painter.setPen(pen)
        painter.drawLines(self._lines)
        painter.setPen(Qt.PenStyle.NoPen)
        for colour, rects in self._rects.items():
            painter.setBrush(QColor(colour))
            painter.drawRects(rects)
        self._paint_states(painter, colors)

    def _paint_states(self, painter: QPainter, colors: Colors) -> None:
        """Selection, hover and the step cursor's residency chips, from the node items,
        batched by colour like the boxes."""
        rings: list[QRectF] = []
        chips: dict[str, list[QRectF]] = {}
        scale = painter.worldTransform().m11() or 1.0
        grow = 3 / scale
        marked = (
            self._nodes.values()
            if self.stepping
            else [self._nodes[n] for n in self.marked if n in self._nodes]
        )
        for item in marked:
            residency = item.residency
            if not (item.is_selected or item.is_hovered or residency):
                continue
            box = item.box.translated(item.pos())
            if item.is_selected or item.is_hovered:
                rings.append(box.adjusted(-grow, -grow, grow, grow))
            if residency:
                width = NODE_WIDTH / max(len(residency), 1)
                for i, status in enumerate(residency.values()):
                    if status not in ("", "freed"):
                        left = box.left() + i * width
                        chip = QRectF(left, box.bottom() + 3, width, CHIP_HEIGHT)
                        chips.setdefault(status_colour(status, colors).name(), []).append(chip)
        painter.setPen(Qt.PenStyle.NoPen)
        for colour, rects in chips.items():
            painter.setBrush(QColor(colour))
            painter.drawRects(rects)
        if rings:
            ring = QPen(QColor(colors.selection), 2.0)
            ring.setCosmetic(True)
            painter.setPen(ring)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRects(rings)
