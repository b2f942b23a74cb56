"""The zoomable canvas of the graph editor: it turns mouse gestures into request signals.

Press on a node and release on the same node: a click (select). Drag from a node onto another:
connect. Drag the background: pan; wheel: zoom; double-click the background: add a node. The
canvas never edits anything and knows nothing of its owner: like NodeGraphQt's viewer, it emits
a signal per request (``node_clicked``, ``connect_requested``, ...) and the owner
(:class:`~app.views.graph_view.GraphView`) connects the ones it serves.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QApplication,
    QGraphicsLineItem,
    QGraphicsScene,
    QGraphicsView,
    QWidget,
)

from app.theme import colors_for
from app.views.graph_items import EdgeItem, NodeItem

__all__ = ["content_bounds", "GraphCanvas", "MAX_FIT_SCALE"]

MAX_FIT_SCALE = 1.5
"""Fit never magnifies beyond 150 %: a three-node graph should not fill the screen."""


def content_bounds(scene: QGraphicsScene) -> QRectF:
    """The bounds of the scene's items, as the graph view recorded them when it built them
    (``scene.content_bounds``); ``itemsBoundingRect`` walks every item (36 ms on a
    2,500-node graph) and fitting, the minimap and every pan asked for it."""
    known = getattr(scene, "content_bounds", None)
    return QRectF(known) if known is not None else scene.itemsBoundingRect()


class GraphCanvas(QGraphicsView):
    """The zoomable scene; turns mouse gestures into request signals (see module docstring).

    ``overlay`` (set by the owner) paints over the scene in viewport coordinates, e.g. a legend.
    """

    moved = Signal()
    """The visible area changed (scroll, zoom, fit, resize): the minimap follows."""
    resized = Signal()
    """The canvas changed size (the owner may wrap its drawing to the new shape)."""
    node_clicked = Signal(str)
    """A node (or collapsed block) was clicked: its drawn id."""
    edge_clicked = Signal(object)
    """The background was clicked: the ``(source, target)`` of the edge there, or ``None``."""
    connect_requested = Signal(str, str)
    """A drag from one node was dropped on another: ``(source, target)``."""
    add_node_requested = Signal(QPointF)
    """The background was double-clicked at this scene position."""
    context_menu_requested = Signal(object, object, QPoint)
    """A context menu is wanted: the node item or ``None``, the edge item or ``None``, and the
    global position."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.overlay: Callable[[QPainter, QRect], None] | None = None
        self.node_lookup: Callable[[QPointF], NodeItem | None] | None = None
        """The owner's node at a scene point when its items are hidden (an overview)."""
        self._press: tuple[NodeItem | None, QPointF] | None = None
        self._connect_line: QGraphicsLineItem | None = None
        self._drop: NodeItem | None = None
        self.auto_fit = True
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        # every item sets the pen, brush, opacity and hints it paints with: saving and
        # restoring the painter around each of thousands of items is time for nothing
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    # ----- zoom ---------------------------------------------------------------------------------
    def wheelEvent(self, event) -> None:
        steps = event.angleDelta().y() / 120
        self.zoom(1.15**steps)

    def zoom(self, factor: float) -> None:
        scale = self.transform().m11() * factor
        if 0.03 <= scale <= 4.0:
            self.auto_fit = False
            self.scale(factor, factor)
            self.moved.emit()

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        super().scrollContentsBy(dx, dy)
        self.moved.emit()

    def fit(self) -> None:
        """Show the whole graph (not larger than 150 %) and keep fitting on resize."""
        bounds = content_bounds(self.scene()).adjusted(-24, -24, 24, 24)
        if bounds.isEmpty():
            return
        # one "moved" at the end: fitInView scrolls before it scales, and a big graph's view
        # showed its 13,000 items at the old scale and hid them again at the new one
        with QSignalBlocker(self):
            self.fitInView(bounds, Qt.AspectRatioMode.KeepAspectRatio)
            if self.transform().m11() > MAX_FIT_SCALE:
                self.resetTransform()
                self.scale(MAX_FIT_SCALE, MAX_FIT_SCALE)
                self.centerOn(bounds.center())
        self.auto_fit = True
        self.moved.emit()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.auto_fit:
            self.fit()
        self.moved.emit()
        self.resized.emit()

    # ----- mouse --------------------------------------------------------------------------------
    def _node_at(self, pos) -> NodeItem | None:
        for item in self.items(pos):
            if isinstance(item, NodeItem):
                return item
        if self.node_lookup is not None:
            return self.node_lookup(self.mapToScene(pos))
        return None

    def _edge_at(self, pos) -> EdgeItem | None:
        for item in self.items(pos):
            if isinstance(item, EdgeItem):
                return item
        return None

    def mousePressEvent(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            super().mousePressEvent(event)
            return
        node = self._node_at(event.position().toPoint())
        self._press = (node, event.position())
        if node is None and self._edge_at(event.position().toPoint()) is None:
            self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
            self.auto_fit = False
            super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:
        press = self._press
        if press is None or press[0] is None:
            super().mouseMoveEvent(event)
            return
        moved = (event.position() - press[1]).manhattanLength()
        if self._connect_line is None and moved < QApplication.startDragDistance():
            return
        source = press[0]
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

    def mouseReleaseEvent(self, event) -> None:
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
                self.connect_requested.emit(press[0].node_id, drop.node_id)
            return
        if press[0] is not None:
            self.node_clicked.emit(press[0].node_id)
            return
        super().mouseReleaseEvent(event)
        self.setDragMode(QGraphicsView.DragMode.NoDrag)
        if moved < QApplication.startDragDistance():
            edge = self._edge_at(event.position().toPoint())
            self.edge_clicked.emit(edge.key if edge else None)

    def mouseDoubleClickEvent(self, event) -> None:
        point = event.position().toPoint()
        if self._node_at(point) is None:
            self.auto_fit = False  # the new node stays under the mouse, not re-fitted away
            self.add_node_requested.emit(self.mapToScene(point))

    def contextMenuEvent(self, event) -> None:
        self.context_menu_requested.emit(
            self._node_at(event.pos()), self._edge_at(event.pos()), event.globalPos()
        )

    # ----- overlay ------------------------------------------------------------------------------
    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        if self.overlay is None:
            return
        painter.save()
        painter.resetTransform()
        self.overlay(painter, self.viewport().rect())
        painter.restore()
