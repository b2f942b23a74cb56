"""Memory in use over time, one plot per device, against its budget.

Each device gets its own plot (and y scale) because budgets differ by orders of magnitude (16 GiB
of host memory next to a few MiB of GPU memory would flatten one of them). The curves are the
simulator's :class:`~solver.execution.simulate.MemoryCurve` step functions, drawn with
``stepMode="center"``: ``len(x) == len(y) + 1`` and ``y[j]`` holds on ``[x[j], x[j+1])``, exactly
the curve's definition.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QCursor
from PySide6.QtWidgets import QToolTip, QVBoxLayout, QWidget

from app.document import Document
from app.theme import FollowsTheme, colors_for, style_plot
from app.views.draw_pacer import DrawPacer
from app.views.gantt_lanes import timeline_extent
from app.views.measured import MeasuredRun
from app.views.plotting import HoverProxy, byte_unit, configure_plot, install_export_action
from app.views.tensor_bands import workspace_at
from solver.document.units import format_ms, format_size
from solver.execution.simulate import MemoryCurve, Timeline
from solver.optimize.solve import SolveResult

__all__ = ["MemoryView"]

logger = logging.getLogger(__name__)

_MAX_LISTED = 14
_PLOT_PIXELS = 70
"""Minimum height of one device's plot: its title and a readable curve (1280x720: the
Schedule tab shows the Gantt chart and every curve without scrolling)."""
_AXIS_PIXELS = 40
"""The time axis, under the last plot only (the plots share it)."""
_TITLE_PIXELS = 18
"""The title row of each plot (pyqtgraph reserves 30 px: a fifth of a short plot)."""


BUDGET_IN_VIEW = 3.0
"""The budget line is drawn while it is at most this many times the plot's peak."""


class _DevicePlot:
    """The items of one device's plot; built once per device, redrawn with ``setData``."""

    def __init__(self, layout: pg.GraphicsLayoutWidget, device: str, row: int):
        self.device = device
        self.plot: pg.PlotItem = layout.addPlot(row=row, col=0)
        self.curve = pg.PlotDataItem(stepMode="center", fillLevel=0.0)
        self.selected = pg.PlotDataItem(stepMode="center", fillLevel=0.0)
        self.offloaded = pg.PlotDataItem(stepMode="center", fillLevel=0.0)
        """Bytes held as offloading copies (tensors copied here and kept)."""
        self.budget = pg.InfiniteLine(angle=0, movable=False)
        self.budget_label = pg.TextItem(anchor=(1.0, 1.0))
        self.peak = pg.ScatterPlotItem(size=9, symbol="t")
        self.measured = pg.InfiniteLine(
            angle=0, movable=False, label="", labelOpts={"position": 0.02, "anchors": [(0, 1)] * 2}
        )
        """The measured peak of an executed schedule (Solve > Execute on PyTorch)."""
        self.measured.setVisible(False)
        self.cursor = pg.InfiniteLine(angle=90, movable=False)
        self.compared = pg.PlotDataItem(stepMode="center")
        """Another stored schedule's memory on this device, dashed (the comparison)."""
        self.plot.addItem(self.curve)
        self.plot.addItem(self.compared)
        self.plot.addItem(self.offloaded)
        self.plot.addItem(self.selected)
        self.plot.addItem(self.peak)
        for item in (self.budget, self.budget_label, self.measured, self.cursor):
            self.plot.addItem(item, ignoreBounds=True)
        self.scale = 1
        self.unit = "B"


class MemoryView(FollowsTheme, QWidget):
    """Per-device memory in use, budget line, peak marker, and the selected tensor's share.

    Listens to ``graph_changed``, ``memory_limits_changed``, ``result_changed``,
    ``selection_changed``, ``cursor_changed``; writes nothing to the document. Hovering lists the
    tensors resident at that moment (``MemoryCurve.at``).
    """

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self._plots: dict[str, _DevicePlot] = {}
        self._empty_rows: list[bool] | None = None
        """Which device rows were last sized as holding nothing (``_size_rows``)."""
        self._link: pg.PlotItem | None = None
        self._source: Callable[[Document], Timeline | None] = _document_timeline
        self._build_items()
        # graph, budget and result changes are drawn in a turn of their own, coalesced: a
        # slider drag or a burst of incumbents is drawn once, apart from the other views
        self._stale = False
        self._measured: MeasuredRun | None = None
        self._pacer = DrawPacer.of(document)
        document.graph_changed.connect(self._on_document_graph_changed)
        document.memory_limits_changed.connect(self._on_document_memory_limits_changed)
        document.result_changed.connect(self._on_document_result_changed)
        document.selection_changed.connect(self._on_document_selection_changed)
        document.cursor_changed.connect(self._on_document_cursor_changed)
        self._redraw()

    # ----- public API -------------------------------------------------------------------------
    def set_timeline_source(self, source: Callable[[Document], Timeline | None] | None) -> None:
        """Draw ``source(document)`` instead of ``document.timeline`` (``None``: back to it)."""
        self._source = source or _document_timeline
        self._redraw()

    def timeline(self) -> Timeline | None:
        """The timeline on display (from the current source)."""
        return self._source(self._document)

    def offloaded_curve(self, device: str) -> pg.PlotDataItem:
        """The band of bytes held on ``device`` as offloading copies."""
        self.flush()
        return self._plots[device].offloaded

    def plot(self, device: str) -> pg.PlotItem:
        """The plot of ``device``."""
        self.flush()
        return self._plots[device].plot

    def curve(self, device: str) -> pg.PlotDataItem:
        """The memory step curve of ``device`` (x in ms, y in :meth:`unit` units)."""
        self.flush()
        return self._plots[device].curve

    def unit(self, device: str) -> tuple[str, int]:
        """The y unit of ``device``'s plot: ``(name, bytes per unit)``."""
        self.flush()
        return self._plots[device].unit, self._plots[device].scale

    def budget_line(self, device: str) -> pg.InfiniteLine:
        """The horizontal budget line of ``device``."""
        self.flush()
        return self._plots[device].budget

    def selected_curve(self, device: str) -> pg.PlotDataItem:
        """The hatched share of the selected tensor on ``device`` (same units as the curve)."""
        self.flush()
        return self._plots[device].selected

    def cursor_line(self, device: str) -> pg.InfiniteLine:
        """The vertical step-cursor line on ``device``'s plot."""
        self.flush()
        return self._plots[device].cursor

    def flush(self) -> None:
        """Draw a change that waits for its own turn, now (before reading the plots)."""
        if self._stale:
            self._redraw()

    def set_measured(self, run: MeasuredRun | None) -> None:
        """Draw ``run``'s measured peak per device beside the predicted curve (dropped when
        another schedule is put on display)."""
        self._measured = run
        self._redraw()

    def set_compared(self, result: SolveResult | None) -> None:
        """Draw ``result``'s memory, dashed, over each device's curve (``None``: remove)."""
        self._compared = result
        self._redraw_compared()

    def compared_curve(self, device: str) -> pg.PlotDataItem:
        """The overlaid schedule's memory curve on ``device`` (plot units)."""
        self.flush()
        return self._plots[device].compared

    _compared: SolveResult | None = None

    def _redraw_compared(self) -> None:
        other = self._compared.timeline if self._compared is not None else None
        colors = colors_for(self)
        for item in self._plots.values():
            curve = other.memory.get(item.device) if other is not None else None
            if curve is None:
                item.compared.setData([], [])
                continue
            x, y = _steps(curve, timeline_extent(other))
            item.compared.setData(x, y / item.scale)
            item.compared.setPen(colors.pen(colors.foreground, 1.3, dashed=True))

    def measured_line(self, device: str) -> pg.InfiniteLine:
        """The horizontal line at ``device``'s measured peak (hidden without a measurement)."""
        self.flush()
        return self._plots[device].measured

    def link_x(self, plot: pg.PlotItem) -> None:
        """Keep every device plot's time axis in step with ``plot`` (e.g. the Gantt's)."""
        self._link = plot
        for item in self._plots.values():
            item.plot.setXLink(plot)

    def title(self, device: str) -> str:
        """The title above ``device``'s plot (plain text)."""
        self.flush()
        return html.unescape(self._plots[device].plot.titleLabel.text)

    def title_text(self, device: str, peak: int, budget: int, off_scale: bool) -> str:
        """Name the quantity: the curve counts *activations*; the device's memory also holds
        its fixed part (weights...), which the sliders include and the curve does not."""
        graph = self._document.graph
        fixed = graph.device(device).fixed_memory if graph and device in graph.device_index else 0
        text = f"{device} activations: peak {format_size(peak)}"
        if budget:
            text += f" = {peak / budget:.0%} of the {format_size(budget)} activation budget"
        if off_scale:
            text += " (off scale)"
        if fixed:
            # short: a plot title cannot wrap, and at 1280x720 the longer one was cut
            text += f" \u00b7 device memory {format_size(budget + fixed)} "
            text += f"({format_size(fixed)} fixed)"
        return text

    def resident_at(self, device: str, time: float) -> tuple[int, tuple[str, ...]]:
        """Bytes in use and resident tensors on ``device`` at ``time`` (ms)."""
        timeline = self.timeline()
        if timeline is None or device not in timeline.memory:
            return 0, ()
        return timeline.memory[device].at(time)

    def tooltip_at(self, device: str, time: float) -> str:
        """The hover text: memory in use at ``time`` and the tensors making it up."""
        timeline = self.timeline()
        graph = self._document.graph
        if timeline is None or device not in timeline.memory:
            return ""
        used, names = self.resident_at(device, time)
        budget = timeline.activation_budgets.get(device, 0)
        sizes = {
            n: int(graph.output_bytes[graph.index[n]]) for n in names if graph and n in graph.index
        }
        names = sorted(names, key=lambda n: -sizes.get(n, 0))
        shown = [f"{html.escape(n)} ({format_size(sizes.get(n, 0))})" for n in names[:_MAX_LISTED]]
        if len(names) > _MAX_LISTED:
            shown.append(f"… and {len(names) - _MAX_LISTED} more")
        work = workspace_at(timeline.memory[device], time)
        if work:  # no tensor: bytes the running operation needs only while it runs
            running = next(
                (o.node for o in timeline.ops if o.device == device and o.start <= time < o.end),
                "the running operation",
            )
            shown.insert(0, f"workspace of {html.escape(running)} ({format_size(work)})")
        return (
            f"<b>{device}</b> at {format_ms(time)}: activations {format_size(used)} of the "
            f"{format_size(budget)} activation budget<br>resident: "
            f"{', '.join(shown) or 'nothing'}"
        )

    # ----- building ---------------------------------------------------------------------------
    def _build_items(self) -> None:
        self._layout = pg.GraphicsLayoutWidget()
        # no side margins: the plots then line up with a PlotWidget (the Gantt) pixel for pixel
        self._layout.ci.setContentsMargins(0, 4, 0, 4)
        install_export_action(self._layout.scene(), self)
        self._hover = HoverProxy(self._layout.scene(), self._on_scene_hovered)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._layout)

    def _ensure_plots(self) -> None:
        """(Re)build the per-device plots when the device list changes."""
        graph = self._document.graph
        devices = [d.name for d in graph.devices] if graph is not None else []
        if list(self._plots) == devices:
            return
        self._layout.clear()
        self._plots = {}
        self._empty_rows = None
        # + the layout's margins and row spacing: without them the axis title was cut
        self._layout.setMinimumHeight(_PLOT_PIXELS * max(len(devices), 1) + _AXIS_PIXELS + 16)
        colors = colors_for(self)
        for row, device in enumerate(devices):
            item = _DevicePlot(self._layout, device, row)
            last = row == len(devices) - 1
            configure_plot(item.plot, colors, "time (ms)" if last else None)
            if not last:  # x-linked: the last plot's axis reads for all; grid lines stay
                item.plot.getAxis("bottom").setStyle(showValues=False)
                item.plot.getAxis("bottom").setHeight(2)
            # every curve the same height: the last row also holds the time axis
            self._layout.ci.layout.setRowMinimumHeight(
                row, _PLOT_PIXELS + (_AXIS_PIXELS if last else 0)
            )
            item.plot.setMouseEnabled(x=True, y=False)
            # the time range is set (standalone) or linked (the Gantt's), never auto: an auto
            # x range woke with the first setYRange and, through the link, moved the Gantt
            # (VGG16 opened on 26-441 ms of a 0-440 ms schedule)
            item.plot.enableAutoRange(x=False)
            item.plot.hideButtons()
            if row > 0:
                item.plot.setXLink(self._plots[devices[0]].plot)
            elif self._link is not None:
                item.plot.setXLink(self._link)
            self._plots[device] = item
        self._restyle()

    def _restyle(self) -> None:
        colors = colors_for(self)
        style_plot(self._layout, colors)
        for row, item in enumerate(self._plots.values()):
            color = colors.device(row)
            item.curve.setPen(colors.pen(color, 1.6))
            item.curve.setBrush(colors.device_fill(row))
            shade = QColor(colors.transfer).darker(140)
            item.offloaded.setPen(colors.pen(shade, 1.2))
            item.offloaded.setBrush(QBrush(shade, Qt.BrushStyle.DiagCrossPattern))
            item.selected.setPen(colors.pen(colors.selection, 1.2))
            item.selected.setBrush(QBrush(QColor(colors.selection), Qt.BrushStyle.BDiagPattern))
            item.budget.setPen(colors.pen(colors.budget, 1.5, dashed=True))
            item.budget_label.setColor(colors.budget)
            item.peak.setBrush(colors.peak)
            item.peak.setPen(colors.pen(colors.peak, 1))
            item.cursor.setPen(colors.pen(colors.cursor, 1.5, dashed=True))
            item.measured.setPen(colors.pen(colors.foreground, 1.5, dashed=True))
            item.measured.label.setColor(colors.foreground)

    def on_theme_changed(self) -> None:
        self._restyle()
        self._redraw()

    # ----- slots ------------------------------------------------------------------------------
    def _on_document_graph_changed(self) -> None:
        self._redraw_later()

    def _on_document_memory_limits_changed(self) -> None:
        self._redraw_later()

    def _on_document_result_changed(self) -> None:
        self._redraw_later()

    def _redraw_later(self) -> None:
        self._stale = True
        self._pacer.request(self, self._redraw_if_stale)
        # Until our turn, the plots do not follow the linked time axis: the Gantt chart's
        # redraw (in the turn before ours) resets it to the new schedule, and following it
        # repainted these plots there, old curves on the new range (4 ms of that turn's 15).
        # _redraw takes the linked range again.
        self._block_link(True)

    def _block_link(self, blocked: bool) -> None:
        for item in self._plots.values():
            item.plot.getViewBox().blockLink(blocked)

    def _redraw_if_stale(self) -> None:
        if self._stale:  # not drawn since (a read, a measured run or a new source drew it)
            self._redraw()

    def _on_document_selection_changed(self) -> None:
        if self._stale:
            return  # the pending redraw draws it
        for item in self._plots.values():
            self._draw_selected(item)

    def _on_document_cursor_changed(self) -> None:
        self._draw_cursor()

    def _on_scene_hovered(self, pos: QPointF) -> None:
        for device, item in self._plots.items():
            vb = item.plot.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                text = self.tooltip_at(device, vb.mapSceneToView(pos).x())
                QToolTip.showText(QCursor.pos(), text, self._layout)
                return
        QToolTip.hideText()

    # ----- drawing ----------------------------------------------------------------------------
    def _redraw(self) -> None:
        self._stale = False
        self._block_link(False)
        self._ensure_plots()
        timeline = self.timeline()
        result = self._document.result
        if self._measured is not None and (
            result is None or result.schedule is not self._measured.schedule
        ):
            self._measured = None  # it measured another schedule
        empty = []
        for item in self._plots.values():
            curve = timeline.memory.get(item.device) if timeline is not None else None
            end = timeline_extent(timeline) if timeline is not None else 0.0
            if self._measured is not None and len(self._measured.ends):
                end = max(end, float(self._measured.ends[-1]))  # as the Gantt's axis
            budget = self._budget(item.device)
            empty.append(self._draw_device(item, curve, end, budget) == 0)
            self._draw_offloaded(item, timeline, end)
            self._draw_selected(item)
        self._size_rows(empty)
        self._redraw_compared()
        if self._plots:
            first = next(iter(self._plots.values())).plot
            if self._link is None:
                first.setXRange(0.0, _x_extent(timeline), padding=0.01)
            else:
                # The link may have moved while our old limits clamped us (e.g. to the empty
                # document's range) or while we did not follow it (_redraw_later): take its
                # range again now that the limits fit the data.
                for item in self._plots.values():
                    box = item.plot.getViewBox()
                    box.linkedViewChanged(box.linkedView(pg.ViewBox.XAxis), pg.ViewBox.XAxis)
        self._draw_cursor()

    def _budget(self, device: str) -> int:
        timeline = self.timeline()
        if timeline is not None and device in timeline.activation_budgets:
            return int(timeline.activation_budgets[device])
        graph = self._document.graph
        return graph.device(device).activation_budget if graph is not None else 0

    def _size_rows(self, empty: list[bool]) -> None:
        """A device that holds nothing keeps its plot's minimum height, the others share the
        rest: at 1600x1000 ResNet-50's idle CPU took half the tab for a flat line."""
        if empty == self._empty_rows:
            return  # the same rows: setting them again lays the plots out again (each result)
        self._empty_rows = list(empty)
        layout = self._layout.ci.layout
        some = not all(empty)
        for row, nothing in enumerate(empty):
            axis = _AXIS_PIXELS if row == len(empty) - 1 else 0
            short = nothing and some
            layout.setRowMaximumHeight(row, _PLOT_PIXELS + axis if short else 1e6)
            layout.setRowStretchFactor(row, 0 if short else 1)

    def _draw_device(
        self, item: _DevicePlot, curve: MemoryCurve | None, end: float, budget: int
    ) -> int:
        """Draw one device's curve, budget and title; return the bytes it held at its peak."""
        x, y = _steps(curve, end)
        peak = int(y.max(initial=0))
        run = self._measured
        measured = run.peak_bytes.get(item.device) if run is not None else None
        held = max(peak, measured or 0)
        # a device that holds nothing shows its budget (a 0-1 B axis ticked 0.2 B: no such bytes)
        # the budget line stays on the plot while the curve keeps a third of its height: a
        # schedule using half its budget (a solve cut short) must show the room it left
        shown_budget = budget if held == 0 or budget <= BUDGET_IN_VIEW * held else None
        item.unit, item.scale = byte_unit(max(peak, shown_budget or 0, measured or 0))
        item.curve.setData(x, y / item.scale)
        # the title names device and quantity; a long rotated label ran into its neighbour's
        item.plot.setLabel("left", item.unit)
        top = max(peak, shown_budget or 0, measured or 0) / item.scale * 1.5 or 1.0  # labels
        item.plot.setYRange(0.0, top, padding=0.0)
        extent = end if end > 0 else 1.0  # as the Gantt: an empty plot spans 0..1 ms
        if self._link is None:
            item.plot.setLimits(xMin=-0.02 * extent, xMax=1.02 * extent)
        else:
            # the linked plot (the Gantt) bounds the range; our own limits, on a view box of
            # another width while the tab lays out, clamped the range and pushed it back
            # through the link (the same 26-441 ms)
            item.plot.setLimits(xMin=None, xMax=None)
        item.budget.setVisible(shown_budget is not None)
        item.budget.setPos(budget / item.scale)
        item.budget_label.setVisible(shown_budget is not None)
        item.budget_label.setText(f"activation budget {format_size(budget)}")
        # at the plot's right end: an empty plot's end is 0, where the right-anchored label
        # lay outside the plot but for a stray red "B" at its left edge
        item.budget_label.setPos(end if end > 0 else extent, budget / item.scale)
        # over the line, or under it when the plot below is empty: a third of a short plot
        # (ResNet-50's idle CPU at 1280x720) is less than the label's height, which was cut
        item.budget_label.setAnchor((1.0, 0.0) if held == 0 else (1.0, 1.0))
        item.measured.setVisible(measured is not None)
        if measured is not None:
            item.measured.setPos(measured / item.scale)
            item.measured.label.setFormat(run.peak_text(item.device))
        if curve is not None and peak > 0:
            j = int(np.argmax(y))
            item.peak.setData([x[j]], [peak / item.scale])  # the number is in the title
        else:
            item.peak.setData([], [])
        item.plot.setTitle(
            self.title_text(item.device, peak, budget, shown_budget is None and curve is not None),
            size="9pt",
            color=colors_for(self).foreground,
        )
        item.plot.layout.setRowFixedHeight(0, _TITLE_PIXELS)
        return held

    def _draw_selected(self, item: _DevicePlot) -> None:
        """The selected tensor's bytes while it is resident on this device."""
        timeline = self.timeline()
        graph = self._document.graph
        node = self._document.selection
        curve = timeline.memory.get(item.device) if timeline is not None else None
        if curve is None or graph is None or node not in graph.index:
            item.selected.setData([], [])
            return
        x, _ = _steps(curve, timeline_extent(timeline))
        size = int(graph.output_bytes[graph.index[node]]) / item.scale
        y = np.array([size if node in names else 0.0 for names in curve.resident])
        item.selected.setData(x, y)

    def _draw_offloaded(self, item: _DevicePlot, timeline: Timeline | None, end: float) -> None:
        """The bytes of the tensors on this device that arrived by an offloading copy."""
        graph = self._document.graph
        curve = timeline.memory.get(item.device) if timeline is not None else None
        if curve is None or graph is None or not any(tr.offload for tr in timeline.transfers):
            item.offloaded.setData([], [])
            return
        x, _ = _steps(curve, end)
        held = offloaded_bytes(timeline, item.device, graph.output_bytes, graph.index)
        item.offloaded.setData(x, held / item.scale)

    def _draw_cursor(self) -> None:
        op = self._document.cursor_op
        for item in self._plots.values():
            item.cursor.setVisible(op is not None)
            if op is not None:
                item.cursor.setPos(op.start)


def _document_timeline(document: Document) -> Timeline | None:
    return document.timeline


def offloaded_bytes(timeline: Timeline, device: str, sizes, index) -> np.ndarray:
    """Per step of ``device``'s memory curve, the bytes of resident tensors that arrived there
    by an offloading copy (not computed there since).

    A tensor is offloaded on ``device`` from the start of the copy that brought it until an
    operation computes it there again; it counts while the curve lists it as resident.
    """
    curve = timeline.memory[device]
    events = [
        (tr.start, 1, tr.tensor) for tr in timeline.transfers if tr.offload and tr.target == device
    ]
    events += [(op.start, 0, op.node) for op in timeline.ops if op.device == device]
    events.sort(key=lambda e: e[0])
    held: set[str] = set()
    out = np.zeros(len(curve.bytes))
    e = 0
    for j, (time, names) in enumerate(zip(curve.times, curve.resident, strict=True)):
        while e < len(events) and events[e][0] <= time:
            _, is_copy, tensor = events[e]
            (held.add if is_copy else held.discard)(tensor)
            e += 1
        out[j] = sum(int(sizes[index[x]]) for x in names if x in held)
    return out


def _x_extent(timeline: Timeline | None) -> float:
    """The time span to show: the schedule's length, or 1 ms before there is one."""
    return timeline_extent(timeline)


def _steps(curve: MemoryCurve | None, end: float) -> tuple[np.ndarray, np.ndarray]:
    """Step edges and values for ``stepMode="center"``: the curve's times plus its end."""
    if curve is None or len(curve.bytes) == 0:
        return np.zeros(1), np.zeros(0)
    x = np.append(curve.times.astype(float), max(end, float(curve.times[-1])))
    return x, curve.bytes.astype(float)


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(MemoryView))
