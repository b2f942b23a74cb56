"""XEngine against the single-device methods on the current graph and budgets.

Runs :func:`solver.optimize.methods.compare` in the background: Checkmate's optimum on each device
alone, checkpoint-all and Chen's sqrt(n) on each device, then XEngine over all devices. A table and
a bar chart show each schedule's time and the speedup over the best single device (XEngine's
claim); infeasible entries say why. Selecting a row puts that schedule on display.
"""

from __future__ import annotations

import functools
import html
import logging

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.tasks import CurrentTask
from app.theme import FollowsTheme, colors_for, style_plot
from app.views.plotting import configure_plot, install_export_action
from app.widgets import count_bar
from app.workers import ProcessWorker
from solver.document.graph import Graph
from solver.document.units import format_ms, format_size
from solver.optimize.methods import Comparison, compare, method_label
from solver.optimize.solve import SolveOptions, SolveResult

__all__ = ["ComparisonView", "default_methods"]

_MUTED = Qt.ItemDataRole.UserRole + 1
"""Item data: the row's result is not a schedule (drawn muted)."""

logger = logging.getLogger(__name__)

COLUMNS = (
    "method",
    "status",
    "time",
    "speedup",
    "recomputations",
    "transfers",
    "peak memory",
    "note",
)


def default_methods(graph: Graph) -> list[str]:
    """Checkmate on each device alone, checkpoint-all and sqrt(n) per device, then XEngine."""
    names = [d.name for d in graph.devices]
    methods = [f"checkmate:{d}" for d in names]
    methods += [f"{m}:{d}" for m in ("checkpoint-all", "chen-sqrtn") for d in names]
    return methods + ["xengine"]


class ComparisonView(FollowsTheme, QWidget):
    """Table and bar chart of :func:`solver.optimize.methods.compare` for the document's graph.

    Listens to ``graph_changed`` and ``memory_limits_changed`` (results become stale and a running
    comparison is cancelled) and ``result_changed`` (the row on display is selected). Writes
    ``document.set_result`` when a row with a schedule is selected.
    """

    comparison_finished = Signal(object)
    """A comparison ended (the :class:`Comparison`, possibly partial after a cancel)."""

    def __init__(
        self,
        document: Document,
        parent: QWidget | None = None,
        options: SolveOptions | None = None,
    ):
        super().__init__(parent)
        self._document = document
        self._options = options
        self._methods: list[str] = []
        self._results: list[SolveResult] = []
        self._task = CurrentTask(self)
        self._task.item.connect(self._on_task_item)
        self._task.finished.connect(self._on_task_finished)
        self._task.failed.connect(self._on_task_failed)
        self._build_items()
        document.graph_changed.connect(self._on_document_graph_changed)
        document.memory_limits_changed.connect(self._on_document_memory_limits_changed)
        document.result_changed.connect(self._on_document_result_changed)
        self._redraw()

    # ----- public API -------------------------------------------------------------------------
    @property
    def table(self) -> QTableWidget:
        return self._table

    @property
    def running(self) -> bool:
        return self._task.running

    @property
    def status_text(self) -> str:
        """The status line next to the buttons (rich text)."""
        return self._status.text()

    @property
    def comparison(self) -> Comparison:
        """The results so far, in row order."""
        return Comparison(tuple(self._results))

    def run(self, methods: list[str] | None = None) -> None:
        """Start comparing (cancelling a comparison still running)."""
        graph = self._document.graph
        if graph is None:
            return
        self.cancel()
        self._methods = list(methods) if methods is not None else default_methods(graph)
        self._results = []
        # the paper's models of several methods: offloading is the Solve button's option
        options = self._options or self._document.settings.solve_options(offload=False)
        chosen = list(self._methods)
        job = functools.partial(compare, graph, options, chosen)
        self._task.start_worker(ProcessWorker(job, "comparison"))
        self._status.setText(f"Comparing {len(chosen)} methods on {html.escape(graph.name)}…")
        self._redraw()

    def cancel(self) -> None:
        """Stop the running comparison; the results so far stay."""
        if self._task.cancel():
            self._status.setText("Cancelled.")
            self._redraw_controls()

    # ----- building ---------------------------------------------------------------------------
    def _build_items(self) -> None:
        self._run = QPushButton("Compare methods")
        self._run.clicked.connect(self._on_run_clicked)
        self._stop = QPushButton("Cancel")
        self._stop.clicked.connect(self._on_stop_clicked)
        self._progress = count_bar("%v / %m")
        self._status = QLabel()
        self._status.setTextFormat(Qt.TextFormat.RichText)
        self._status.setWordWrap(True)
        controls = QHBoxLayout()
        for widget in (self._run, self._stop, self._progress):
            controls.addWidget(widget)
        controls.addWidget(self._status, 1)
        self._table = QTableWidget(0, len(COLUMNS))
        self._table.setHorizontalHeaderLabels([c.capitalize() for c in COLUMNS])
        self._table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self._table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self._table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._table.verticalHeader().setVisible(False)
        self._table.setWordWrap(False)
        header = self._table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self._table.itemSelectionChanged.connect(self._on_table_selection_changed)
        self._chart = pg.PlotWidget()
        self._plot = self._chart.getPlotItem()
        configure_plot(self._plot, colors_for(self), "schedule time (ms)")
        style_plot(self._chart, colors_for(self))
        self._plot.invertY(True)
        self._plot.setMouseEnabled(x=False, y=False)
        self._plot.hideButtons()
        self._plot.showGrid(x=True, y=False, alpha=0.25)
        install_export_action(self._chart.scene(), self)
        self._bars = pg.BarGraphItem(x0=[], width=[], y=[], height=[])
        self._plot.addItem(self._bars)
        # the line is named in the axis title: its own label, at the top of the line, ran
        # into the first row's bar and value
        self._best_line = pg.InfiniteLine(angle=90, movable=False)
        self._plot.addItem(self._best_line, ignoreBounds=True)
        self._labels: list[pg.TextItem] = []
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self._table)
        splitter.addWidget(self._chart)
        splitter.setStretchFactor(1, 1)
        self._splitter = splitter
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(controls)
        layout.addWidget(splitter, 1)

    def on_theme_changed(self) -> None:
        style_plot(self._chart, colors_for(self))
        self._table.clearContents()  # muted rows take the new theme's colour
        self._redraw()

    # ----- slots ------------------------------------------------------------------------------
    def _on_run_clicked(self) -> None:
        self.run()

    def _on_stop_clicked(self) -> None:
        self.cancel()

    def _on_document_graph_changed(self) -> None:
        self._go_stale("The graph changed: compare again.")

    def _on_document_memory_limits_changed(self) -> None:
        self._go_stale("The memory limits changed: compare again.")

    def _on_document_result_changed(self) -> None:
        self._select_displayed_row()

    def _on_task_item(self, task: ProcessWorker, result: SolveResult) -> None:
        self._results.append(result)
        self._redraw()

    def _on_task_finished(self, task: ProcessWorker, comparison: Comparison) -> None:
        self._results = list(comparison.results)
        document = self._document
        budgets = tuple(sorted(document.memory_limits.items()))  # other views can compare with them
        for result in self._results:
            document.cache_result((document.structure_token, result.method, budgets), result)
        best = comparison.best_single_device
        xengine = next((r for r in self._results if r.method == "xengine"), None)
        speedup = comparison.speedup(xengine) if xengine is not None else None
        text = "Done."
        if best is not None and speedup is not None:
            text = (
                f"Done: XEngine is <b>{speedup:.2f}×</b> the best single device "
                f"({html.escape(method_label(best.method))}, {format_ms(best.timeline.total_ms)})."
            )
        self._status.setText(text)
        self._redraw()
        self.comparison_finished.emit(comparison)

    def _on_task_failed(self, task: ProcessWorker, message: str) -> None:
        self._status.setText(f"Comparison failed: {html.escape(message)}")
        self._redraw()

    def _on_table_selection_changed(self) -> None:
        rows = self._table.selectionModel().selectedRows()
        if rows and rows[0].row() < len(self._results):
            result = self._results[rows[0].row()]
            if result.ok:
                self._document.set_result(result)

    # ----- drawing ----------------------------------------------------------------------------
    def _go_stale(self, message: str) -> None:
        """Drop the results; say why only if there was something to drop (not on a fresh
        window or a freshly opened graph, where nothing had been compared yet)."""
        had_something = bool(self._results) or self._task.running
        self.cancel()
        self._results = []
        self._methods = []
        self._status.setText(message if had_something else "")
        self._redraw()

    def _redraw(self) -> None:
        self._redraw_controls()
        self._redraw_table()
        self._redraw_chart()
        self._select_displayed_row()

    def _redraw_controls(self) -> None:
        self._run.setEnabled(self._document.graph is not None and not self._task.running)
        self._stop.setEnabled(self._task.running)
        self._progress.setRange(0, max(len(self._methods), 1))
        self._progress.setValue(len(self._results))
        if not self._methods and not self._status.text():
            self._status.setText("Press <b>Compare methods</b> to solve with every method.")

    def _redraw_table(self) -> None:
        comparison = self.comparison
        colors = colors_for(self)
        if self._table.rowCount() != len(self._methods):
            self._table.setRowCount(len(self._methods))
            self._fit_table()
        for row, method in enumerate(self._methods):
            result = self._results[row] if row < len(self._results) else None
            cells = _row_cells(method, result, comparison)
            muted = result is not None and not result.ok
            for col, text in enumerate(cells):
                old = self._table.item(row, col)
                if old is not None and old.text() == text and old.data(_MUTED) == muted:
                    continue  # a new result rewrote every cell of every row (a 30-80 ms stall)
                item = QTableWidgetItem(text)
                item.setData(_MUTED, muted)
                if 2 <= col <= 5:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                if muted:
                    item.setForeground(QColor(colors.muted))
                    item.setToolTip(result.message or result.status.value)
                self._table.setItem(row, col, item)

    def _fit_table(self) -> None:
        """Give the table the height of its rows (up to half the view), the chart the rest."""
        rows = max(self._table.rowCount(), 3)
        height = self._table.horizontalHeader().height() + 2 * self._table.frameWidth()
        height += rows * self._table.verticalHeader().defaultSectionSize() + 2
        total = max(sum(self._splitter.sizes()), 2 * height)
        height = min(height, total // 2)
        self._splitter.setSizes([height, total - height])

    def _redraw_chart(self) -> None:
        colors = colors_for(self)
        graph = self._document.graph
        rows = len(self._methods)
        ms = np.full(rows, np.nan)
        for j, result in enumerate(self._results[:rows]):
            if result.ok:
                ms[j] = result.timeline.total_ms
        ok = ~np.isnan(ms)
        brushes = [self._bar_color(m, graph) for m in self._methods]
        self._bars.setOpts(
            x0=np.zeros(int(ok.sum())),
            width=ms[ok],
            y=np.arange(rows)[ok],
            height=0.6,
            brushes=[b for b, good in zip(brushes, ok, strict=True) if good],
            pen=colors.pen(colors.foreground, 0.5),
        )
        ticks = [(j, method_label(m)) for j, m in enumerate(self._methods)]
        axis = self._plot.getAxis("left")
        axis.setTicks([ticks, []])
        metrics = QFontMetrics(axis.font())
        axis.setWidth(max((metrics.horizontalAdvance(t) for _, t in ticks), default=60) + 24)
        top = float(np.nanmax(ms)) if ok.any() else 1.0
        self._plot.setXRange(0, top * 1.22, padding=0)
        self._plot.setYRange(-0.6, max(rows, 1) - 0.4, padding=0)
        self._draw_value_labels(ms, top, colors)
        best = self.comparison.best_single_device
        self._best_line.setVisible(best is not None)
        self._best_line.setPen(colors.pen(colors.muted, 1.2, dashed=True))
        if best is not None:
            self._best_line.setPos(best.timeline.total_ms)
        self._plot.setLabel(
            "bottom",
            "schedule time (ms)"
            + (" \u00b7 dashed line: best single device" if best is not None else ""),
        )

    @property
    def axis_title(self) -> str:
        """The time axis's title (it names the dashed line)."""
        return self._plot.getAxis("bottom").labelText

    def _draw_value_labels(self, ms: np.ndarray, top: float, colors) -> None:
        comparison = self.comparison
        while len(self._labels) < len(self._methods):
            label = pg.TextItem(anchor=(0.0, 0.5))
            self._plot.addItem(label, ignoreBounds=True)
            self._labels.append(label)
        for j, label in enumerate(self._labels):
            label.setVisible(j < len(self._methods))
            if j >= len(self._methods):
                continue
            result = self._results[j] if j < len(self._results) else None
            if result is None:
                text = "running…" if self._task.running else ""
            elif not result.ok:
                text = result.status.value
            else:
                text = format_ms(ms[j])
                speedup = comparison.speedup(result)
                if speedup is not None:
                    text += f"  ({speedup:.2f}×)"
            label.setText(text, color=colors.foreground if result and result.ok else colors.muted)
            label.setPos(0.0 if np.isnan(ms[j]) else ms[j] + 0.01 * top, j)

    def _bar_color(self, method: str, graph: Graph | None) -> QColor:
        colors = colors_for(self)
        name, _, device = method.partition(":")
        if name == "xengine" or graph is None or device not in graph.device_index:
            return QColor(colors.transfer)
        color = colors.device(graph.device_index[device])
        return color if name == "checkmate" else color.lighter(125)

    def _select_displayed_row(self) -> None:
        shown = self._document.result
        rows = [j for j, r in enumerate(self._results) if r is shown]
        with QSignalBlocker(self._table):
            if rows:
                self._table.selectRow(rows[0])
            else:
                self._table.clearSelection()


def _row_cells(method: str, result, comparison: Comparison) -> list[str]:
    label = method_label(method)
    if result is None:
        return [label, "waiting…", "", "", "", "", "", ""]
    if not result.ok:
        why = result.message or result.status.value
        return [label, result.status.value, "", "", "", "", "", why]
    t = result.timeline
    speedup = comparison.speedup(result)
    peaks = ", ".join(f"{d} {format_size(b)}" for d, b in t.peaks.items() if b > 0)
    return [
        label,
        result.status.value,
        format_ms(t.total_ms),
        f"{speedup:.2f}×" if speedup is not None else "",
        str(t.recomputations),
        f"{len(t.transfers)} ({format_ms(t.transfer_ms)})" if t.transfers else "0",
        peaks,
        result.message if result.status.value != "optimal" else "",
    ]


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(ComparisonView))
