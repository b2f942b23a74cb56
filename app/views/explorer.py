"""The memory/time trade-off: schedule time as one device's budget shrinks.

Sweeps the chosen device's activation budget from the no-rematerialization peak (nothing needs
recomputing) down to its lower bound (below it the device cannot run every node), solving each
point with XEngine over all devices and with the best single device (Checkmate). Where the two
curves part is where heterogeneity pays. Clicking a point puts its schedule on display.
"""

from __future__ import annotations

import logging

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.commands import SetMemoryLimitCommand
from app.document import Document
from app.store_lookup import SweepRunner
from app.tasks import CurrentTask
from app.theme import FollowsTheme, colors_for, style_plot
from app.views.plotting import byte_unit, configure_plot, install_export_action
from app.widgets import count_bar
from solver.document.graph import Graph
from solver.document.units import format_ms, format_size
from solver.optimize.bounds import lower_bound, no_remat_peak
from solver.optimize.methods import method_label
from solver.optimize.solve import SolveOptions
from solver.sweeps.sweep import SweepPoint, budget_steps, sweep_tasks

__all__ = ["ExplorerView", "sweep_fractions"]

logger = logging.getLogger(__name__)

SERIES = {method: method_label(method) for method in ("xengine", "checkmate")}


def sweep_fractions(graph: Graph, device: str, steps: int) -> list[float]:
    """Fractions of the no-rematerialization peak, from 1 down to ``device``'s lower bound.

    When the device's current budget is below its lower bound (only a heterogeneous schedule
    can run there, which is XEngine's point), the sweep goes on down to it, and the lower bound
    itself stays one of the points: it takes the place of the step nearest to it, so that
    "6 budgets" sweeps 6 (it swept 7). Fractions are rounded up a hair so that
    ``int(fraction * peak)`` never lands below the bound.
    """
    peak = no_remat_peak(graph)
    if peak <= 0:
        return [1.0]
    bound = min(lower_bound(graph, device) / peak + 1e-6, 1.0)
    current = graph.device(device).activation_budget / peak + 1e-6
    bottom = max(min(bound, current), 1e-3)
    fractions = budget_steps(1.0, bottom, steps)
    bound = round(bound, 6)
    if bound not in fractions and len(fractions) > 2:
        nearest = min(range(1, len(fractions) - 1), key=lambda j: abs(fractions[j] - bound))
        fractions[nearest] = bound  # the ends (the peak, the bottom) stay
    elif bound not in fractions:
        fractions.append(bound)
    return sorted(set(fractions), reverse=True)


_LABEL_HEIGHTS = (0.97, 0.86, 0.75)
"""Where along its line each mark's label sits, by the mark's rank from the left."""


class ExplorerView(FollowsTheme, QWidget):
    """Time versus one device's budget, for XEngine and for the best single device.

    Listens to ``graph_changed`` (devices and stale points), ``memory_limits_changed`` (the current
    budget marker) and ``result_changed`` (the point on display is ringed). Writes
    ``document.set_result`` when a point is clicked.
    """

    sweep_finished = Signal(object)
    """A sweep ended (the list of :class:`SweepPoint`, partial after a cancel)."""

    def __init__(
        self,
        document: Document,
        parent: QWidget | None = None,
        options: SolveOptions | None = None,
    ):
        super().__init__(parent)
        self._document = document
        self._options = options
        self._points: list[SweepPoint] = []
        self._expected = 0
        self._swept = ""
        self._task = CurrentTask(self)
        self._task.item.connect(self._on_task_item)
        self._task.finished.connect(self._on_task_finished)
        self._task.failed.connect(self._on_task_failed)
        self._build_items()
        document.graph_changed.connect(self._on_document_graph_changed)
        document.memory_limits_changed.connect(self._on_document_memory_limits_changed)
        document.result_changed.connect(self._on_document_result_changed)
        self._fill_devices()
        self._redraw()

    # ----- public API -------------------------------------------------------------------------
    @property
    def plot(self) -> pg.PlotItem:
        return self._plot

    @property
    def points(self) -> list[SweepPoint]:
        return list(self._points)

    @property
    def running(self) -> bool:
        return self._task.running

    @property
    def scatter(self) -> dict[str, pg.ScatterPlotItem]:
        """The clickable points by method ("xengine", "checkmate")."""
        return dict(self._scatter)

    def run(self, device: str | None = None, steps: int | None = None) -> None:
        """Start a sweep of ``device`` (default: the chosen one) in ``steps`` budgets."""
        graph = self._document.graph
        if graph is None:
            return
        self.cancel()
        device = device or self._device.currentText() or graph.devices[-1].name
        steps = steps or self._steps.value()
        with QSignalBlocker(self._device):
            self._device.setCurrentText(device)
        with QSignalBlocker(self._steps):
            self._steps.setValue(steps)  # the box says what is swept
        fractions = sweep_fractions(graph, device, steps)
        # the paper's models of several methods: offloading is the Solve button's option
        options = self._options or self._document.settings.solve_options(offload=False)
        self._points = []
        self._expected = len(fractions) * len(SERIES)
        self._swept = device
        # stored points arrive at once, the others from parallel solves (app.store_lookup)
        tasks = sweep_tasks(graph, device, fractions, tuple(SERIES), options)
        task = SweepRunner(tasks, None, self)
        task.finished.connect(task.deleteLater)
        self._task.start(task, task.point, task.finished, task.failed)
        stored = f" ({task.from_store} from the result store)" if task.from_store else ""
        if task.shorter:
            stored += f"; {task.shorter} stored with a shorter time limit are solved again"
        self._status.setText(f"Sweeping {device} in {len(fractions)} budgets…{stored}")
        self._redraw()

    def cancel(self) -> None:
        """Stop the sweep; the points so far stay."""
        if self._task.cancel():
            self._status.setText(f"Cancelled after {len(self._points)} solves.")
            self._redraw_controls()

    # ----- building ---------------------------------------------------------------------------
    def _build_items(self) -> None:
        self._device = QComboBox()
        self._steps = QSpinBox(minimum=2, maximum=30, value=6)
        self._steps.setSuffix(" budgets")
        self._run = QPushButton("Sweep")
        self._run.clicked.connect(self._on_run_clicked)
        self._stop = QPushButton("Cancel")
        self._stop.clicked.connect(self._on_stop_clicked)
        self._progress = count_bar("%v / %m solves")
        self._status = QLabel()
        self._status.setWordWrap(True)
        self._apply = QPushButton()
        self._apply.setToolTip("Set the memory limits to the ones this schedule was found for")
        self._apply.clicked.connect(self.apply_shown_memory_limits)
        self._apply.hide()
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Budget of"))
        for widget in (self._device, self._steps, self._run, self._stop, self._progress):
            controls.addWidget(widget)
        controls.addWidget(self._status, 1)
        controls.addWidget(self._apply)
        self._legend = QLabel()
        self._legend.setContentsMargins(6, 0, 6, 0)
        self._chart = pg.PlotWidget()
        self._plot = self._chart.getPlotItem()
        configure_plot(self._plot, colors_for(self), None)
        style_plot(self._chart, colors_for(self))
        self._plot.showGrid(x=True, y=True, alpha=0.25)
        self._plot.getViewBox().setDefaultPadding(0.06)
        install_export_action(self._chart.scene(), self)
        self._lines: dict[str, pg.PlotDataItem] = {}
        self._scatter: dict[str, pg.ScatterPlotItem] = {}
        for method in reversed(SERIES):  # XEngine last: on top where the curves meet
            line = pg.PlotDataItem()
            self._plot.addItem(line)
            # XEngine's circles sit inside the larger squares where both curves agree
            size = 9 if method == "xengine" else 14
            scatter = pg.ScatterPlotItem(size=size, hoverable=True, tip=_point_tip)
            scatter.sigClicked.connect(self._on_scatter_clicked)
            self._plot.addItem(scatter)
            self._lines[method], self._scatter[method] = line, scatter
        self._infeasible = pg.ScatterPlotItem(size=10, symbol="x")
        self._plot.addItem(self._infeasible)
        self._shown = pg.ScatterPlotItem(size=20, brush=None)
        self._plot.addItem(self._shown)
        # the peak is the right end of the sweep: its label goes left of the line
        self._marks = {
            name: pg.InfiniteLine(
                angle=90,
                movable=False,
                label=name,
                labelOpts={"position": position, "anchors": [anchor, anchor]},
            )
            for name, position, anchor in (
                ("current", 0.97, (0, 0)),
                ("lower bound", 0.90, (0, 0)),
                ("no-remat peak", 0.97, (1, 0)),
            )
        }
        for mark in self._marks.values():
            self._plot.addItem(mark, ignoreBounds=True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(controls)
        layout.addWidget(self._legend)
        layout.addWidget(self._chart, 1)

    def on_theme_changed(self) -> None:
        style_plot(self._chart, colors_for(self))
        self._redraw()

    # ----- slots ------------------------------------------------------------------------------
    def _on_run_clicked(self) -> None:
        self.run()

    def _on_stop_clicked(self) -> None:
        self.cancel()

    def _on_document_graph_changed(self) -> None:
        self.cancel()
        self._points = []
        self._swept = ""
        self._fill_devices()
        self._status.setText("")
        self._redraw()

    def _on_document_memory_limits_changed(self) -> None:
        self._redraw_marks()
        self._redraw_apply()

    def _on_document_result_changed(self) -> None:
        self._redraw_shown()
        self._redraw_apply()

    def _on_task_item(self, task: SweepRunner, point: SweepPoint) -> None:
        self._points.append(point)
        self._redraw()

    def _on_task_finished(self, task: SweepRunner, points: list[SweepPoint]) -> None:
        self._points = list(points)
        bad = sum(p.total_ms is None for p in points)
        stored = sum(p.from_store for p in points)
        self._status.setText(
            f"Done: {len(points)} solves"
            + (f" ({stored} from the result store)" if stored else "")
            + (f", {bad} infeasible (×)." if bad else ".")
            + " Click a point to see its schedule."
        )
        self._redraw()
        self.sweep_finished.emit(list(points))

    def _on_task_failed(self, task: SweepRunner, message: str) -> None:
        self._status.setText(f"Sweep failed: {message}")
        self._redraw()

    def _on_scatter_clicked(self, _item, points, _event=None) -> None:
        if len(points):
            self.open_point(points[0].data())

    def open_point(self, point: SweepPoint) -> None:
        """Put the schedule of a sweep point on display (what a click does)."""
        if point is not None and point.result.ok:
            self._document.set_result(point.result)

    @property
    def apply_button(self) -> QPushButton:
        """ "Apply this memory limit": shown while the schedule on display is a sweep point's
        found for memory limits other than the sliders'."""
        return self._apply

    def apply_shown_memory_limits(self) -> None:
        """Move the sliders to the memory limits of the sweep point on display (one undo entry
        each)."""
        changes = self._memory_limit_changes()
        if not changes:
            return
        result = self._document.result
        for device, limit in changes.items():
            self._document.edit(SetMemoryLimitCommand, device, limit)
        key = self._document.result_key()
        if key is not None and self._document.is_result_current():
            self._document.cache_result(key, result)  # coming back here shows it again
        self._redraw_apply()

    def _memory_limit_changes(self) -> dict[str, int]:
        """Memory limits of the sweep point on display that differ from the document's."""
        result = self._document.result
        if result is None or result.schedule is None:
            return {}
        if not any(p.result is result for p in self._points):
            return {}
        current = self._document.memory_limits
        return {
            d: int(b)
            for d, b in result.schedule.memory_limits.items()
            if d in current and current[d] != b
        }

    def _redraw_apply(self) -> None:
        changes = self._memory_limit_changes()
        self._apply.setVisible(bool(changes))
        if changes:
            text = ", ".join(f"{d} = {format_size(b)}" for d, b in changes.items())
            self._apply.setText(f"Apply this memory limit ({text})")

    # ----- drawing ----------------------------------------------------------------------------
    def _fill_devices(self) -> None:
        graph = self._document.graph
        names = [d.name for d in graph.devices] if graph is not None else []
        with QSignalBlocker(self._device):
            self._device.clear()
            self._device.addItems(names)
            gpus = [d.name for d in graph.devices if d.kind == "gpu"] if graph is not None else []
            if gpus or names:
                self._device.setCurrentText((gpus or names)[0])

    def _unit(self) -> tuple[str, int]:
        # the document's landmarks are computed once per graph structure, not per incumbent
        marks = self._document.landmarks()
        return byte_unit(marks.peak if marks is not None else 0)

    def _redraw(self) -> None:
        self._redraw_controls()
        colors = colors_for(self)
        unit, scale = self._unit()
        device = self._swept or self._device.currentText()
        self._plot.setLabel("bottom", f"{device} activation budget ({unit})")
        self._plot.setLabel("left", "schedule time (ms)")
        styles = {"xengine": (colors.transfer, "o"), "checkmate": (colors.device(0), "s")}
        bad_x, bad_y = [], []
        feasible = [p.total_ms for p in self._points if p.total_ms is not None]
        floor = min(feasible, default=0.0)
        for method, (color, symbol) in styles.items():
            pts = sorted(
                (p for p in self._points if p.method == method), key=lambda p: p.activation_budget
            )
            good = [p for p in pts if p.total_ms is not None]
            x = np.array([p.activation_budget / scale for p in good])
            y = np.array([p.total_ms for p in good])
            self._lines[method].setData(x, y, pen=colors.pen(color, 2), symbol=None)
            self._scatter[method].setData(
                x=x,
                y=y,
                data=good,
                symbol=symbol,
                brush=color,
                pen=colors.pen(colors.background, 1),
            )
            bad_x += [p.activation_budget / scale for p in pts if p.total_ms is None]
            bad_y += [floor for p in pts if p.total_ms is None]
        self._infeasible.setData(bad_x, bad_y, pen=colors.pen(colors.budget, 2), brush=None)
        swatch = '<span style="color:{c}; font-size:14px">{g}</span>&nbsp;{t}'
        legend = [
            (colors.transfer, "●", SERIES["xengine"]),
            (colors.device(0).name(), "■", SERIES["checkmate"]),
            (colors.budget, "×", "infeasible"),
        ]
        self._legend.setText(" &nbsp; ".join(swatch.format(c=c, g=g, t=t) for c, g, t in legend))
        if self._points:
            self._plot.getViewBox().autoRange(padding=0.06)  # now, not at the next paint
        self._redraw_marks()
        self._redraw_shown()

    def _redraw_controls(self) -> None:
        has_graph = self._document.graph is not None
        self._run.setEnabled(has_graph and not self._task.running)
        self._stop.setEnabled(self._task.running)
        self._progress.setRange(0, max(self._expected, 1))
        self._progress.setValue(len(self._points))
        if not self._points and not self._task.running and not self._status.text():
            self._status.setText("Choose a device and press Sweep.")

    def _redraw_marks(self) -> None:
        graph = self._document.graph
        colors = colors_for(self)
        device = self._swept or self._device.currentText()
        if graph is None or device not in graph.device_index:
            for mark in self._marks.values():
                mark.setVisible(False)
            return
        _, scale = self._unit()
        marks = self._document.landmarks()
        values = {
            "current": graph.device(device).activation_budget,
            "no-remat peak": marks.peak,
            "lower bound": marks.lower[device],
        }
        # each mark's label at a height of its own, by position left to right: "current" and
        # "lower bound" (the chain opens with one just under the other) wrote over each other
        order = sorted(values, key=lambda n: values[n])
        for name, mark in self._marks.items():
            mark.setPen(colors.pen(colors.budget if name == "current" else colors.muted, 1, True))
            mark.label.setColor(colors.budget if name == "current" else colors.muted)
            mark.setPos(values[name] / scale)
            mark.setVisible(bool(self._points) or name == "current")
            mark.label.setFormat(f"{name} {format_size(values[name])}")
            rank = order.index(name)
            mark.label.setPosition(_LABEL_HEIGHTS[rank])
            anchor = (1, 0) if rank == len(order) - 1 else (0, 0)  # the rightmost reads leftwards
            mark.label.anchors = [anchor, anchor]
            mark.label.updatePosition()

    def mark_label_rects(self) -> dict[str, QRectF]:
        """Scene rectangles of the visible marks' labels (none may overlap another)."""
        return {
            name: mark.label.sceneBoundingRect()
            for name, mark in self._marks.items()
            if mark.isVisible()
        }

    def _redraw_shown(self) -> None:
        colors = colors_for(self)
        _, scale = self._unit()
        shown = [p for p in self._points if p.result is self._document.result and p.total_ms]
        self._shown.setData(
            [p.activation_budget / scale for p in shown],
            [p.total_ms for p in shown],
            pen=colors.pen(colors.selection, 2),
            brush=None,
        )
        if shown:
            self._chart.setToolTip(
                f"on display: {shown[0].method} at {format_size(shown[0].activation_budget)}, "
                f"{format_ms(shown[0].total_ms)}"
            )


def _point_tip(x: float, y: float, data: SweepPoint) -> str:
    method = SERIES.get(data.method, data.method)
    return (
        f"{method}\n{data.device} activation budget {format_size(data.activation_budget)} "
        f"({data.fraction:.0%} of the no-remat peak)\ntime {format_ms(y)} · click to open"
    )


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(ExplorerView))
