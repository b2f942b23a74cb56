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

import shiboken6
from PySide6.QtCore import QPointF, QRectF, QSignalBlocker, Qt, QTimer
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

from app.collector import long_lived
from app.commands import AddNodeCommand, ConnectCommand, DeleteCommand
from app.document import Document
from app.theme import FollowsTheme, colors_for
from app.views.graph_canvas import GraphCanvas
from app.views.graph_hierarchy import GRAD, Folded, Hierarchy, fold, hierarchy, initial_expansion
from app.views.graph_items import (
    MAX_HEIGHT,
    MIN_HEIGHT,
    NODE_WIDTH,
    PLAIN_PIXELS,
    STATUS_LABELS,
    EdgeItem,
    NodeItem,
    status_colour,
)
from app.views.graph_layout import (
    Placement,
    Spacing,
    layout_graph,
    resolution_levels,
    scene_positions,
    wrap_count,
)
from app.views.graph_minimap import Minimap
from app.views.graph_overview import OverviewItem
from solver.document.graph import Graph
from solver.document.units import format_size
from solver.editing.edits import next_node_id

__all__ = ["GraphView", "step_residency"]

logger = logging.getLogger(__name__)

COLLAPSE_FROM = 100
"""Graphs with more nodes than this open folded by module (``app.views.graph_hierarchy``)."""
OVERVIEW_FROM = 300
"""Graphs with more boxes than this are drawn as one overview item when zoomed out."""
COLUMN_SPACING = NODE_WIDTH + 52
ROW_SPACING = MAX_HEIGHT + 34
SPACING = Spacing(COLUMN_SPACING, ROW_SPACING, line_gap=60.0, level=ROW_SPACING * 0.8)
VERTICAL_SPACING = Spacing(MAX_HEIGHT + 60, COLUMN_SPACING, line_gap=80.0, level=COLUMN_SPACING)


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
        for tensor in curve.during(op)[1]:
            residency.setdefault(tensor, {})[device] = "resident"
    for transfer in timeline.transfers:
        if transfer.stage == op.stage and transfer.consumer == op.node:
            residency.setdefault(transfer.tensor, {})[transfer.target] = "transferred"
    residency.setdefault(op.node, {})[op.device] = "computing"
    return residency


def _within(module: str, parent: str) -> bool:
    """Whether ``module`` is ``parent`` or lies inside it (``layer3.1`` in ``layer3``)."""
    return module == parent or module.startswith((parent + ".", parent + "_"))


def _box_tip(node, members: list[str]) -> str:
    """A folded module's tooltip: what it holds, and how to open it."""
    extra = node.extra or {}
    shown = ", ".join(members[:12]) + (
        f" and {len(members) - 12} more" if len(members) > 12 else ""
    )
    return (
        f"<b>{html.escape(str(extra.get('module', node.id)))}</b> \u00b7 {len(members)} "
        f"operations, {format_size(int(extra.get('total_bytes', 0)))} of outputs"
        f"<br>{html.escape(shown)}<br><i>click to open it in place</i>"
    )


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
        self.collapse_action = QAction("Fold modules", self, checkable=True, checked=False)
        self.collapse_action.setToolTip(
            "Draw each module (layer3, layer3.1, ...) as one box; click a box to open it in "
            "place, right-click a node to fold its module again"
        )
        self.collapse_action.toggled.connect(self._on_collapse_action_toggled)
        self.full_window_action = QAction("Full window", self, checkable=True)
        self.full_window_action.setShortcut("Ctrl+Shift+G")
        self.full_window_action.setToolTip(
            "The graph alone in the window (Ctrl+Shift+G again, or Esc, to come back)"
        )
        self.search = QLineEdit(placeholderText="Find node\u2026", clearButtonEnabled=True)
        self.search.setMaximumWidth(170)
        # at 1280x720 the title-bar toolbar squeezed the field to "Fi…"; the actions that do
        # not fit go to the toolbar's extension menu instead
        self.search.setMinimumWidth(
            self.search.fontMetrics().horizontalAdvance(self.search.placeholderText()) + 24
        )
        self.search.setToolTip("Select the first node whose name contains the text (Enter: next)")
        self.search.textEdited.connect(self.find)
        self.search.returnPressed.connect(self.find_next)
        self.toolbar.addAction(self.fit_action)
        self.toolbar.addAction(self.fold_action)
        self.toolbar.addAction(self.vertical_action)
        self.toolbar.addAction(self.collapse_action)
        self.toolbar.addAction(self.full_window_action)
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
        self._overview = OverviewItem()
        self._detail_shown = True
        self.minimap = Minimap(self.canvas, self._render_overview)
        self.canvas.moved.connect(self._on_canvas_moved)
        self._matches: list[str] = []
        self._members: dict[str, list[str]] = {}
        """Drawn box id -> the graph's node ids in it (one, unless a folded module)."""
        self._modules: dict[str, str] = {}
        """Drawn box id of a folded module -> the module (``layer3.1``, ``layer3.1.grad``)."""
        self._expanded: set[str] = set()
        """The modules drawn open."""
        self._hierarchy: Hierarchy | None = None
        self._placement: Placement | None = None
        self._levels: dict[str, int] | None = None
        self._lines = 1
        self._backward_of: dict[str, str] = {}
        self._relayout_timer = QTimer(self, singleShot=True, interval=120)
        self._relayout_timer.timeout.connect(self._on_relayout_timer_timeout)
        self.canvas.resized.connect(self._relayout_timer.start)
        self.canvas.node_lookup = self._node_under
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
        """Whether a drawn box is a folded module of several nodes."""
        return drawn_id in self._modules

    def members(self, drawn_id: str) -> list[str]:
        """The graph's nodes drawn as box ``drawn_id``."""
        return list(self._members.get(drawn_id, [drawn_id]))

    def module_of(self, drawn_id: str) -> str | None:
        """The module a folded box stands for (``None`` for a node drawn alone)."""
        return self._modules.get(drawn_id)

    def expand(self, drawn_id: str) -> None:
        """Open a folded module in place: its box gives way to its children, the rest of the
        drawing keeps its boxes, and the view stays on the spot."""
        module = self._modules.get(drawn_id)
        if module is None:
            return
        anchor = self.nodes[drawn_id].pos() if drawn_id in self.nodes else None
        self._expanded.add(module.removesuffix(GRAD))
        first = self._members[drawn_id][0]
        self._rebuild(fit=False)
        self._keep_on_screen(first, anchor)

    def fold_module_of(self, node_id: str) -> bool:
        """Fold again the innermost open module holding drawn node ``node_id``."""
        path = self._hierarchy.paths.get(node_id, ()) if self._hierarchy else ()
        open_ = [m for m in path if m in self._expanded]
        if not open_:
            return False
        innermost = open_[-1]
        self._expanded = {m for m in self._expanded if not _within(m, innermost)}
        self._rebuild(fit=False)
        self._keep_on_screen(node_id, None)
        return True

    def _keep_on_screen(self, node_id: str, anchor: QPointF | None) -> None:
        drawn = next((d for d, ids in self._members.items() if node_id in ids), node_id)
        item = self.nodes.get(drawn)
        if item is None:
            return
        if self.canvas.auto_fit:
            self.canvas.fit()
        else:
            self.canvas.centerOn(item if anchor is None else item.pos())

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
            menu.addAction(f"Open {self.module_of(node.node_id)}").triggered.connect(
                lambda: self.expand(node.node_id)
            )
        if node is not None:
            path = (
                self._hierarchy.paths.get(self.members(node.node_id)[0], ())
                if (self._hierarchy)
                else ()
            )
            open_ = [m for m in path if m in self._expanded]
            if open_:
                menu.addAction(f"Fold {open_[-1]}").triggered.connect(
                    lambda: self.fold_module_of(self.members(node.node_id)[0])
                )
        if node is not None and not self.is_block(node.node_id):
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

    def _on_collapse_action_toggled(self, on: bool) -> None:
        graph = self._document.graph
        self._expanded.clear()
        if on and graph is not None:
            self._hierarchy = hierarchy(graph)
            self._expanded = initial_expansion(graph, self._hierarchy, self._box_target())
        self._rebuild(fit=True)

    def _on_document_graph_changed(self) -> None:
        graph = self._document.graph
        old = set(self.nodes)
        new = set(graph.index) if graph else set()
        another_graph = len(old & new) * 2 < max(len(new), 1)
        if another_graph:
            self.search.clear()  # a search on another graph's names
            self._matches = []
        self._hierarchy = hierarchy(graph) if graph is not None else None
        if another_graph and len(new) > 1:
            self._pinned.clear()  # places chosen on another graph mean nothing here
            self._expanded.clear()
            big = len(new) > COLLAPSE_FROM
            with QSignalBlocker(self.collapse_action):  # big networks open folded
                self.collapse_action.setChecked(big)
            if big:
                self._expanded = initial_expansion(graph, self._hierarchy, self._box_target())
        self._rebuild(fit=another_graph and not self._pinned or self.canvas.auto_fit)

    def _rebuild(self, fit: bool) -> None:
        # an item's tooltip source is its own bound method: a cycle, which reference counting
        # cannot free and the collector, kept off the items (app.collector), never sees
        for item in (*self.nodes.values(), *self.edges.values()):
            item.tip_source = None
        self.scene.clear()
        self.nodes, self.edges = {}, {}
        self._overview = OverviewItem()
        self._overview.setVisible(False)
        self.scene.addItem(self._overview)
        self._detail_shown = True  # no items yet: nothing hidden
        graph = self._document.graph
        self._residency = step_residency(self._document)
        if graph is not None and graph.nodes:
            with long_lived():  # 13,000 items: see app.collector
                self._build_items(graph)
        self._placed()
        self._on_document_selection_changed()
        self._update_legend()
        if fit:
            self.canvas.fit()
        self._update_detail_level()
        self.canvas.viewport().update()

    def _placed(self) -> None:
        """The items have their places: bounds for fitting and the minimap, the overview."""
        self._overview.prepare(self.nodes, self.edges, colors_for(self))
        bounds = self._overview.boundingRect()
        self.scene.content_bounds = bounds  # graph_canvas.content_bounds: once per build
        self.scene.setSceneRect(bounds.adjusted(-400, -300, 400, 300))
        self.minimap.render_scene()

    def _render_overview(self, painter: QPainter, target: QRectF, source: QRectF) -> None:
        """Paint the whole graph as the overview (for the minimap: a pixmap made once per
        layout, not the thousands of items repainted at every pan)."""
        detail, overview = self._detail_shown, self._overview.isVisible()
        self._set_detail(False)
        self.scene.render(painter, target, source)
        if detail:
            self._set_detail(True)
        self._overview.setVisible(overview)

    def _on_canvas_moved(self) -> None:
        self._update_detail_level()
        if shiboken6.isValid(self.minimap):
            self.minimap.refresh()

    def _update_detail_level(self) -> None:
        """Draw the node and edge items, or (a big graph too small on screen for them to say
        anything) the one overview item (``app.views.graph_overview``)."""
        small = NODE_WIDTH * self.canvas.transform().m11() < PLAIN_PIXELS
        overview = small and len(self.nodes) > OVERVIEW_FROM
        if overview == self._overview.isVisible() and overview != self._detail_shown:
            return
        self._set_detail(not overview)

    def _set_detail(self, on: bool) -> None:
        """Show the node and edge items (``on``) or the overview instead."""
        self._overview.setVisible(not on)
        if on == self._detail_shown:
            return  # 13,000 calls on a 5,000-node graph
        self._detail_shown = on
        for item in self.nodes.values():
            item.setVisible(on)
        for item in self.edges.values():
            item.setVisible(on)

    @property
    def is_overview(self) -> bool:
        """Whether the graph is drawn as the overview (too small for its boxes)."""
        return self._overview.isVisible()

    def _node_under(self, point: QPointF) -> NodeItem | None:
        """The node item at scene ``point`` while the overview draws (its items are hidden)."""
        if not self._overview.isVisible():
            return None
        found = self._overview.node_at(point)
        return self.nodes.get(found) if found is not None else None

    def _build_items(self, source: Graph) -> None:
        colors = colors_for(self)
        if self.collapse_action.isChecked():
            folded = fold(source, self._expanded, self._hierarchy)
            self._expanded = set(folded.expanded)  # opened to keep it acyclic, too
        else:
            folded = Folded(source, {n.id: [n.id] for n in source.nodes}, {}, frozenset())
        graph = folded.graph
        self._members, self._modules = folded.members, folded.module
        self._placement = layout_graph(graph, fold=self.fold_action.isChecked())
        self._levels = resolution_levels(graph)
        self._backward_of = {n.id: n.of for n in graph.nodes if n.kind == "backward" and n.of}
        self._lines = self._wrap_count()
        positions = self._positions()
        biggest = max((n.memory for n in graph.nodes), default=0) or 1
        devices = tuple(d.name for d in graph.devices)
        op_level = source.meta.get("level") == "op"
        # A big graph opens drawn as its overview: its items are made hidden, which also
        # spares the scene their first repaint (``_update_detail_level`` shows them).
        shown = len(graph.nodes) <= OVERVIEW_FROM
        self._detail_shown = shown
        places: dict[str, tuple[float, float]] = {}
        for node in graph.nodes:
            height = MIN_HEIGHT + (MAX_HEIGHT - MIN_HEIGHT) * math.sqrt(node.memory / biggest)
            item = NodeItem(node, height, colors, op_level)
            pinned = self._pinned.get(node.id)
            place = (pinned.x(), pinned.y()) if pinned is not None else positions[node.id]
            places[node.id] = place
            item.setPos(QPointF(*place))
            if self._residency is not None:
                item.set_residency(devices, self._residency.get(node.id, {}))
            if self.is_block(node.id):
                item.tip_source = functools.partial(_box_tip, node, self._members[node.id])
            else:
                item.tip_source = functools.partial(item.describe, graph)
                item.on_hover = self._document.set_hovered
            item.setVisible(shown)
            self.scene.addItem(item)  # top-level: the scene's index finds the visible ones
            self.nodes[node.id] = item
        for edge in graph.edges:
            ends = (*places[edge.source], *places[edge.target])
            item = EdgeItem(self.nodes[edge.source], self.nodes[edge.target], colors, ends)
            item.tip_source = functools.partial(item.describe, graph)
            item.setVisible(shown)
            self.scene.addItem(item)
            self.edges[item.key] = item

    def _box_target(self) -> int:
        """How many boxes a big graph opens with: about what the canvas shows readably
        (a short dock fewer, the full-window graph more), within 16..80."""
        size = self.canvas.viewport().size()
        readable = size.width() * size.height() / (COLUMN_SPACING * ROW_SPACING) * 1.5
        return int(min(max(readable, 16), 80))

    def _spacing(self) -> Spacing:
        return VERTICAL_SPACING if self.vertical_action.isChecked() else SPACING

    def _wrap_count(self) -> int:
        """Lines to wrap the drawing into for the canvas's shape (one for U-Net's U)."""
        if self._placement is None or self._levels is not None:
            return 1
        viewport = self.canvas.viewport().size()
        if viewport.width() < 50 or viewport.height() < 30:
            return self._lines  # not laid out yet
        aspect = viewport.width() / viewport.height()
        if self.vertical_action.isChecked():
            aspect = 1 / aspect  # lines side by side: the drawing's height runs along them
        return wrap_count(self._placement, self._spacing(), aspect)

    def _positions(self) -> dict[str, tuple[float, float]]:
        return scene_positions(
            self._placement,
            self._spacing(),
            self._lines,
            self.vertical_action.isChecked(),
            self._levels,
            self._backward_of,
        )

    @property
    def lines(self) -> int:
        """How many lines the drawing is wrapped into (see :func:`wrap_count`)."""
        return self._lines

    def _on_relayout_timer_timeout(self) -> None:
        """The canvas changed shape: wrap the drawing again if another count fits better."""
        lines = self._wrap_count()
        if lines == self._lines or not self.nodes:
            return
        self._lines = lines
        positions = self._positions()
        for node_id, item in self.nodes.items():
            if node_id not in self._pinned:
                item.setPos(QPointF(*positions[node_id]))
        for edge in self.edges.values():
            edge.update_path()
        self._placed()
        if self.canvas.auto_fit:
            self.canvas.fit()

    def _on_document_selection_changed(self) -> None:
        selected = self._document.selection
        edge = self._document.selected_edge
        for node_id, item in self.nodes.items():
            item.set_selected(selected is not None and selected in self._members.get(node_id, ()))
        for key, item in self.edges.items():
            item.set_emphasis(2 if key == edge else 1 if selected in key else 0)
        self._mark_overview()

    def _mark_overview(self) -> None:
        """Tell the overview what to ring (selection, hover) and whether chips show."""
        marked = {d for d, item in self.nodes.items() if item.is_selected or item.is_hovered}
        self._overview.marked = marked
        self._overview.stepping = self._residency is not None
        if self._overview.isVisible():
            self._overview.update()

    def _on_document_hover_changed(self) -> None:
        hovered = self._document.hovered
        for node_id, item in self.nodes.items():
            item.set_hovered(node_id == hovered)
        self._mark_overview()

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
            self._placed()
            if self.canvas.auto_fit:
                self.canvas.fit()
            self.canvas.viewport().update()  # otherwise each changed node repaints itself
        self._mark_overview()

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
