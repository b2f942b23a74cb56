"""The solver panel: method, backend and limits; Solve/Cancel; live incumbent/bound and log.

Settings are written to ``document.set_settings`` (and saved with the project); progress comes
from the :class:`~app.solving.SolveController` in batches of at most ten per second, so the plot
and the capped log are redrawn at most that often whatever CBC prints. Listens to
``graph_changed`` (device-specific methods), ``settings_changed``, ``result_changed`` and the
controller's ``started``/``progressed``/``finished``/``failed``/``running_changed``.
"""

from __future__ import annotations

import functools
import html
from dataclasses import replace

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QFontMetrics
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.panels.live_range import time_range, value_range
from app.panels.solve_report import readable_log_line, result_notes
from app.project import SolverSettings
from app.solving import SolveController, format_objective
from app.theme import FollowsTheme, colors_for
from app.views.gantt_text import is_offloading
from app.views.plotting import opaque_grid
from app.workers import SolveRequest
from solver.document.graph import Graph
from solver.document.units import format_size
from solver.optimize.backends.registry import BACKENDS, available_backends
from solver.optimize.intervals import MAX_RUNS
from solver.optimize.methods import SINGLE_DEVICE_METHODS, method_label
from solver.optimize.solve import SolveResult
from solver.status import SolveStatus

__all__ = ["SolverPanel", "method_choices", "LOG_MAX_LINES"]

LOG_MAX_LINES = 2000
"""The log keeps this many lines (QPlainTextEdit.setMaximumBlockCount)."""


def method_choices(graph: Graph | None) -> list[tuple[str, str]]:
    """``(label, solver.optimize.methods name)`` for every method the Solve button can run."""
    methods = ["xengine", "checkmate"]
    for name in SINGLE_DEVICE_METHODS:
        methods += [f"{name}:{device.name}" for device in (graph.devices if graph else ())]
    return [(method_label(method), method) for method in methods]


def _readable(lines: list[str]) -> list[str]:
    return [text for text in map(readable_log_line, lines) if text]


def status_text(result: SolveResult) -> str:
    """One line saying how a solve ended, e.g. ``optimal · 9.01667 ms · 1.2 s``."""
    parts = [result.status.value, format_objective(result.objective)]
    if is_offloading(result):
        parts.append("with offloading")
    if result.gap is not None and result.status is not SolveStatus.OPTIMAL:
        parts.append(f"gap {100 * result.gap:.2g} %")
    parts.append(f"{result.seconds:.1f} s")
    return " \u00b7 ".join(parts)


class SolverPanel(FollowsTheme, QWidget):
    """See module docstring."""

    needs_room = Signal()
    """The notes changed: the window may give the panel the height it now needs."""

    def __init__(
        self, document: Document, controller: SolveController, parent: QWidget | None = None
    ):
        super().__init__(parent)
        self._document = document
        self._controller = controller
        self._times: list[float] = []
        self._incumbents: list[float] = []
        self._bounds: list[float] = []
        self._solve_count = 0
        """Counts clears of the live plot, so a deferred end of the curves knows its solve."""
        self._build_items()
        document.graph_changed.connect(self._on_document_graph_changed)
        document.settings_changed.connect(self._on_document_settings_changed)
        document.result_changed.connect(self._on_document_result_changed)
        controller.started.connect(self._on_controller_started)
        controller.progressed.connect(self._on_controller_progressed)
        controller.finished.connect(self._on_controller_finished)
        controller.failed.connect(self._on_controller_failed)
        controller.running_changed.connect(self._on_controller_running_changed)
        self._on_document_graph_changed()
        self._on_controller_running_changed(False)

    def _build_items(self) -> None:
        self.method_box = QComboBox()
        self.backend_box = QComboBox()
        for backend in available_backends():
            self.backend_box.addItem(BACKENDS[backend].label, backend)
            index = self.backend_box.count() - 1
            self.backend_box.setItemData(index, BACKENDS[backend].description, Qt.ToolTipRole)
        self.time_limit_box = QDoubleSpinBox(decimals=0, minimum=1, maximum=86_400, suffix=" s")
        self.gap_box = QDoubleSpinBox(decimals=3, minimum=0, maximum=50, suffix=" %")
        self.gap_box.setSingleStep(0.1)
        self.auto_box = QCheckBox("Auto-solve")
        self.auto_box.setToolTip("Solve again whenever a memory limit settles")
        self.offload_box = QCheckBox("Allow offloading")
        self.offload_box.setToolTip(
            "XEngine may copy a tensor to another device at the end of a stage, keep it there "
            "as a checkpoint and read it back when needed (POET's paging), besides recomputing "
            "and moving operations. Off: the paper's model, unchanged. XEngine (all devices) "
            "only."
        )
        self.runs_box = QSpinBox(minimum=1, maximum=MAX_RUNS)
        self.runs_box.setToolTip(
            "Retention intervals (CP-SAT, and large graphs) consider at most this many "
            "computations of each node per device (C; solve --runs) at first, and more once "
            "CP-SAT has proven the best schedule under it. More searches wider, in a larger "
            "model; an answer proven with it is proven only under that restriction."
        )
        self.solve_button = QPushButton("Solve")
        self.solve_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel")
        self.status_label = QLabel("Not solved yet.")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.objective_label = QLabel(format_objective(None))
        self.plot = pg.PlotWidget()
        self.plot.setMinimumHeight(96)  # ticks, their title and a readable curve
        self.plot.setMaximumHeight(170)
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "solve time (s)")
        item.setLabel("left", "ms")
        for side in ("bottom", "left"):
            # no "(x0.001)" scale suffix: the label says the unit and the ticks are plain numbers
            item.getAxis(side).enableAutoSIPrefix(False)
        # a fixed width for up to six digits: grown to fit the first incumbent's ticks, the
        # axis laid the plot out and painted it a second time in the same event (a 5,000-op
        # solve's longest stall), and it jumped again whenever the values gained a digit
        digits = QFontMetrics(self.plot.font()).horizontalAdvance("000000")
        item.getAxis("left").setWidth(digits + 8)
        item.showGrid(x=True, y=True, alpha=0.25)
        for side in ("bottom", "left"):
            item.getAxis(side).setZValue(-150)  # the grid behind the curves, so it can be opaque
        opaque_grid(item)  # 7 ms a paint with translucent vertical lines
        # ranges set by live_range, in steps: auto range redrew both axes on every batch
        item.disableAutoRange()
        self._x_range: tuple[float, float] | None = None
        self._y_range: tuple[float, float] | None = None
        colors = colors_for(self)
        self.incumbent_curve = item.plot([], [], pen=colors.pen(colors.kinds["forward"], 2))
        self.bound_curve = item.plot([], [], pen=colors.pen(colors.muted, 1.5, dashed=True))
        # the legend sits above the plot, never over the curves it explains
        self.plot_legend = QLabel()
        self.plot_legend.setTextFormat(Qt.TextFormat.RichText)
        self._restyle_legend()
        self.log = QPlainTextEdit(readOnly=True)
        self.log.setMaximumBlockCount(LOG_MAX_LINES)
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setPointSizeF(max(font.pointSizeF() - 1.5, 7))
        self.log.setFont(font)
        self.log.setPlaceholderText("The solver's progress appears here.")
        self.raw_log_box = QCheckBox("Raw solver log")
        self.raw_log_box.setToolTip(
            "Show the solver's own log lines (CBC's MPS reader, LP iterations...) instead "
            "of the progress they report"
        )
        self.raw_log_box.toggled.connect(self._on_raw_log_toggled)
        self._raw_lines: list[str] = []
        self.notes_label = QLabel()
        """What the result means: gap, model size, an idle budget, what would help."""
        self.notes_label.setWordWrap(True)
        self.notes_label.setTextFormat(Qt.TextFormat.RichText)
        self.notes_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes_label.hide()
        form = QFormLayout()
        # method and solver, time limit and gap share a row each: at 1280x720 every row here
        # is a row the device sliders above or the live plot below do not get
        methods = QHBoxLayout()
        methods.addWidget(self.method_box, 3)
        methods.addWidget(QLabel("Solver"))
        methods.addWidget(self.backend_box, 2)
        form.addRow("Method", methods)
        limits = QHBoxLayout()
        limits.addWidget(self.time_limit_box, 1)
        limits.addWidget(QLabel("Gap"))
        limits.addWidget(self.gap_box, 1)
        form.addRow("Time limit", limits)
        options = QHBoxLayout()
        options.addWidget(self.offload_box)
        options.addWidget(self.auto_box)
        options.addStretch(1)
        runs_label = QLabel("Runs per node")
        runs_label.setToolTip(self.runs_box.toolTip())
        options.addWidget(runs_label)
        options.addWidget(self.runs_box)
        form.addRow(options)
        buttons = QHBoxLayout()
        buttons.addWidget(self.solve_button, 1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.objective_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.status_label)
        layout.addWidget(self.notes_label)
        # the live plot and the log take turns: both at once left the devices a single row
        progress = QWidget()
        progress_box = QVBoxLayout(progress)
        progress_box.setContentsMargins(0, 2, 0, 0)
        progress_box.addWidget(self.plot_legend)
        progress_box.addWidget(self.plot, 1)
        progress_box.addStretch(0)  # the plot's height is capped: the rest below it, not above
        log_page = QWidget()
        log_box = QVBoxLayout(log_page)
        log_box.setContentsMargins(0, 2, 0, 0)
        log_box.addWidget(self.log, 1)
        log_box.addWidget(self.raw_log_box)
        self.progress_tabs = QTabWidget()
        self.progress_tabs.setDocumentMode(True)
        self.progress_tabs.addTab(progress, "Progress")
        self.progress_tabs.addTab(log_page, "Log")
        layout.addWidget(self.progress_tabs, 1)
        self.method_box.activated.connect(self._on_widgets_changed)
        self.backend_box.activated.connect(self._on_widgets_changed)
        self.time_limit_box.editingFinished.connect(self._on_widgets_changed)
        self.gap_box.editingFinished.connect(self._on_widgets_changed)
        self.auto_box.toggled.connect(self._on_widgets_changed)
        self.offload_box.toggled.connect(self._on_widgets_changed)
        self.runs_box.editingFinished.connect(self._on_widgets_changed)
        self.solve_button.clicked.connect(self.request_solve)
        self.cancel_button.clicked.connect(self._controller.cancel)

    def needed_height(self) -> int:
        """The height that shows every line of the status and notes at the panel's width and
        the live plot at its minimum (its x-axis title included). ``minimumSizeHint`` counts a
        wrapped label as one line: at 1280x720, four lines of notes pushed the plot's axis
        title out of the dock."""
        layout = self.layout()
        margins = layout.contentsMargins()
        width = max(self.width() - margins.left() - margins.right(), 1)
        shown = [layout.itemAt(i) for i in range(layout.count())]
        height = margins.top() + margins.bottom() + layout.spacing() * (len(shown) - 1)
        for item in shown:
            widget = item.widget()
            if widget is None:
                height += item.minimumSize().height()
            elif not widget.isHidden():
                if widget.hasHeightForWidth():
                    height += widget.heightForWidth(width)
                else:
                    height += widget.minimumSizeHint().height()
        return height

    def _restyle_legend(self) -> None:
        colors = colors_for(self)
        self.plot_legend.setText(
            f"<span style='color:{colors.kinds['forward']}'>━</span>&nbsp;incumbent "
            f"(best schedule so far) &nbsp; <span style='color:{colors.muted}'>┄</span>"
            "&nbsp;bound (nothing faster exists)"
        )

    def on_theme_changed(self) -> None:
        self._restyle_legend()

    def clear_progress(self) -> None:
        """Empty the live plot and the log (a new solve, or a different graph)."""
        self._solve_count += 1  # a pending end of the curves belongs to the old ones
        self._times, self._incumbents, self._bounds = [], [], []
        self.incumbent_curve.setData([], [])
        self.bound_curve.setData([], [])
        self._x_range = self._y_range = None
        # the axes too: the last solve's time and objective ranges were left on a new graph
        self.plot.setXRange(0.0, 1.0, padding=0.0)
        self.plot.setYRange(0.0, 1.0, padding=0.0)
        self._raw_lines = []
        self.log.clear()
        self.notes_label.clear()
        self.notes_label.hide()

    @property
    def notes(self) -> str:
        """What the result on display means (plain text, one sentence a line), or ``""``."""
        return self._notes_text

    _notes_text = ""

    def _append_log(self, lines: list[str]) -> None:
        """Add backend log lines: as progress a user reads, or raw when asked for."""
        self._raw_lines = (self._raw_lines + lines)[-LOG_MAX_LINES:]
        shown = lines if self.raw_log_box.isChecked() else _readable(lines)
        if shown:
            self.log.appendPlainText("\n".join(shown[-LOG_MAX_LINES:]))

    def _on_raw_log_toggled(self, raw: bool) -> None:
        self.log.clear()
        shown = self._raw_lines if raw else _readable(self._raw_lines)
        if shown:
            self.log.appendPlainText("\n".join(shown))

    @property
    def curve_points(self) -> int:
        """How many progress points the live plot holds."""
        return len(self._times)

    # ----- widgets -> document -----------------------------------------------------------------
    def _on_widgets_changed(self, *_: object) -> None:
        settings = replace(
            self._document.settings,
            method=self.method_box.currentData() or "xengine",
            backend=self.backend_box.currentData() or "cbc",
            time_limit_s=float(self.time_limit_box.value()),
            gap_rel=float(self.gap_box.value()) / 100,
            auto_solve=self.auto_box.isChecked(),
            offload=self.offload_box.isChecked(),
            runs=int(self.runs_box.value()),
        )
        self._document.set_settings(settings)

    def request_solve(self) -> None:
        """Solve with the settings on screen, or say why not (Solve button, F5)."""
        self._on_widgets_changed()  # a spin box still being edited counts
        reason = self._controller.blocker()
        if reason is not None:
            self._show_status(f"Cannot solve: {reason}.", error=True)
            return
        self._controller.solve()

    # ----- document -> widgets -----------------------------------------------------------------
    def _on_document_graph_changed(self) -> None:
        if not self._controller.is_running:
            self.clear_progress()  # the last solve's curve and log were about another graph
        with QSignalBlocker(self.method_box):
            self.method_box.clear()
            for label, name in method_choices(self._document.graph):
                self.method_box.addItem(label, name)
        self._on_document_settings_changed()

    def _on_document_settings_changed(self) -> None:
        settings: SolverSettings = self._document.settings
        with QSignalBlocker(self.method_box):
            index = self.method_box.findData(settings.method)
            self.method_box.setCurrentIndex(max(index, 0))
        with QSignalBlocker(self.backend_box):
            self.backend_box.setCurrentIndex(max(self.backend_box.findData(settings.backend), 0))
        with QSignalBlocker(self.time_limit_box):
            self.time_limit_box.setValue(settings.time_limit_s)
        with QSignalBlocker(self.gap_box):
            self.gap_box.setValue(100 * settings.gap_rel)
        with QSignalBlocker(self.auto_box):
            self.auto_box.setChecked(settings.auto_solve)
        with QSignalBlocker(self.offload_box):
            self.offload_box.setChecked(settings.offload)
        with QSignalBlocker(self.runs_box):
            self.runs_box.setValue(settings.runs)
        # offloading is an option of XEngine over all devices (as solve --offload)
        self.offload_box.setEnabled(settings.method == "xengine")
        if self._document.graph is not None and self.method_box.currentData() != settings.method:
            self._on_widgets_changed()  # the method named a device this graph does not have

    def _on_document_result_changed(self) -> None:
        result = self._document.result
        if self._controller.is_running:
            return
        if result is None:
            self.objective_label.setText(format_objective(None))
            self._show_status("Not solved for this graph yet.")
            self._show_notes([])
            return
        self._show_result(result)

    def _show_result(self, result: SolveResult) -> None:
        self.objective_label.setText(f"<b>{format_objective(result.objective)}</b>")
        text = html.escape(status_text(result))
        if not self._document.is_result_current():
            text += " <i>(for other memory limits)</i>"
        if result.ok:
            self._show_status(text)
        else:
            self._show_status(f"{text}<br>{html.escape(result.message or '')}", error=True)
        marks = self._document.landmarks()
        self._show_notes(result_notes(result, marks.peak if marks is not None else None))

    def _show_notes(self, notes: list[str]) -> None:
        text = "<br>".join(html.escape(n) for n in notes)
        changed = text != self.notes_label.text() or bool(notes) == self.notes_label.isHidden()
        self._notes_text = "\n".join(notes)
        self.notes_label.setText(text)
        self.notes_label.setVisible(bool(notes))
        if changed:
            self.needs_room.emit()

    def _show_status(self, text: str, error: bool = False) -> None:
        """Rich text; plain text takes the palette's colour, so it follows the theme."""
        if error:
            text = f"<span style='color:{colors_for(self).budget}'>{text}</span>"
        self.status_label.setText(text)

    # ----- controller -> widgets ---------------------------------------------------------------
    def _on_controller_started(self, request: SolveRequest) -> None:
        self.clear_progress()
        self.objective_label.setText(format_objective(None))
        self._show_status(f"Solving with {html.escape(request.method)}\u2026")

    def _on_controller_progressed(self, batch: list) -> None:
        lines = [p.log_line for p in batch if p.log_line]
        if lines:
            self._append_log(lines)
        for p in batch:
            if p.incumbent is not None or p.bound is not None:
                self._times.append(p.elapsed_s)
                self._incumbents.append(np.nan if p.incumbent is None else p.incumbent)
                self._bounds.append(np.nan if p.bound is None else p.bound)
        if self._times:
            x = np.asarray(self._times)
            self.incumbent_curve.setData(x, np.asarray(self._incumbents), connect="finite")
            self.bound_curve.setData(x, np.asarray(self._bounds), connect="finite")
            self._follow_ranges()
        last = batch[-1]
        parts = [f"{last.elapsed_s:.1f} s"]
        if last.incumbent is not None:
            parts.append(f"incumbent {format_objective(last.incumbent)}")
        if last.bound is not None:
            parts.append(f"bound {format_objective(last.bound)}")
        if last.gap is not None:
            parts.append(f"gap {100 * last.gap:.2g} %")
        self._show_status("Solving\u2026 " + " \u00b7 ".join(parts) + self._moved_note())

    def _moved_note(self) -> str:
        """While a solve runs, a memory limit moved (a slider dragged): say what is solved.

        The solve goes on for the limits it started with (its request is a snapshot); its
        incumbents are not drawn over schedules of the new limits, and its result, when it
        comes, is marked as for other limits. Solve (or auto-solve) solves the new ones.
        """
        request = self._controller.current_request
        graph = self._document.graph
        if request is None or graph is None:
            return ""
        now = self._document.memory_limits
        then = dict(request.graph.memory_limits)
        moved = [f"{d} {format_size(then[d])}" for d in sorted(then) if now.get(d) != then[d]]
        if not moved:
            return ""
        return (
            "<br><i>The memory limits moved: this solve goes on for the ones it started with ("
            + ", ".join(moved)
            + "); its result will say so. Solve again for the new limits.</i>"
        )

    def _follow_ranges(self) -> None:
        """Grow the live plot's ranges in steps (``app.panels.live_range``)."""
        x_range = time_range(self._x_range, self._times[-1])
        values = np.concatenate([np.asarray(self._incumbents), np.asarray(self._bounds)])
        y_range = value_range(self._y_range, values)
        if x_range != self._x_range:
            self._x_range = x_range
            self.plot.setXRange(*x_range, padding=0.0)
        if y_range is not None and y_range != self._y_range:
            self._y_range = y_range
            self.plot.setYRange(*y_range, padding=0.0)

    def _on_controller_finished(self, result: SolveResult) -> None:
        if not self._raw_lines:
            self._append_log(list(result.log_tail[-3:]))
        # in a turn of its own: the result's views are drawn in this one, and the plot's new
        # time range regenerates its axes (a 58 ms turn at a 5,000-op solve's end)
        QTimer.singleShot(0, functools.partial(self._end_curves, result, self._solve_count))
        self._show_result(result)

    def _end_curves(self, result: SolveResult, solve: int) -> None:
        """Carry the curves to the end of the solve: a solver may report its last improvement
        long before its time is up, and a plot that stopped at 9 s of a 22.6 s solve said the
        solve had ended there."""
        if solve != self._solve_count or not self._times or result.objective is None:
            return  # another solve started (or the graph changed) since
        end = max(result.seconds, self._times[-1])
        self._times.append(end)
        self._incumbents.append(result.objective)
        self._bounds.append(np.nan if result.bound is None else result.bound)
        x = np.asarray(self._times)
        self.incumbent_curve.setData(x, np.asarray(self._incumbents), connect="finite")
        self.bound_curve.setData(x, np.asarray(self._bounds), connect="finite")
        self._follow_ranges()
        self._x_range = (0.0, end * 1.02)  # the whole solve, no empty step of the 1-2-5 range
        self.plot.setXRange(*self._x_range, padding=0.0)

    def _on_controller_failed(self, message: str) -> None:
        self._show_status(f"The solve failed: {html.escape(message)}", error=True)

    def _on_controller_running_changed(self, running: bool) -> None:
        self.solve_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
