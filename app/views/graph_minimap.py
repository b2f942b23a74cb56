"""A minimap for the graph canvas: the whole graph, small, with the visible area outlined.

It sits in the canvas's bottom-right corner. The graph is painted into a pixmap once per
layout (by the owner's overview painter, ``render``): repainting the scene's thousands of
items at every pan made a pan frame of a 5,000-node graph take 100-200 ms. Clicking or
dragging in it centres the canvas there. Hidden while the whole graph is visible anyway.
"""

from __future__ import annotations

from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QFrame, QGraphicsView

from app.views.graph_canvas import content_bounds

__all__ = ["Minimap"]

SIZE = (180, 110)
_MARGIN = 20.0


class Minimap(QFrame):
    """An overview of ``canvas``'s scene (see module docstring); ``render(painter, target,
    source)`` paints the scene's ``source`` rectangle into ``target``."""

    def __init__(self, canvas: QGraphicsView, render: Callable[[QPainter, QRectF, QRectF], None]):
        super().__init__(canvas)
        self._canvas = canvas
        self._render = render
        self._pixmap = QPixmap()
        self._source = QRectF()
        self._target = QRectF()
        self.setFixedSize(*SIZE)
        self.setFrameShape(QFrame.Shape.Box)
        self.setToolTip("The whole graph; click or drag to move the view")
        self.hide()

    def render_scene(self) -> None:
        """Paint the graph into the pixmap again when it is next shown (after a layout)."""
        self._pixmap = QPixmap()
        self.refresh()

    def _paint_pixmap(self) -> None:
        scene = self._canvas.scene()
        if scene is None or not shiboken6.isValid(scene):
            return
        bounds = content_bounds(scene).adjusted(-_MARGIN, -_MARGIN, _MARGIN, _MARGIN)
        self._source = bounds
        pixmap = QPixmap(*SIZE)
        pixmap.fill(self.palette().base().color())
        if not bounds.isEmpty():
            scale = min(SIZE[0] / bounds.width(), SIZE[1] / bounds.height())
            w, h = bounds.width() * scale, bounds.height() * scale
            self._target = QRectF((SIZE[0] - w) / 2, (SIZE[1] - h) / 2, w, h)
            painter = QPainter(pixmap)
            self._render(painter, self._target, bounds)
            painter.end()
        self._pixmap = pixmap

    def visible_area(self) -> QRectF:
        """The canvas's visible scene rectangle (what the outline shows)."""
        return self._canvas.mapToScene(self._canvas.viewport().rect()).boundingRect()

    def refresh(self) -> None:
        """Place the minimap in the corner and show it only when it helps."""
        scene = self._canvas.scene()
        if scene is None or not shiboken6.isValid(scene):
            return  # the window is being torn down
        bounds = content_bounds(scene)
        parent = self._canvas.viewport()
        self.move(parent.width() - SIZE[0] - 8, parent.height() - SIZE[1] - 8)
        whole = self.visible_area().contains(bounds)
        self.setVisible(not bounds.isEmpty() and not whole)
        if self.isVisible():
            self.update()

    def _to_map(self, point: QPointF) -> QPointF:
        s, t = self._source, self._target
        if s.isEmpty():
            return QPointF()
        return QPointF(
            t.left() + (point.x() - s.left()) / s.width() * t.width(),
            t.top() + (point.y() - s.top()) / s.height() * t.height(),
        )

    def _to_scene(self, point: QPointF) -> QPointF:
        s, t = self._source, self._target
        if t.isEmpty():
            return QPointF()
        return QPointF(
            s.left() + (point.x() - t.left()) / t.width() * s.width(),
            s.top() + (point.y() - t.top()) / t.height() * s.height(),
        )

    def paintEvent(self, event) -> None:
        if self._pixmap.isNull():
            self._paint_pixmap()
        painter = QPainter(self)
        painter.drawPixmap(0, 0, self._pixmap)
        area = self.visible_area()
        outline = QRectF(self._to_map(area.topLeft()), self._to_map(area.bottomRight()))
        pen = QPen(QColor("#e69f00"), 2)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(outline.intersected(QRectF(self.rect()).adjusted(1, 1, -1, -1)))
        painter.end()
        super().paintEvent(event)

    def mousePressEvent(self, event) -> None:
        self._canvas.auto_fit = False
        self._canvas.centerOn(self._to_scene(event.position()))

    def mouseMoveEvent(self, event) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._canvas.centerOn(self._to_scene(event.position()))
