"""Memory per tensor, like PyTorch's memory_viz: one stacked band per resident tensor, per device.

This module is the widget; the bands and their words are :mod:`app.views.tensor_bands` (no Qt),
their colours :mod:`app.views.tensor_style`.

At each step of a device's :class:`~solver.execution.simulate.MemoryCurve` the resident tensors are
stacked in graph order, so the outline of the stack is exactly the memory curve and each band's
height is one tensor's bytes. Bands are coloured by layer (a backward node shares its forward node's
hue); a band that a recomputation brought back is lighter and hatched, one a copy brought is
outlined in the transfer colour. Hover names the tensor and why it is resident (who needs it
next, or that it is kept); a click selects its node everywhere; the step cursor lists the exact
set resident on every device. A diff mode overlays another schedule found for this graph (another
budget, or a single-device method from the Comparison) as a dashed outline, and the cursor line
then names the tensors resident in only one of the two.

Listens to ``graph_changed``, ``result_changed``, ``selection_changed`` and ``cursor_changed``;
writes ``document.set_selection`` only. All bands of a device are one ``pg.BarGraphItem``.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QToolTip, QVBoxLayout, QWidget

from app.document import Document
from app.theme import FollowsTheme, colors_for, style_plot
from app.views.plotting import HoverProxy, byte_unit, configure_plot, install_export_action
from app.views.tensor_bands import (
    EMPTY,
    ORIGINS,
    WORKSPACE,
    Bands,
    resident_reason,
    resident_text,
    tensor_bands,
)
from app.views.tensor_style import BandBrushes
from solver.document.units import format_ms, format_size
from solver.execution.simulate import Timeline
from solver.optimize.solve import SolveResult

__all__ = ["ORIGINS", "Bands", "TensorMemoryView", "tensor_bands", "resident_reason"]

BUDGET_IN_VIEW = 3.0
"""The budget line is drawn while it is at most this many times the highest stack."""
LABEL_SHARE = 0.1
"""A band this share of the time and of the height, or more, carries its tensor's name."""
MAX_LABELS = 12

_PLOT_PIXELS = 150
_IDLE_PIXELS = 60
"""A device that holds nothing: a row with its title and time axis, no more."""
_UNBOUNDED = 16_777_215.0  # QWIDGETSIZE_MAX: no maximum


class TensorMemoryView(FollowsTheme, QWidget):
    """Stacked per-tensor bands per device (see module docstring)."""

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self._plots: dict[str, tuple[pg.PlotItem, pg.BarGraphItem, pg.BarGraphItem]] = {}
        self._bands: dict[str, Bands] = {}
        self._scale: dict[str, int] = {}
        self._cursors: dict[str, pg.InfiniteLine] = {}
        self._dirty = False
        self._other: SolveResult | None = None
        self._others: dict[str, pg.PlotDataItem] = {}
        self._budgets: dict[str, pg.InfiniteLine] = {}
        """Each device's activation budget, dashed, as in the memory curves."""
        self._labels: dict[str, list[pg.TextItem]] = {}
        """Names written on each device's biggest bands."""
        self._choices: list[SolveResult] = []
        self._build_items()
        document.graph_changed.connect(self._redraw)
        document.result_changed.connect(self._redraw)
        document.selection_changed.connect(self._redraw_selection)
        document.cursor_changed.connect(self._redraw_cursor)
        self._redraw()

    # ----- public API -------------------------------------------------------------------------
    def bands(self, device: str) -> Bands:
        """The bands drawn for ``device`` (bytes, not plot units)."""
        return self._bands[device]

    def plot(self, device: str) -> pg.PlotItem:
        return self._plots[device][0]

    def layer(self, device: str) -> pg.BarGraphItem:
        """The one bar item holding every band of ``device``."""
        return self._plots[device][1]

    def selected_layer(self, device: str) -> pg.BarGraphItem:
        """The outlines of the selected tensor's bands on ``device``."""
        return self._plots[device][2]

    def scale(self, device: str) -> int:
        """Bytes per plot unit on ``device``'s y axis."""
        return self._scale.get(device, 1)

    def compare_choices(self) -> list[str]:
        """The labels of the schedules the diff mode can compare with (first: none)."""
        return [self._compare.itemText(i) for i in range(self._compare.count())]

    def compare_with(self, result: SolveResult | None) -> None:
        """Overlay ``result``'s memory (``None``: no diff)."""
        self._other = result
        self._redraw_other()
        self._redraw_cursor()

    def other_curve(self, device: str) -> pg.PlotDataItem:
        """The compared schedule's memory outline on ``device`` (plot units)."""
        return self._others[device]

    @property
    def cursor_text(self) -> str:
        """What the step cursor shows: the exact resident set per device (plain text)."""
        return self._cursor_label.text()

    def tooltip_at(self, device: str, time: float, level_bytes: float) -> str:
        """The hover text at ``time`` (ms) and ``level_bytes`` on ``device``'s stack."""
        bands, graph, timeline = self._bands.get(device), self._document.graph, self._timeline()
        if bands is None or graph is None or timeline is None:
            return ""
        j = bands.at(time, level_bytes)
        if j is None:
            return ""
        name = graph.nodes[bands.node[j]].id
        if bands.origin[j] == WORKSPACE:
            return (
                f"<b>{html.escape(name)}</b> running on {device}: workspace "
                f"{format_size(bands.height[j])}<br>needed only while it runs, freed when it ends"
            )
        reason = resident_reason(graph, timeline, device, name, time)
        return (
            f"<b>{html.escape(name)}</b> on {device}: {format_size(bands.height[j])}, "
            f"{ORIGINS[bands.origin[j]]}<br>{html.escape(reason)}"
        )

    def select_at(self, device: str, time: float, level_bytes: float) -> str | None:
        """Select the tensor under ``(time, level_bytes)`` (what a click does)."""
        bands, graph = self._bands.get(device), self._document.graph
        j = bands.at(time, level_bytes) if bands is not None else None
        node = graph.nodes[bands.node[j]].id if j is not None and graph is not None else None
        self._document.set_selection(node)
        return node

    # ----- building ---------------------------------------------------------------------------
    def _build_items(self) -> None:
        self._cursor_label = QLabel()
        self._cursor_label.setWordWrap(True)
        self._cursor_label.setContentsMargins(6, 2, 6, 2)
        self._legend = QLabel()
        self._legend.setWordWrap(True)  # never sets the window's minimum width
        self._legend.setContentsMargins(6, 2, 6, 0)
        self._layout = pg.GraphicsLayoutWidget()
        install_export_action(self._layout.scene(), self)
        self._hover = HoverProxy(self._layout.scene(), self._on_scene_hovered)
        self._layout.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self._compare = QComboBox()
        self._compare.setToolTip("Diff mode: outline another schedule of this graph")
        self._compare.activated.connect(self._on_compare_activated)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 6, 0)
        top.addWidget(self._legend, 1)
        top.addWidget(QLabel("Compare with"))
        top.addWidget(self._compare)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(top)
        layout.addWidget(self._cursor_label)
        layout.addWidget(self._layout, 1)

    def _ensure_plots(self) -> None:
        graph = self._document.graph
        devices = [d.name for d in graph.devices] if graph is not None else []
        if list(self._plots) == devices:
            return
        self._layout.clear()
        self._plots, self._cursors, self._others = {}, {}, {}
        self._budgets, self._labels = {}, {}
        self._layout.setMinimumHeight(_PLOT_PIXELS * max(len(devices), 1))
        colors = colors_for(self)
        first = None
        for row, device in enumerate(devices):
            plot = self._layout.addPlot(row=row, col=0)
            configure_plot(plot, colors, "time (ms)" if row == len(devices) - 1 else None)
            plot.setMouseEnabled(x=True, y=False)
            plot.hideButtons()
            bars = pg.BarGraphItem(x0=[], width=[], y0=[], height=[])
            selected = pg.BarGraphItem(x0=[], width=[], y0=[], height=[])
            cursor = pg.InfiniteLine(angle=90, movable=False)
            budget = pg.InfiniteLine(
                angle=0,
                movable=False,
                label="",
                labelOpts={"position": 0.98, "anchors": [(1, 1)] * 2},
            )
            other = pg.PlotDataItem(stepMode="center")
            plot.addItem(bars)
            plot.addItem(selected)
            plot.addItem(other)
            plot.addItem(cursor, ignoreBounds=True)
            plot.addItem(budget, ignoreBounds=True)
            self._budgets[device] = budget
            self._labels[device] = []
            self._others[device] = other
            if first is not None:
                plot.setXLink(first)
            first = first or plot
            self._plots[device] = (plot, bars, selected)
            self._cursors[device] = cursor
        self._restyle()

    def _restyle(self) -> None:
        colors = colors_for(self)
        style_plot(self._layout, colors)
        for device, (_, _, selected) in self._plots.items():
            selected.setOpts(brush=pg.mkBrush(None), pen=colors.pen(colors.selection, 2.5))
            self._cursors[device].setPen(colors.pen(colors.cursor, 1.5, dashed=True))
            self._others[device].setPen(colors.pen(colors.foreground, 2, dashed=True))
            self._budgets[device].setPen(colors.pen(colors.budget, 1.5, dashed=True))
            self._budgets[device].label.setColor(colors.budget)
        self._legend.setText(
            "One band per resident tensor, coloured by layer \u00b7 "
            "<i>lighter, hatched</i>: recomputed \u00b7 "
            f"<span style='color:{colors.transfer}'>outlined</span>: copied from another device"
            " \u00b7 <i>cross-hatched, dashed</i>: offloaded here and kept"
            " \u00b7 <i>dotted</i>: a running node's workspace"
            " \u00b7 hover for why it is resident, click to select"
        )

    def on_theme_changed(self) -> None:
        if self._plots:
            self._restyle()
            self._redraw()

    # ----- slots ------------------------------------------------------------------------------
    def _on_scene_hovered(self, pos: QPointF) -> None:
        hit = self._hit(pos)
        text = self.tooltip_at(*hit) if hit is not None else ""
        if text:
            QToolTip.showText(QCursor.pos(), text, self._layout)
        else:
            QToolTip.hideText()

    def _on_scene_clicked(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            hit = self._hit(event.scenePos())
            if hit is not None:
                self.select_at(*hit)

    def _hit(self, pos: QPointF) -> tuple[str, float, float] | None:
        for device, (plot, _, _) in self._plots.items():
            vb = plot.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                point = vb.mapSceneToView(pos)
                return device, point.x(), point.y() * self._scale.get(device, 1)
        return None

    # ----- drawing ----------------------------------------------------------------------------
    def _timeline(self) -> Timeline | None:
        return self._document.timeline

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty:
            self._redraw()

    def _redraw(self) -> None:
        if not self.isVisible() and self._plots:
            self._dirty = True  # a hidden tab: redraw when shown, not on every incumbent
            return
        self._dirty = False
        self._ensure_plots()
        graph, timeline = self._document.graph, self._timeline()
        colors = colors_for(self)
        brushes = BandBrushes(graph, colors) if graph is not None else None
        if graph is None:
            return  # no devices, no plots
        for device, (plot, bars, _) in self._plots.items():
            bands = tensor_bands(graph, EMPTY if timeline is None else timeline, device)
            self._bands[device] = bands
            top = float((bands.y0 + bands.height).max(initial=0.0))
            unit, scale = byte_unit(top)
            self._scale[device] = scale
            fills = [brushes.brush(k, o) for k, o in zip(bands.node, bands.origin, strict=True)]
            lines = [brushes.pen(o) for o in bands.origin]
            # pyqtgraph 0.14 fails on empty per-bar lists: nothing to draw, no lists
            bars.setOpts(
                x0=bands.x0, width=bands.width, y0=bands.y0 / scale, height=bands.height / scale,
                brushes=fills or None, pens=lines or None,
                brush=pg.mkBrush(None), pen=pg.mkPen(None),
            )  # fmt: skip
            # a device the schedule leaves empty gets a thin row saying so, not a 0-1 B axis
            idle = top == 0 and timeline is not None and bool(timeline.ops)
            plot.setLabel("left", "" if idle else unit)
            title = "holds nothing in this schedule" if idle else "resident tensors"
            plot.setTitle(f"{device}: {title}", size="9pt", color=colors.foreground)
            plot.getAxis("left").setTicks([[]] if idle else None)
            plot.setMaximumHeight(_IDLE_PIXELS if idle else _UNBOUNDED)
            end = timeline.total_ms if timeline is not None and timeline.ops else 1.0
            plot.setXRange(0, end, padding=0.01)
            budget = int(timeline.activation_budgets.get(device, 0)) if timeline else 0
            shown = 0 < budget <= BUDGET_IN_VIEW * top  # the room left, as the memory plot shows
            line = self._budgets[device]
            line.setVisible(shown and not idle)
            line.setPos(budget / scale)
            line.label.setFormat(f"activation budget {format_size(budget)}")
            high = max(top, budget if shown else 0) / scale
            plot.setYRange(0, high * 1.05 if high > 0 else 1.0, padding=0)
            self._label_bands(device, bands, end, max(top, budget if shown else 0), scale, graph)
        self._fill_compare_choices()
        self._redraw_other()
        self._redraw_selection()
        self._redraw_cursor()

    def budget_line(self, device: str) -> pg.InfiniteLine:
        """The dashed line at ``device``'s activation budget."""
        return self._budgets[device]

    def band_labels(self, device: str) -> list[str]:
        """The names written on ``device``'s biggest bands."""
        return [label.textItem.toPlainText() for label in self._labels.get(device, [])
                if label.isVisible()]  # fmt: skip

    def _label_bands(self, device, bands: Bands, end: float, top: float, scale: int, graph):
        """Write the tensor's name on each band big enough to hold it (a tenth of the time
        and of the height), the biggest first, at most :data:`MAX_LABELS` per device: 145
        layers in look-alike colours had to be hovered one by one."""
        plot = self.plot(device)
        labels = self._labels[device]
        big = []
        if top > 0 and end > 0 and len(bands.x0):
            area = (bands.width / end) * (bands.height / top)
            keep = (bands.width >= LABEL_SHARE * end) & (bands.height >= LABEL_SHARE * top)
            keep &= bands.origin != WORKSPACE
            big = sorted(np.nonzero(keep)[0], key=lambda j: -area[j])[:MAX_LABELS]
        colors = colors_for(self)
        while len(labels) < len(big):
            label = pg.TextItem(anchor=(0.5, 0.5))
            plot.addItem(label, ignoreBounds=True)
            labels.append(label)
        for label in labels[len(big) :]:
            label.setVisible(False)
        for label, j in zip(labels, big, strict=False):
            label.setText(graph.nodes[int(bands.node[j])].id, color=colors.foreground)
            label.setPos(
                bands.x0[j] + bands.width[j] / 2, (bands.y0[j] + bands.height[j] / 2) / scale
            )
            label.setVisible(True)

    def _fill_compare_choices(self) -> None:
        shown = self._document.result
        cached = getattr(self._document, "cached_results", lambda: [])()
        self._choices = [r for r in cached if r is not shown]
        if self._other is not None and self._other not in self._choices:
            self._other = None  # e.g. another graph
        self._compare.clear()
        self._compare.addItem("nothing")
        for result in self._choices:
            budgets = ", ".join(
                f"{d} {format_size(b)}" for d, b in sorted(result.schedule.memory_limits.items())
            )
            self._compare.addItem(f"{result.method} \u00b7 {format_ms(result.timeline.total_ms)}"
                                  f" \u00b7 {budgets}")  # fmt: skip
        if self._other is not None:
            self._compare.setCurrentIndex(self._choices.index(self._other) + 1)

    def _on_compare_activated(self, index: int) -> None:
        self.compare_with(self._choices[index - 1] if index > 0 else None)

    def _redraw_other(self) -> None:
        timeline = self._other.timeline if self._other is not None else None
        for device, other in self._others.items():
            curve = timeline.memory.get(device) if timeline is not None else None
            if curve is None or len(curve.times) == 0:
                other.setData([], [])
                continue
            end = max(timeline.total_ms, float(curve.times[-1]))
            x = np.append(curve.times.astype(float), end)
            other.setData(x, curve.bytes.astype(float) / self._scale.get(device, 1))

    def _redraw_selection(self) -> None:
        graph = self._document.graph
        k = graph.index.get(self._document.selection) if graph is not None else None
        for device, (_, _, selected) in self._plots.items():
            bands, scale = self._bands.get(device), self._scale.get(device, 1)
            keep = bands.node == k if bands is not None and k is not None else np.zeros(0, bool)
            if bands is None or not keep.any():
                selected.setOpts(x0=[], width=[], y0=[], height=[])
                continue
            selected.setOpts(
                x0=bands.x0[keep], width=bands.width[keep],
                y0=bands.y0[keep] / scale, height=bands.height[keep] / scale,
            )  # fmt: skip

    def _redraw_cursor(self) -> None:
        op, timeline, graph = self._document.cursor_op, self._timeline(), self._document.graph
        for cursor in self._cursors.values():
            cursor.setVisible(op is not None)
            if op is not None:
                cursor.setPos(op.start)
        if op is None or timeline is None or graph is None:
            self._cursor_label.setText("")
            return
        other = self._other.timeline if self._other is not None else None
        self._cursor_label.setText(resident_text(graph, timeline, op, self._document.cursor, other))


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(TensorMemoryView))
