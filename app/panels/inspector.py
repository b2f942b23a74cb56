"""The inspector: edit the selected node (id, op, kind, memory, workspace, costs) or edge.

With nothing selected it shows the graph's name (editable), summarises the graph and says how to
edit it. Values are refreshed in
place while the same item stays selected, so tabbing from field to field keeps the focus.
Listens to ``graph_changed``, ``selection_changed`` and ``edge_selection_changed``; every change
is an undo command pushed through ``document.edit``.
"""

from __future__ import annotations

import html
import math

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QDoubleValidator, QValidator
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.commands import (
    DeleteCommand,
    RenameNodeCommand,
    SetEdgeTransferCommand,
    SetGraphNameCommand,
    SetNodePropertyCommand,
)
from app.document import Document
from app.panels.node_facts import properties, residency
from app.widgets import SizeEdit
from solver.document.graph import NODE_KINDS, Graph
from solver.document.units import format_ms, format_size
from solver.optimize.bounds import no_remat_peak

__all__ = ["InspectorPanel"]


class _OptionalMsValidator(QDoubleValidator):
    """Milliseconds, or nothing. QDoubleValidator calls an empty field "intermediate", and
    QLineEdit then never emits ``editingFinished`` for it: clearing a cost would show "cannot
    run" while the graph kept the old cost. Here empty is a value (no cost, no override)."""

    def validate(self, text: str, pos: int):
        if not text.strip():
            return QValidator.State.Acceptable, text, pos
        return super().validate(text, pos)


def _ms_edit() -> QLineEdit:
    edit = QLineEdit()
    validator = _OptionalMsValidator(0.0, 1e12, 6, edit)
    validator.setNotation(QDoubleValidator.Notation.StandardNotation)
    edit.setValidator(validator)
    return edit


def _ms_text(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


class _NodePage(QWidget):
    def __init__(self, document: Document):
        super().__init__()
        self._document = document
        self.node_id: str | None = None
        self._devices: tuple[str, ...] = ()
        self.title = QLabel()
        self.id_edit = QLineEdit()
        self.id_edit.setToolTip("The node's id; edges and backward nodes follow a rename")
        self.op_edit = QLineEdit()
        self.kind_box = QComboBox()
        self.kind_box.addItems(NODE_KINDS)
        self.memory_edit = SizeEdit()
        self.memory_edit.setToolTip("Bytes of the node's output, kept while it is resident")
        self.workspace_edit = SizeEdit()
        self.workspace_edit.setToolTip(
            "Bytes the node needs only while it runs (intermediates freed when it ends): "
            "counted on its device during each computation, never kept or copied"
        )
        self.cost_edits: dict[str, QLineEdit] = {}
        self.links_label = QLabel()
        self.links_label.setWordWrap(True)
        self.properties_label = QLabel()
        """Shape, dtype, bytes, FLOPs, module path, ATen ops, costs (what the import says)."""
        self.properties_label.setWordWrap(True)
        self.properties_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.residency_label = QLabel()
        """Where and why the tensor is resident in the schedule on display (no hover needed)."""
        self.residency_label.setWordWrap(True)
        self.residency_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.delete_button = QPushButton("Delete node")
        self._form = QFormLayout()
        self._form.addRow("Id", self.id_edit)
        self._form.addRow("Op", self.op_edit)
        self._form.addRow("Kind", self.kind_box)
        self._form.addRow("Output", self.memory_edit)
        self._form.addRow("Workspace", self.workspace_edit)
        self._costs = QFormLayout()
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.properties_label)
        layout.addWidget(self.residency_label)
        layout.addLayout(self._form)
        heading = QLabel("<b>Cost per device</b> (ms; empty = cannot run there)")
        heading.setWordWrap(True)
        layout.addWidget(heading)
        layout.addLayout(self._costs)
        layout.addWidget(self.links_label)
        layout.addWidget(self.delete_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addStretch(1)
        self.id_edit.editingFinished.connect(self._on_id_edit_finished)
        self.op_edit.editingFinished.connect(self._on_op_edit_finished)
        self.kind_box.activated.connect(self._on_kind_box_activated)
        self.memory_edit.size_committed.connect(self._on_memory_edit_committed)
        self.workspace_edit.size_committed.connect(self._on_workspace_edit_committed)
        self.delete_button.clicked.connect(self._on_delete_button_clicked)

    def show_node(self, graph: Graph, node_id: str) -> None:
        node = graph.node(node_id)
        self.node_id = node_id
        devices = tuple(d.name for d in graph.devices)
        if devices != self._devices:
            self._rebuild_costs(devices)
        self.title.setText(f"<b>{html.escape(node_id)}</b> &nbsp;node")
        with QSignalBlocker(self.id_edit):
            self.id_edit.setText(node_id)
        with QSignalBlocker(self.op_edit):
            self.op_edit.setText(node.op)
        with QSignalBlocker(self.kind_box):
            self.kind_box.setCurrentText(node.kind)
        self.memory_edit.set_value(node.memory)
        self.workspace_edit.set_value(node.workspace)
        for name, edit in self.cost_edits.items():
            with QSignalBlocker(edit):
                edit.setText(_ms_text(node.cost.get(name)))
        k = graph.index[node_id]
        inputs = ", ".join(graph.nodes[i].id for i in graph.inputs[k]) or "none"
        users = ", ".join(graph.nodes[i].id for i in graph.users[k]) or "none"
        self.links_label.setText(
            f"<span style='color:palette(mid)'>inputs: {html.escape(inputs)}<br>"
            f"used by: {html.escape(users)}</span>"
        )
        self.properties_label.setText(
            "<table cellspacing=0 cellpadding=1>"
            + "".join(
                f"<tr><td style='color:palette(mid)'>{html.escape(k)}&nbsp;</td>"
                f"<td>{html.escape(v)}</td></tr>"
                for k, v in properties(graph, node_id)
            )
            + "</table>"
        )
        self.show_residency(graph)

    def show_residency(self, graph: Graph) -> None:
        """Where and why the node's tensor is resident in the schedule on display."""
        document = self._document
        timeline = document.timeline
        if self.node_id is None or timeline is None or self.node_id not in graph.index:
            self.residency_label.hide()
            return
        op = document.cursor_op
        lines = residency(graph, timeline, self.node_id, op.start if op is not None else None)
        self.residency_label.setText(
            "<b>Why resident</b><br>" + "<br>".join(html.escape(line) for line in lines)
        )
        self.residency_label.show()

    @property
    def residency_text(self) -> str:
        """The "why resident" lines (plain text), or ``""`` when hidden."""
        if self.residency_label.isHidden():
            return ""
        return html.unescape(self.residency_label.text().replace("<br>", "\n"))

    def _rebuild_costs(self, devices: tuple[str, ...]) -> None:
        while self._costs.rowCount():
            self._costs.removeRow(0)
        self.cost_edits = {}
        for name in devices:
            edit = _ms_edit()
            edit.setPlaceholderText("cannot run")
            edit.editingFinished.connect(self._on_cost_edit_finished)
            self._costs.addRow(name, edit)
            self.cost_edits[name] = edit
        self._devices = devices

    def _on_id_edit_finished(self) -> None:
        graph, new = self._document.graph, self.id_edit.text().strip()
        if graph is None or self.node_id not in graph.index or new == self.node_id:
            return
        if not self._document.edit(RenameNodeCommand, self.node_id, new):
            self.show_node(graph, self.node_id)  # refused: show the id still in force

    def _on_op_edit_finished(self) -> None:
        self._set("op", self.op_edit.text().strip())

    def _on_kind_box_activated(self, _: int) -> None:
        self._set("kind", self.kind_box.currentText())

    def _on_memory_edit_committed(self, memory: int) -> None:
        self._set("memory", memory)

    def _on_workspace_edit_committed(self, workspace: int) -> None:
        self._set("workspace", workspace)

    def _on_cost_edit_finished(self) -> None:
        cost = {}
        for name, edit in self.cost_edits.items():
            text = edit.text().strip()
            if text:
                cost[name] = float(text)
        self._set("cost", cost)

    def _set(self, field: str, value: object) -> None:
        graph = self._document.graph
        if graph is None or self.node_id not in graph.index:
            return
        current = getattr(graph.node(self.node_id), field)
        if (dict(current) if field == "cost" else current) == value:
            return
        if not self._document.edit(SetNodePropertyCommand, self.node_id, field, value):
            self.show_node(graph, self.node_id)  # refused: show the values still in force

    def _on_delete_button_clicked(self) -> None:
        if self.node_id is not None:
            self._document.edit(DeleteCommand, (self.node_id,))


class _EdgePage(QWidget):
    def __init__(self, document: Document):
        super().__init__()
        self._document = document
        self.key: tuple[str, str] | None = None
        self._pairs: tuple[str, ...] = ()
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.transfer_edits: dict[str, QLineEdit] = {}
        self._form = QFormLayout()
        self.delete_button = QPushButton("Delete edge")
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        hint = QLabel("<b>Transfer time</b> (ms; empty = link model)")
        hint.setWordWrap(True)
        layout.addWidget(hint)
        layout.addLayout(self._form)
        layout.addWidget(self.delete_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addStretch(1)
        self.delete_button.clicked.connect(self._on_delete_button_clicked)

    def show_edge(self, graph: Graph, key: tuple[str, str]) -> None:
        self.key = key
        source, target = key
        pairs = tuple(f"{a.name}->{b.name}" for a in graph.devices for b in graph.devices if a != b)
        if pairs != self._pairs:
            while self._form.rowCount():
                self._form.removeRow(0)
            self.transfer_edits = {}
            for pair in pairs:
                edit = _ms_edit()
                edit.editingFinished.connect(self._on_transfer_edit_finished)
                self._form.addRow(pair.replace("->", " \u2192 "), edit)
                self.transfer_edits[pair] = edit
            self._pairs = pairs
        edge = next(e for e in graph.edges if (e.source, e.target) == key)
        size = format_size(graph.node(source).memory)
        self.title.setText(
            f"<b>{html.escape(source)} \u2192 {html.escape(target)}</b> &nbsp;edge ({size})"
        )
        for pair, edit in self.transfer_edits.items():
            a, b = pair.split("->")
            model = (
                graph.transfer_ms(source, target, a, b) if pair not in edge.transfer_ms else None
            )
            with QSignalBlocker(edit):
                edit.setText(_ms_text(edge.transfer_ms.get(pair)))
                edit.setPlaceholderText(
                    "override"
                    if model is None
                    else f"{format_ms(model)} (link)"
                    if math.isfinite(model)
                    else "not allowed (no link)"
                )

    def _on_transfer_edit_finished(self) -> None:
        graph = self._document.graph
        if graph is None or self.key is None:
            return
        values = {
            pair: float(edit.text()) for pair, edit in self.transfer_edits.items() if edit.text()
        }
        edge = next(e for e in graph.edges if (e.source, e.target) == self.key)
        if values != dict(edge.transfer_ms):
            self._document.edit(SetEdgeTransferCommand, *self.key, values)

    def _on_delete_button_clicked(self) -> None:
        if self.key is not None:
            self._document.edit(DeleteCommand, (), (self.key,))


class _GraphPage(QWidget):
    def __init__(self, document: Document):
        super().__init__()
        self._document = document
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("graph name")
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        form = QFormLayout()
        form.addRow("Name", self.name_edit)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.summary)
        layout.addStretch(1)
        self.name_edit.editingFinished.connect(self._on_name_edit_finished)

    def show_graph(self, graph: Graph | None) -> None:
        with QSignalBlocker(self.name_edit):
            self.name_edit.setText(graph.name if graph is not None else "")
        self.name_edit.setEnabled(graph is not None)
        self.summary.setText(_summary(graph))

    def _on_name_edit_finished(self) -> None:
        graph, name = self._document.graph, self.name_edit.text().strip()
        if graph is None or name == graph.name:
            return
        if not self._document.edit(SetGraphNameCommand, name):
            self.show_graph(graph)  # refused: show the name still in force


class InspectorPanel(QScrollArea):
    """Node, edge or graph properties of the current selection (see module docstring)."""

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.node_page = _NodePage(document)
        self.edge_page = _EdgePage(document)
        self.graph_page = _GraphPage(document)
        self.summary = self.graph_page.summary
        self.stack = QStackedWidget()
        for page in (self.graph_page, self.node_page, self.edge_page):
            self.stack.addWidget(page)
        self.notice = QLabel()
        """The last refused edit's reason, inline (cleared when the selection changes)."""
        self.notice.setWordWrap(True)
        self.notice.setTextFormat(Qt.TextFormat.PlainText)
        self.notice.setStyleSheet("color: #d62728; padding: 4px;")
        self.notice.hide()
        body = QWidget()
        column = QVBoxLayout(body)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.notice)
        column.addWidget(self.stack, 1)
        self.setWidget(body)
        document.edit_refused.connect(self._on_document_edit_refused)
        document.selection_changed.connect(self._on_document_selection_moved)
        document.edge_selection_changed.connect(self._on_document_selection_moved)
        document.graph_changed.connect(self._on_document_changed)
        document.memory_limits_changed.connect(self._on_document_changed)
        document.selection_changed.connect(self._on_document_changed)
        document.edge_selection_changed.connect(self._on_document_changed)
        document.result_changed.connect(self._on_document_step_changed)
        document.cursor_changed.connect(self._on_document_step_changed)
        self._on_document_changed()

    def _on_document_step_changed(self) -> None:
        graph = self._document.graph
        if self.stack.currentWidget() is self.node_page and graph is not None:
            self.node_page.show_residency(graph)

    def _on_document_edit_refused(self, message: str) -> None:
        self.notice.setText(f"Not changed: {message}")
        self.notice.show()

    def _on_document_selection_moved(self) -> None:
        self.notice.hide()

    def _on_document_changed(self) -> None:
        graph = self._document.graph
        node, edge = self._document.selection, self._document.selected_edge
        if graph is not None and node in graph.index:
            self.node_page.show_node(graph, node)
            self.stack.setCurrentWidget(self.node_page)
        elif (
            graph is not None
            and edge is not None
            and any((e.source, e.target) == edge for e in graph.edges)
        ):
            self.edge_page.show_edge(graph, edge)
            self.stack.setCurrentWidget(self.edge_page)
        else:
            self.graph_page.show_graph(graph)
            self.stack.setCurrentWidget(self.graph_page)


def _summary(graph: Graph | None) -> str:
    if graph is None:
        return "No graph open."
    kinds = {k: sum(n.kind == k for n in graph.nodes) for k in NODE_KINDS}
    counts = ", ".join(f"{v} {k}" for k, v in kinds.items() if v)
    peak = format_size(no_remat_peak(graph)) if graph.nodes else "\u2014"
    return (
        f"{graph.n} nodes ({counts or 'none'}), {len(graph.edges)} edges, "
        f"{graph.num_devices} devices<br>no-remat peak: {peak}<br><br>"
        "<span style='color:palette(mid)'>Click a node or an edge to edit it. Double-click the "
        "graph background to add a node; drag from one node onto another to connect them.</span>"
    )
