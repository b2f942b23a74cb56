"""The zoomable canvas of the graph editor: it turns mouse gestures into requests.

Press on a node and release on the same node: a click (select). Drag from a node onto another:
connect. Drag the background: pan; wheel: zoom; double-click the background: add a node. The
canvas never edits anything itself; it calls its :class:`~app.views.graph_view.GraphView`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QApplication, QGraphicsLineItem, QGraphicsView

from app.theme import colors_for
from app.views.graph_items import EdgeItem, NodeItem

if TYPE_CHECKING:
    from app.views.graph_view import GraphView

__all__ = ["GraphCanvas", "MAX_FIT_SCALE"]

MAX_FIT_SCALE = 1.5
"""Fit never magnifies beyond 150 %: a three-node graph should not fill the screen."""


class GraphCanvas(QGraphicsView):
    """The zoomable scene; turns mouse gestures into calls on its :class:`GraphView`."""

    moved = Signal()
    """The visible area changed (scroll, zoom, fit, resize): the minimap follows."""

    def __init__(self, view: GraphView):
        super().__init__(view)
        self._view = view
        self._press: tuple[str | None, QPointF] | None = None
        self._connect_line: QGraphicsLineItem | None = None
        self._drop: NodeItem | None = None
        self.auto_fit = True
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    # ----- zoom ---------------------------------------------------------------------------------
    def wheelEvent(self, event) -> None:  # noqa: N802 - Qt override
        steps = event.angleDelta().y() / 120
        self.zoom(1.15**steps)

    def zoom(self, factor: float) -> None:
        scale = self.transform().m11() * factor
        if 0.03 <= scale <= 4.0:
            self.auto_fit = False
            self.scale(factor, factor)
            self.moved.emit()

    def scrollContentsBy(self, dx: int, dy: int) -> None:  # noqa: N802 - Qt override
        super().scrollContentsBy(dx, dy)
        self.moved.emit()

    def fit(self) -> None:
        """Show the whole graph (not larger than 150 %) and keep fitting on resize."""
        bounds = self.scene().itemsBoundingRect().adjusted(-24, -24, 24, 24)
        if bounds.isEmpty():
            return
        self.fitInView(bounds, Qt.AspectRatioMode.KeepAspectRatio)
        if self.transform().m11() > MAX_FIT_SCALE:
            self.resetTransform()
            self.scale(MAX_FIT_SCALE, MAX_FIT_SCALE)
            self.centerOn(bounds.center())
        self.auto_fit = True
        self.moved.emit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if self.auto_fit:
            self.fit()
        self.moved.emit()

    # ----- mouse --------------------------------------------------------------------------------
    def _node_at(self, pos) -> NodeItem | None:
        for item in self.items(pos):
            if isinstance(item, NodeItem):
                return item
        return None

    def _edge_at(self, pos) -> EdgeItem | None:
        for item in self.items(pos):
            if isinstance(item, EdgeItem):
                return item
        return None

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.button() != Qt.MouseButton.LeftButton:
            super().mousePressEvent(event)
            return
        node = self._node_at(event.position().toPoint())
        self._press = (node.node_id if node else None, event.position())
        if node is None and self._edge_at(event.position().toPoint()) is None:
            self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
            self.auto_fit = False
            super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 - Qt override
        press = self._press
        if press is None or press[0] is None:
            super().mouseMoveEvent(event)
            return
        moved = (event.position() - press[1]).manhattanLength()
        if self._connect_line is None and moved < QApplication.startDragDistance():
            return
        source = self._view.nodes[press[0]]
        end = self.mapToScene(event.position().toPoint())
        if self._connect_line is None:
            pen = QPen(QColor(colors_for(self).transfer), 1.6, Qt.PenStyle.DashLine)
            pen.setCosmetic(True)
            self._connect_line = self.scene().addLine(0, 0, 0, 0, pen)
            self._connect_line.setZValue(5)
        self._connect_line.setLine(source.pos().x(), source.pos().y(), end.x(), end.y())
        target = self._node_at(event.position().toPoint())
        target = target if target is not source else None
        if target is not self._drop:
            if self._drop is not None:
                self._drop.set_drop_target(False)
            if target is not None:
                target.set_drop_target(True)
            self._drop = target

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 - Qt override
        press, self._press = self._press, None
        if event.button() != Qt.MouseButton.LeftButton or press is None:
            super().mouseReleaseEvent(event)
            return
        moved = (event.position() - press[1]).manhattanLength()
        if self._connect_line is not None:
            self.scene().removeItem(self._connect_line)
            self._connect_line = None
            drop, self._drop = self._drop, None
            if drop is not None:
                drop.set_drop_target(False)
                self._view.request_connect(press[0], drop.node_id)
            return
        if press[0] is not None:
            self._view.click_node(press[0])
            return
        super().mouseReleaseEvent(event)
        self.setDragMode(QGraphicsView.DragMode.NoDrag)
        if moved < QApplication.startDragDistance():
            edge = self._edge_at(event.position().toPoint())
            self._view.click_edge(edge.key if edge else None)

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802 - Qt override
        point = event.position().toPoint()
        if self._node_at(point) is None:
            self.auto_fit = False  # the new node stays under the mouse, not re-fitted away
            self._view.request_add_node(self.mapToScene(point))

    def contextMenuEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._view.show_context_menu(
            self._node_at(event.pos()), self._edge_at(event.pos()), event.globalPos()
        )

    # ----- overlay ------------------------------------------------------------------------------
    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:  # noqa: N802
        painter.save()
        painter.resetTransform()
        self._view.paint_overlay(painter, self.viewport().rect())
        painter.restore()
