"""The devices panel: a memory-limit slider per device, the links between them, add/remove/rename.

Each row shows where the activation budget sits between the two landmarks of docs/model.md §4:
below ``lower_bound(graph, device)`` that device cannot run all its nodes, at
``no_remat_peak(graph)`` nothing needs recomputing. A slider drag previews memory limits live
and is one undo entry (pushed on release). Listens to ``graph_changed`` (rebuild) and
``memory_limits_changed`` (update values).
"""

from __future__ import annotations

import math

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.commands import (
    AddDeviceCommand,
    RemoveDeviceCommand,
    RenameDeviceCommand,
    SetLinkCommand,
    SetMemoryLimitCommand,
)
from app.document import Document
from app.landmarks import Landmarks, compute_landmarks
from app.widgets import MarkedSlider, SizeEdit, exact_size_text
from solver.document.graph import Device, Graph
from solver.document.units import format_size, parse_bandwidth

__all__ = ["DevicesPanel", "DeviceRow", "SLIDER_STEPS", "below_bound_note", "landmarks_text"]

SLIDER_STEPS = 1000
LOWER_COLOUR = "#d62728"
PEAK_COLOUR = "#2ca02c"


class DeviceRow(QFrame):
    """Name, kind, memory-limit slider, exact field and percent-of-peak for one device."""

    def __init__(self, document: Document, device: Device, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName(f"device_row_{device.name}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._document = document
        self.device_name = device.name
        self._press_memory: int | None = None
        self._scale = 1
        self.name_edit = QLineEdit(device.name)
        self.name_edit.setToolTip("Rename the device (costs, links and methods follow)")
        # the kind beside the name only when it says something the name does not ("cpu cpu")
        self.kind_label = QLabel(device.kind if device.kind != device.name else "")
        self.kind_label.setStyleSheet("color: palette(mid);")
        self.kind_label.setVisible(device.kind != device.name)
        self.remove_button = QToolButton()
        self.remove_button.setText("\u2715")
        self.remove_button.setToolTip(f"Remove {device.name}")
        self.slider = MarkedSlider()
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.setPageStep(SLIDER_STEPS // 20)
        self.size_edit = SizeEdit()
        self.size_edit.setFixedWidth(110)
        self.percent_label = QLabel()
        self.landmarks_label = QLabel()
        self.landmarks_label.setStyleSheet("color: palette(mid); font-size: 8pt;")
        self.landmarks_label.setWordWrap(True)  # never wider than the dock
        self.note_label = QLabel()
        """Why a budget below the lower bound is there (a teaching graph does it on purpose)."""
        self.note_label.setWordWrap(True)
        self.note_label.setStyleSheet("font-size: 8pt;")
        self.note_label.hide()
        self._layout()
        self.name_edit.editingFinished.connect(self._on_name_edit_finished)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.slider.sliderPressed.connect(self._on_slider_pressed)
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.slider.sliderReleased.connect(self._on_slider_released)
        self.size_edit.size_committed.connect(self._on_size_edit_committed)

    def _layout(self) -> None:
        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(2)
        head = QHBoxLayout()
        self.name_edit.setMaximumWidth(100)
        head.addWidget(self.name_edit)
        head.addWidget(self.kind_label)
        head.addStretch(1)
        head.addWidget(self.percent_label)
        head.addWidget(self.remove_button)
        grid.addLayout(head, 0, 0, 1, 2)
        grid.addWidget(self.slider, 1, 0)
        grid.addWidget(self.size_edit, 1, 1)
        grid.addWidget(self.landmarks_label, 2, 0, 1, 2)
        grid.addWidget(self.note_label, 3, 0, 1, 2)
        grid.setColumnStretch(0, 1)

    # ----- document -> widgets ----------------------------------------------------------------
    def update_from(self, graph: Graph) -> None:
        """Show the device's memory, the landmarks and the percent of the peak."""
        device = graph.device(self.device_name)
        marks = self._document.landmarks() if graph is self._document.graph else None
        marks = marks or compute_landmarks(graph)
        low = marks.lower[self.device_name] if graph.nodes else 0
        peak = marks.peak if graph.nodes else 0
        if peak > 0:
            self._scale = int(device.fixed_memory + 1.25 * max(peak, low))
        else:  # no nodes yet: nothing to compare with, so span twice the device memory
            self._scale = max(2 * device.memory_limit, 1)
        self.slider.set_markers(
            [] if peak <= 0 else [
                (self._to_slider(device.fixed_memory + low), LOWER_COLOUR,
                 f"lower bound {format_size(low)}: below it {device.name} cannot run all nodes"),
                (self._to_slider(device.fixed_memory + peak), PEAK_COLOUR,
                 f"no-remat peak {format_size(peak)}: at or above it nothing is recomputed"),
            ]
        )  # fmt: skip
        with QSignalBlocker(self.slider):
            self.slider.setValue(self._to_slider(device.memory_limit))
        self.size_edit.set_percent_base(device.fixed_memory, peak)
        self.size_edit.set_value(device.memory_limit)
        self.landmarks_label.setVisible(peak > 0)
        self.landmarks_label.setText(
            landmarks_text(device.activation_budget, device.fixed_memory, low, peak)
        )
        stranded = bool(marks.unplaceable(graph)) if peak > 0 else False
        too_big = len(marks.too_big_for(graph, self.device_name)) if peak > 0 else 0
        self.percent_label.setText(_percent_text(device.activation_budget, peak, too_big, stranded))
        note = below_bound_note(graph, self.device_name, marks) if peak > 0 else ""
        self.percent_label.setToolTip(note)
        self.note_label.setText(note)
        self.note_label.setStyleSheet(
            f"font-size: 8pt; color: {LOWER_COLOUR};" if stranded else "font-size: 8pt;"
        )
        self.note_label.setVisible(bool(note))
        self.size_edit.setToolTip(
            f"Device memory, in total: {device.memory_limit:,} bytes"
            + (
                f" ({format_size(device.fixed_memory)} fixed + "
                f"{format_size(device.activation_budget)} for activations)"
                if device.fixed_memory
                else ""
            )
            + ". Type a size with a unit (GiB, MiB, GB, MB...)."
        )

    def _to_slider(self, num_bytes: int) -> int:
        return min(SLIDER_STEPS, round(SLIDER_STEPS * num_bytes / self._scale))

    def _from_slider(self, value: int) -> int:
        """Bytes for a slider position, snapped to a round step (1 MB, 10 MB...) so that a
        dragged budget reads well in the exact field."""
        step = 10 ** max(int(math.log10(max(self._scale / SLIDER_STEPS, 1))), 0)
        return round(self._scale * value / SLIDER_STEPS / step) * step

    # ----- widgets -> document ----------------------------------------------------------------
    def _on_slider_pressed(self) -> None:
        self._press_memory = self._document.memory_limits.get(self.device_name)

    def _on_slider_value_changed(self, value: int) -> None:
        memory = self._from_slider(value)
        if self.slider.isSliderDown():
            self._document.set_memory_limits(
                {self.device_name: memory}
            )  # live preview, no undo yet
        else:
            self._document.edit(SetMemoryLimitCommand, self.device_name, memory)

    def _on_slider_released(self) -> None:
        old, self._press_memory = self._press_memory, None
        memory = self._from_slider(self.slider.value())
        if old is not None and old != memory:
            self._document.edit(SetMemoryLimitCommand, self.device_name, memory, old)

    def _on_size_edit_committed(self, memory: int) -> None:
        self._document.edit(SetMemoryLimitCommand, self.device_name, memory)

    def _on_name_edit_finished(self) -> None:
        new = self.name_edit.text().strip()
        if new != self.device_name and not self._document.edit(
            RenameDeviceCommand, self.device_name, new
        ):
            self.name_edit.setText(self.device_name)

    def _on_remove_button_clicked(self) -> None:
        self._document.edit(RemoveDeviceCommand, self.device_name)


def below_bound_note(graph: Graph, device: str, marks: Landmarks | None = None) -> str:
    """Why a device below its lower bound is not an error when another device can help.

    Below the lower bound the device alone cannot run every node (one node's inputs, output
    and fixed needs do not fit); a heterogeneous schedule runs those nodes elsewhere. The
    bundled teaching graph starts there on purpose, so the window says so, in neutral words:
    red is kept for budgets under which no schedule exists at all.
    """
    marks = marks or compute_landmarks(graph)
    budget = graph.device(device).activation_budget
    too_big = marks.too_big_for(graph, device)
    if not too_big:
        return ""
    names = ", ".join(too_big[:3]) + (f" and {len(too_big) - 3} more" if len(too_big) > 3 else "")
    need = int(max(marks.requirements[graph.index[n]] for n in too_big))
    alone = (
        f"{device} alone cannot run every node: {names} "
        f"need{'s' if len(too_big) == 1 else ''} up to {format_size(need)} of activations at "
        f"once and {device} has {format_size(budget)}."
    )
    stranded = marks.unplaceable(graph)
    if not stranded:
        elsewhere = _helpers(graph, marks, too_big)
        return (
            f"{alone} That is allowed: XEngine runs "
            f"{'it' if len(too_big) == 1 else 'them'} on {', '.join(elsewhere)} and keeps the "
            f"rest on {device}. Single-device methods on {device} are infeasible."
        )
    return (
        f"{alone} No schedule exists: {', '.join(stranded[:3])} fit no device that can run "
        "them; raise a memory limit to solve."
    )


def _helpers(graph: Graph, marks: Landmarks, nodes: list[str]) -> list[str]:
    """Devices whose budgets fit some of ``nodes`` (where a heterogeneous schedule puts them)."""
    found = []
    for d, dev in enumerate(graph.devices):
        for name in nodes:
            k = graph.index[name]
            fits = marks.requirements[k] <= dev.activation_budget
            if fits and not math.isnan(graph.cost[d, k]) and dev.name not in found:
                found.append(dev.name)
    return found


def landmarks_text(budget: int, fixed: int, low: int, peak: int) -> str:
    """The line under a slider: what the size field counts, and the two landmarks.

    The field and the slider count *device memory* (activations plus fixed memory); the
    landmarks and the percentage count *activations*, as the solver does (docs/model.md §4).
    Saying both in one line, in one unit family, keeps "2.34 GiB" next to "1.5 GiB" honest.
    """
    head = (
        f"activations {format_size(budget)} + fixed {format_size(fixed)}"
        if fixed
        else f"activations {format_size(budget)}"
    )
    return (
        f"{head} &nbsp;<span style='color:{LOWER_COLOUR}'>\u2502</span> lower bound "
        f"{format_size(low)} &nbsp;<span style='color:{PEAK_COLOUR}'>\u2502</span> "
        f"no-remat peak {format_size(peak)}"
    )


def _percent_text(budget: int, peak: int, too_big: int, stranded: bool) -> str:
    """Always the percentage of the no-remat peak (as ``gpu=60%`` on the command line), then
    what it means. Red means the user's problem cannot be solved (``stranded``: some node fits
    no device); below this device's own lower bound with help at hand is a neutral fact (the
    row's note and the tooltip say why)."""
    if peak <= 0:
        return ""
    if budget >= 1000 * peak:  # an imported model's 64 GiB host read "3230133 % of peak"
        return "<b>over 1000\u00d7</b> the peak · no remat"
    if budget >= 10 * peak:
        return f"<b>{budget / peak:.0f}\u00d7</b> the peak · no remat"
    text = f"<b>{100 * budget / peak:.0f} %</b> of peak"
    if stranded:
        return f"{text} · <span style='color:{LOWER_COLOUR}'>no schedule exists</span>"
    if too_big:
        nodes = "1 node runs" if too_big == 1 else f"{too_big} nodes run"
        return f"{text} · {nodes} elsewhere"
    if budget >= peak:
        return f"{text} · no remat"
    return text


class DevicesPanel(QScrollArea):
    """All device rows, an Add button and the link table.

    Listens to ``document.graph_changed`` and ``document.memory_limits_changed``; edits go through
    undo commands (``SetMemoryLimitCommand``, ``RenameDeviceCommand``, ``SetLinkCommand``...).
    """

    rows_rebuilt = Signal()
    """The device rows were made anew (another graph's devices): their height changed."""

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self.rows: dict[str, DeviceRow] = {}
        self._shape: tuple = ()
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        body = QWidget()
        self._rows_box = QVBoxLayout()
        self._rows_box.setSpacing(6)
        self.add_button = QPushButton("Add device")
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.links_table = QTableWidget(0, 3)
        self.links_table.setHorizontalHeaderLabels(["Link", "Bandwidth", "Latency (ms)"])
        self.links_table.verticalHeader().hide()
        self.links_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.links_table.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.links_table.itemChanged.connect(self._on_links_table_item_changed)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(self._rows_box)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.add_button)
        layout.addLayout(buttons)
        layout.addWidget(QLabel("<b>Links</b> (double-click to edit)"))
        layout.addWidget(self.links_table)
        layout.addStretch(1)
        self.setWidget(body)
        document.graph_changed.connect(self._on_document_graph_changed)
        document.memory_limits_changed.connect(self._on_document_memory_limits_changed)
        self._on_document_graph_changed()

    def rows_height(self) -> int:
        """Height that shows every device row and the Add button without scrolling (the
        links table below may scroll): what the window gives this panel on a short screen."""
        layout = self.widget().layout()
        margins = layout.contentsMargins()
        rows = [row.sizeHint().height() for row in self.rows.values()]
        spacing = self._rows_box.spacing() * max(len(rows) - 1, 0) + layout.spacing()
        add = self.add_button.sizeHint().height()
        # to just below the Add button: a few pixels more showed the top half of "Links"
        return margins.top() + sum(rows) + spacing + add + margins.bottom()

    def _on_document_graph_changed(self) -> None:
        graph = self._document.graph
        shape = tuple((d.name, d.kind) for d in graph.devices) if graph else ()
        if shape != self._shape:
            self._rebuild_rows(graph)
            self._shape = shape
            self.rows_rebuilt.emit()
        self._fill_links(graph)
        self._on_document_memory_limits_changed()
        self.add_button.setEnabled(graph is not None)

    def _rebuild_rows(self, graph: Graph | None) -> None:
        for row in self.rows.values():
            self._rows_box.removeWidget(row)
            row.deleteLater()
        self.rows = {}
        for device in graph.devices if graph else ():
            row = DeviceRow(self._document, device)
            self._rows_box.addWidget(row)
            self.rows[device.name] = row

    def _on_document_memory_limits_changed(self) -> None:
        graph = self._document.graph
        if graph is None:
            return
        for row in self.rows.values():
            row.update_from(graph)

    def _fill_links(self, graph: Graph | None) -> None:
        links = graph.links if graph else ()
        with QSignalBlocker(self.links_table):
            self.links_table.setRowCount(len(links))
            for r, link in enumerate(links):
                name = QTableWidgetItem(f"{link.source} \u2192 {link.target}")
                name.setFlags(name.flags() & ~Qt.ItemFlag.ItemIsEditable)
                name.setData(Qt.ItemDataRole.UserRole, (link.source, link.target))
                self.links_table.setItem(r, 0, name)
                self.links_table.setItem(r, 1, QTableWidgetItem(_bandwidth_text(link.bandwidth)))
                self.links_table.setItem(r, 2, QTableWidgetItem(f"{link.latency_ms:g}"))
        self.links_table.setFixedHeight(
            self.links_table.horizontalHeader().height()
            + sum(self.links_table.rowHeight(r) for r in range(len(links)))
            + 4
        )

    def _on_links_table_item_changed(self, item: QTableWidgetItem) -> None:
        source, target = self.links_table.item(item.row(), 0).data(Qt.ItemDataRole.UserRole)
        try:
            bandwidth = parse_bandwidth(self.links_table.item(item.row(), 1).text().strip())
            latency = float(self.links_table.item(item.row(), 2).text())
            if not (math.isfinite(latency) and latency >= 0):
                raise ValueError(f"latency {latency} must be a number of ms >= 0")
        except ValueError as exc:
            self._document.edit_refused.emit(f"link {source} \u2192 {target}: {exc}")
            self._fill_links(self._document.graph)
            return
        if not self._document.edit(SetLinkCommand, source, target, bandwidth, latency):
            self._fill_links(self._document.graph)

    def _on_add_button_clicked(self) -> None:
        graph = self._document.graph
        if graph is None:
            return
        i = graph.num_devices + 1
        while f"dev{i}" in graph.device_index:
            i += 1
        self._document.edit(AddDeviceCommand, f"dev{i}")


def _bandwidth_text(bandwidth: float) -> str:
    if bandwidth == int(bandwidth):
        return f"{exact_size_text(int(bandwidth))}/s"
    return f"{bandwidth:g}"
