"""A minimap for the graph canvas: the whole scene, small, with the visible area outlined.

It sits in the canvas's bottom-right corner and shares the canvas's scene (no copy of the
items). Clicking or dragging in it centres the canvas there. Hidden while the whole graph
is visible anyway.
"""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QFrame, QGraphicsView

from app.views.graph_canvas import content_bounds

__all__ = ["Minimap"]

SIZE = (180, 110)


class Minimap(QGraphicsView):
    """An overview of ``canvas``'s scene (see module docstring)."""

    def __init__(self, canvas: QGraphicsView):
        super().__init__(canvas)
        self._canvas = canvas
        self.setScene(canvas.scene())
        self.setFixedSize(*SIZE)
        self.setFrameShape(QFrame.Shape.Box)
        self.setInteractive(False)
        self.setRenderHints(QPainter.RenderHint.Antialiasing)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setToolTip("The whole graph; click or drag to move the view")

    def visible_area(self) -> QRectF:
        """The canvas's visible scene rectangle (what the outline shows)."""
        return self._canvas.mapToScene(self._canvas.viewport().rect()).boundingRect()

    def refresh(self) -> None:
        """Fit the graph, place the minimap in the corner, show it only when it helps."""
        scene = self.scene()
        if scene is None or not shiboken6.isValid(scene):
            return  # the window is being torn down
        bounds = content_bounds(scene)
        parent = self._canvas.viewport()
        self.move(parent.width() - SIZE[0] - 8, parent.height() - SIZE[1] - 8)
        whole = self.visible_area().contains(bounds)
        self.setVisible(not bounds.isEmpty() and not whole)
        if self.isVisible():
            self.fitInView(bounds.adjusted(-20, -20, 20, 20), Qt.AspectRatioMode.KeepAspectRatio)
            self.viewport().update()

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:  # noqa: N802
        pen = QPen(QColor("#e69f00"), 2)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(self.visible_area())

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._canvas.auto_fit = False
        self._canvas.centerOn(self.mapToScene(event.position().toPoint()))

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._canvas.centerOn(self.mapToScene(event.position().toPoint()))
