"""The graph view and editor: a layered left-to-right drawing of the DAG that can be edited.

Click a node to select it, drag from one node onto another to connect them, double-click the
background to add a node, right-click for delete; wheel zooms, dragging the background pans.
Every edit is an undo command pushed through ``document.edit`` (a refused edit, e.g. a cycle,
comes back as ``document.edit_refused``). During a step-through (``document.cursor`` set) each
node shows where its tensor lives, from ``solver.execution.explain.state_at``.

Listens to ``graph_changed`` (re-layout), ``selection_changed``/``edge_selection_changed``
(highlight), ``result_changed``/``cursor_changed`` (step colours). Writes ``set_selection``,
``set_selected_edge`` and edit commands only.
"""

from __future__ import annotations

import functools
import html
import logging
import math

from PySide6.QtCore import QPointF, QSignalBlocker, Qt
from PySide6.QtGui import QAction, QColor, QFont, QPainter
from PySide6.QtWidgets import (
    QGraphicsScene,
    QLabel,
    QLineEdit,
    QMenu,
    QSizePolicy,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.commands import AddNodeCommand, ConnectCommand, DeleteCommand
from app.document import Document
from app.theme import FollowsTheme, colors_for
from app.views.graph_blocks import block_of, collapse
from app.views.graph_canvas import GraphCanvas
from app.views.graph_items import (
    MAX_HEIGHT,
    MIN_HEIGHT,
    NODE_WIDTH,
    STATUS_LABELS,
    EdgeItem,
    NodeItem,
    status_colour,
)
from app.views.graph_layout import layout_graph
from app.views.graph_minimap import Minimap
from solver.document.graph import Graph
from solver.editing.edits import next_node_id

__all__ = ["GraphView", "step_residency"]

logger = logging.getLogger(__name__)

COLLAPSE_FROM = 100
"""Graphs with more nodes than this open with their blocks collapsed (ResNet-50: 145 -> 73)."""
COARSE_FROM = 48
"""Collapsed graphs with more boxes than this collapse by stage instead (ResNet-50: 73 -> 20)."""
MIN_COARSE = 8
"""...unless that leaves fewer boxes than this (one box per network says nothing)."""
COLUMN_SPACING = NODE_WIDTH + 52
ROW_SPACING = MAX_HEIGHT + 34


def step_residency(document: Document) -> dict[str, dict[str, str]] | None:
    """Where each tensor lives at the step cursor (``None`` when not stepping).

    Uses ``solver.execution.explain.state_at``; if that module is missing or fails, falls back to
    the simulator's memory curves (resident/computing/copied, without "freed").
    """
    result, cursor, graph = document.result, document.cursor, document.graph
    if cursor is None or graph is None or result is None or result.timeline is None:
        return None
    if result.schedule is None or not result.timeline.ops:
        return None
    try:
        from solver.execution.explain import state_at
    except ImportError:
        logger.info("solver.execution.explain is not available; step colours from memory curves")
        return _residency_from_curves(document)
    try:
        state = state_at(graph, result.schedule, result.timeline, cursor)
    except (KeyError, IndexError, ValueError) as exc:
        logger.warning("state_at failed (%s); step colours from memory curves", exc)
        return _residency_from_curves(document)
    return {node: dict(devices) for node, devices in state.residency.items()}


def _residency_from_curves(document: Document) -> dict[str, dict[str, str]]:
    timeline = document.timeline
    op = timeline.ops[document.cursor]
    residency: dict[str, dict[str, str]] = {}
    for device, curve in timeline.memory.items():
        for tensor in curve.at(op.start)[1]:
            residency.setdefault(tensor, {})[device] = "resident"
    for transfer in timeline.transfers:
        if transfer.stage == op.stage and transfer.consumer == op.node:
            residency.setdefault(transfer.tensor, {})[transfer.target] = "transferred"
    residency.setdefault(op.node, {})[op.device] = "computing"
    return residency


class GraphView(FollowsTheme, QWidget):
    """The graph drawing with a toolbar (fit, zoom, fold), over a :class:`GraphCanvas`."""

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self.nodes: dict[str, NodeItem] = {}
        self.edges: dict[tuple[str, str], EdgeItem] = {}
        self._residency: dict[str, dict[str, str]] | None = None
        self._pinned: dict[str, QPointF] = {}
        """Nodes placed by hand (double-click), drawn there instead of at their layout place."""
        self.scene = QGraphicsScene(self)
        self.canvas = GraphCanvas(self)
        self.canvas.setScene(self.scene)
        self.canvas.overlay = self.paint_overlay
        self.canvas.node_clicked.connect(self.click_node)
        self.canvas.edge_clicked.connect(self.click_edge)
        self.canvas.connect_requested.connect(self.request_connect)
        self.canvas.add_node_requested.connect(self.request_add_node)
        self.canvas.context_menu_requested.connect(self.show_context_menu)
        self.toolbar = QToolBar()
        self.toolbar.setIconSize(self.toolbar.iconSize() * 0.8)
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.fit_action = QAction("Fit", self, shortcut="F", toolTip="Show the whole graph (F)")
        self.fit_action.triggered.connect(self.canvas.fit)
        self.fold_action = QAction("Fold backward", self, checkable=True, checked=True)
        self.fold_action.setToolTip("Draw each backward node under its forward node")
        self.fold_action.toggled.connect(self._on_fold_action_toggled)
        self.vertical_action = QAction("Top to bottom", self, checkable=True, checked=False)
        self.vertical_action.setToolTip(
            "Draw the layers from top to bottom instead of left to right"
        )
        self.vertical_action.toggled.connect(self._on_fold_action_toggled)
        self.collapse_action = QAction("Collapse blocks", self, checkable=True, checked=False)
        self.collapse_action.setToolTip(
            "Draw each module block (e.g. layer1_0) as one box; click a box to expand it"
        )
        self.collapse_action.toggled.connect(self._on_collapse_action_toggled)
        self.search = QLineEdit(placeholderText="Find node\u2026", clearButtonEnabled=True)
        self.search.setMaximumWidth(170)
        self.search.setToolTip("Select the first node whose name contains the text (Enter: next)")
        self.search.textEdited.connect(self.find)
        self.search.returnPressed.connect(self.find_next)
        self.toolbar.addAction(self.fit_action)
        self.toolbar.addAction(self.fold_action)
        self.toolbar.addAction(self.vertical_action)
        self.toolbar.addAction(self.collapse_action)
        self.toolbar.addWidget(self.search)
        self.legend = QLabel()
        self.legend.setContentsMargins(8, 0, 8, 0)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self._legend_spacer = self.toolbar.addWidget(spacer)
        self.toolbar.addWidget(self.legend)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.canvas)
        self.minimap = Minimap(self.canvas)
        self.canvas.moved.connect(self.minimap.refresh)
        self._matches: list[str] = []
        self._members: dict[str, list[str]] = {}
        """Drawn box id -> the graph's node ids in it (one, unless a collapsed block)."""
        self._expanded: set[str] = set()
        self._coarse = False
        document.graph_changed.connect(self._on_document_graph_changed)
        document.selection_changed.connect(self._on_document_selection_changed)
        document.edge_selection_changed.connect(self._on_document_selection_changed)
        document.result_changed.connect(self._on_document_step_changed)
        document.cursor_changed.connect(self._on_document_step_changed)
        document.hover_changed.connect(self._on_document_hover_changed)
        self._on_document_graph_changed()

    def find(self, text: str) -> list[str]:
        """Node ids containing ``text`` (case-insensitive); selects and shows the first."""
        graph = self._document.graph
        needle = text.strip().lower()
        self._matches = (
            [n.id for n in graph.nodes if needle in n.id.lower()] if graph and needle else []
        )
        if self._matches:
            self._show_node(self._matches[0])
        return list(self._matches)

    def find_next(self) -> str | None:
        """The next match of the search (Enter), wrapping around."""
        if not self._matches:
            return None
        selected = self._document.selection
        k = self._matches.index(selected) + 1 if selected in self._matches else 0
        node = self._matches[k % len(self._matches)]
        self._show_node(node)
        return node

    def _show_node(self, node_id: str) -> None:
        self._document.set_selection(node_id)
        drawn = next((d for d, ids in self._members.items() if node_id in ids), node_id)
        item = self.nodes.get(drawn)  # the node, or the collapsed block holding it
        if item is not None:
            self.canvas.auto_fit = False
            self.canvas.centerOn(item)

    def add_edit_actions(self, actions: list[QAction]) -> None:
        """Put the window's edit actions (add node, delete...) in the view's toolbar."""
        self.toolbar.insertSeparator(self._legend_spacer)
        self.toolbar.insertActions(self._legend_spacer, actions)

    # ----- requests from the canvas -------------------------------------------------------------
    def click_node(self, node_id: str) -> None:
        """Select a node; a collapsed block expands instead."""
        if self.is_block(node_id):
            self.expand(node_id)
            return
        self._document.set_selection(node_id)

    def click_edge(self, key: tuple[str, str] | None) -> None:
        if key is not None and (self.is_block(key[0]) or self.is_block(key[1])):
            return  # an edge between blocks stands for several edges: nothing to edit
        if key is None:
            self._document.set_selection(None)
        self._document.set_selected_edge(key)

    def request_connect(self, source: str, target: str) -> None:
        if not (self.is_block(source) or self.is_block(target)):
            self._document.edit(ConnectCommand, source, target)

    def is_block(self, drawn_id: str) -> bool:
        """Whether a drawn box is a collapsed block of several nodes."""
        return len(self._members.get(drawn_id, ())) > 1

    def members(self, drawn_id: str) -> list[str]:
        """The graph's nodes drawn as box ``drawn_id``."""
        return list(self._members.get(drawn_id, [drawn_id]))

    def expand(self, drawn_id: str) -> None:
        """Draw a collapsed block's nodes one by one."""
        graph = self._document.graph
        members = self._members.get(drawn_id, ())
        if graph is not None and members:
            self._expanded.add(block_of(graph, members[0], self._expanded, self._coarse))
            self._rebuild(fit=False)

    def request_add_node(self, at: QPointF | None = None) -> None:
        """Add a node; ``at`` (scene coordinates, a double-click) is where it is drawn."""
        graph = self._document.graph
        if graph is None:
            return
        if at is not None:
            # AddNodeCommand names the node next_node_id(graph): pin that name to the spot
            self._pinned[next_node_id(graph)] = QPointF(at)
        self._document.edit(AddNodeCommand)

    def node_position(self, node_id: str) -> QPointF:
        """Where ``node_id``'s item is drawn (scene coordinates of its centre)."""
        return self.nodes[node_id].pos()

    def show_context_menu(self, node: NodeItem | None, edge: EdgeItem | None, where) -> None:
        menu = QMenu(self)
        if node is not None and self.is_block(node.node_id):
            menu.addAction(f"Expand {node.node_id}").triggered.connect(
                lambda: self.expand(node.node_id)
            )
        elif node is not None:
            menu.addAction(f"Delete {node.node_id}").triggered.connect(
                lambda: self._document.edit(DeleteCommand, (node.node_id,))
            )
        elif edge is not None:
            label = f"Delete {edge.key[0]} \u2192 {edge.key[1]}"
            menu.addAction(label).triggered.connect(
                lambda: self._document.edit(DeleteCommand, (), (edge.key,))
            )
        else:
            menu.addAction("Add node").triggered.connect(self.request_add_node)
        menu.addAction(self.fit_action)
        menu.exec(where)

    # ----- document -> items --------------------------------------------------------------------
    def _on_fold_action_toggled(self, _: bool) -> None:
        self._rebuild(fit=True)

    def _on_collapse_action_toggled(self, _: bool) -> None:
        self._expanded.clear()
        self._rebuild(fit=True)

    def _on_document_graph_changed(self) -> None:
        graph = self._document.graph
        old = set(self.nodes)
        new = set(graph.index) if graph else set()
        another_graph = len(old & new) * 2 < max(len(new), 1)
        if another_graph:
            self.search.clear()  # a search on another graph's names
            self._matches = []
        if another_graph and len(new) > 1:
            self._pinned.clear()  # places chosen on another graph mean nothing here
            self._expanded.clear()
            with QSignalBlocker(self.collapse_action):  # big networks open collapsed
                self.collapse_action.setChecked(len(new) > COLLAPSE_FROM)
        self._rebuild(fit=another_graph and not self._pinned or self.canvas.auto_fit)

    def _rebuild(self, fit: bool) -> None:
        self.scene.clear()
        self.nodes, self.edges = {}, {}
        graph = self._document.graph
        self._residency = step_residency(self._document)
        if graph is not None and graph.nodes:
            self._build_items(graph)
        bounds = self.scene.itemsBoundingRect()
        self.scene.content_bounds = bounds  # graph_canvas.content_bounds: once per build
        self.scene.setSceneRect(bounds.adjusted(-400, -300, 400, 300))
        self._on_document_selection_changed()
        self._update_legend()
        if fit:
            self.canvas.fit()
        self.canvas.viewport().update()

    def _build_items(self, source: Graph) -> None:
        colors = colors_for(self)
        if self.collapse_action.isChecked():
            graph, self._members = collapse(source, self._expanded)
            # still too many boxes to read at Fit (ResNet-50: 73): one level up, by stage
            if graph.n > COARSE_FROM:
                coarse, members = collapse(source, self._expanded, coarse=True)
                self._coarse = MIN_COARSE <= coarse.n < graph.n  # MobileNetV2: 2 boxes, no
                if self._coarse:
                    graph, self._members = coarse, members
        else:
            graph, self._members = source, {n.id: [n.id] for n in source.nodes}
        placement = layout_graph(graph, fold=self.fold_action.isChecked())
        biggest = max((n.memory for n in graph.nodes), default=0) or 1
        devices = tuple(d.name for d in graph.devices)
        for node in graph.nodes:
            height = MIN_HEIGHT + (MAX_HEIGHT - MIN_HEIGHT) * math.sqrt(node.memory / biggest)
            item = NodeItem(node, height, colors)
            pinned = self._pinned.get(node.id)
            if pinned is not None:
                item.setPos(pinned)
            elif self.vertical_action.isChecked():  # layers run down, rows across
                item.setPos(
                    placement.row[node.id] * COLUMN_SPACING,
                    placement.column[node.id] * (MAX_HEIGHT + 60),
                )
            else:
                item.setPos(
                    placement.column[node.id] * COLUMN_SPACING,
                    placement.row[node.id] * ROW_SPACING,
                )
            if self._residency is not None:
                item.set_residency(devices, self._residency.get(node.id, {}))
            if self.is_block(node.id):
                names = ", ".join(self._members[node.id])
                item.setToolTip(f"<b>{html.escape(node.id)}</b><br>{html.escape(names)}"
                                "<br><i>click to expand</i>")  # fmt: skip
            else:
                item.tip_source = functools.partial(item.describe, graph)
                item.on_hover = self._document.set_hovered
            self.scene.addItem(item)
            self.nodes[node.id] = item
        for edge in graph.edges:
            item = EdgeItem(self.nodes[edge.source], self.nodes[edge.target], colors)
            item.tip_source = functools.partial(item.describe, graph)
            self.scene.addItem(item)
            self.edges[item.key] = item

    def _on_document_selection_changed(self) -> None:
        selected = self._document.selection
        edge = self._document.selected_edge
        for node_id, item in self.nodes.items():
            item.set_selected(selected is not None and selected in self._members.get(node_id, ()))
        for key, item in self.edges.items():
            item.set_emphasis(2 if key == edge else 1 if selected in key else 0)

    def _on_document_hover_changed(self) -> None:
        hovered = self._document.hovered
        for node_id, item in self.nodes.items():
            item.set_hovered(node_id == hovered)

    def _on_document_step_changed(self) -> None:
        graph = self._document.graph
        residency = step_residency(self._document)
        if residency is None and self._residency is None:
            return
        toggled = (residency is None) != (self._residency is None)
        self._residency = residency
        devices = tuple(d.name for d in graph.devices) if graph else ()
        for node_id, item in self.nodes.items():
            item.set_residency(devices, residency.get(node_id, {}) if residency else None)
        if toggled:  # the chips row came or went: boxes changed height, arrows move
            for item in self.edges.values():
                item.update_path()
            self._update_legend()
            if self.canvas.auto_fit:
                self.canvas.fit()
            self.canvas.viewport().update()  # otherwise each changed node repaints itself

    # ----- overlay and legend -------------------------------------------------------------------
    def paint_overlay(self, painter: QPainter, rect) -> None:
        """The empty-state hint, centred in the view."""
        graph = self._document.graph
        if graph is not None and graph.nodes:
            return
        font = QFont()
        font.setPointSizeF(9)
        painter.setFont(font)
        painter.setPen(QColor(colors_for(self).muted))
        text = (
            "No graph. Open one with File \u25b8 Open, or pick File \u25b8 Examples."
            if graph is None
            else "No nodes yet: double-click here to add a node, then drag from one node "
            "onto another to connect them."
        )
        painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap), text)

    def _update_legend(self) -> None:
        colors = colors_for(self)
        graph = self._document.graph
        present = {n.kind for n in graph.nodes} if graph else set()
        entries = [
            (colors.kinds[k], k) for k in ("forward", "loss", "backward", "other") if k in present
        ]
        if self._residency is not None:
            entries += [
                (status_colour(s, colors).name(), label) for s, label in STATUS_LABELS.items()
            ]
        self.legend.setText(
            "&nbsp;&nbsp;".join(
                f"<span style='color:{c}; font-size:11pt'>\u25a0</span>&nbsp;{label}"
                for c, label in entries
            )
        )

    def on_theme_changed(self) -> None:
        self._rebuild(fit=False)
