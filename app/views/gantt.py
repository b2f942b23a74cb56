"""Gantt chart of the schedule on display: what ran where, when, and what was copied.

One lane per device and, below it, one lane per outgoing device link for transfers. First
computations are filled with their kind's colour (forward, loss, backward); recomputations are a
lighter, hatched, outlined version of it; transfers have their own colour. Everything is drawn
from the simulator's timeline, never from solver variables.

This module is the widget: its controls, navigation, slots and public API. What it draws lives
beside it, one job per module: ``gantt_lanes`` (lanes and bars as arrays, hit tests),
``gantt_layers`` (the bar items and their look), ``gantt_labels`` (names on bars),
``gantt_geometry`` (flow arrows, SVG hatching) and ``gantt_text`` (summary, tooltips, legend).
"""

from __future__ import annotations

import contextlib
import html
import logging
from collections.abc import Callable, Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, QSignalBlocker, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QTableWidget,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.theme import FollowsTheme, colors_for, style_plot
from app.views.draw_pacer import DrawPacer
from app.views.gantt_geometry import flow_segments
from app.views.gantt_labels import BarLabels
from app.views.gantt_lanes import Bar, LaneTable, lane_names, link_lane, timeline_extent
from app.views.gantt_layers import GanttLayers
from app.views.gantt_text import (
    compared_text,
    legend_html,
    op_tooltip,
    range_summary,
    range_totals,
    summary_html,
    transfer_tooltip,
)
from app.views.measured import MeasuredRun, prediction_basis
from app.views.plotting import (
    HoverProxy,
    configure_plot,
    has_replay,
    install_export_action,
)
from app.views.slice_table import fill_slice_table, make_slice_table
from app.views.slices import slice_rows
from app.views.timeline_nav import (
    OverviewStrip,
    TimelineViewBox,
    focus_x,
    merge_intervals,
    navigate,
)
from solver.execution.explain import recompute_reason
from solver.execution.simulate import Timeline
from solver.optimize.solve import SolveResult

__all__ = ["Bar", "GanttView"]

logger = logging.getLogger(__name__)

_HIT_PIXELS = 3.0
_LANE_PIXELS = 16
"""Minimum height of one lane on screen (a line of tick text)."""
_AXIS_PIXELS = 38
"""The time axis with its title, and the plot's margins."""
_FLOWS_UP_TO = 2000
"""Flow arrows for every transfer up to this many; beyond, only the selected node's."""


class GanttView(FollowsTheme, QWidget):
    """Operations and transfers over time, one lane per device and per device link.

    Listens to ``graph_changed``, ``result_changed``, ``selection_changed``, ``cursor_changed``.
    A click selects the node under the mouse (``document.set_selection``; a transfer selects its
    tensor, empty space clears); a double click also moves the step cursor to that operation.
    Navigation as in Perfetto (``app.views.timeline_nav``): W/S zoom, A/D pan (arrows too while
    the chart has the focus), the wheel pans and Ctrl+wheel zooms, an overview strip shows the
    visible window, Shift+drag measures a range (busy and idle time per lane), the search field
    selects a node by name (so every view highlights it), and flow arrows lead from each copy to
    the operation that reads it. Items are built once; ``_redraw`` only feeds them arrays.

    The timeline drawn is ``source(document)`` (default: ``document.timeline``); another
    source, e.g. a concurrent-execution replay, plugs in with :meth:`set_timeline_source`.
    """

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self._table = LaneTable((), None)
        self._reasons: dict[int, str] = {}
        self._showing_provisional = False
        self._full_range: tuple[float, float] | None = None
        self._source: Callable[[Document], Timeline | None] = _document_timeline
        self._matches: list[str] = []
        self._names: set[str] = set()
        self._range: tuple[float, float] | None = None
        self._measured: MeasuredRun | None = None
        self._label_timer = QTimer(self, singleShot=True, interval=0)
        # a new result is drawn in a turn of its own, coalesced (see _on_document_result_changed)
        self._stale = False
        self._pacer = DrawPacer.of(document)
        self._build_items()
        document.graph_changed.connect(self._on_document_graph_changed)
        document.result_changed.connect(self._on_document_result_changed)
        document.selection_changed.connect(self._on_document_selection_changed)
        document.cursor_changed.connect(self._on_document_cursor_changed)
        document.hover_changed.connect(self._redraw_hover)
        document.memory_limits_changed.connect(self._update_header)
        self._redraw()
        self.reset_view()

    # ----- public API -------------------------------------------------------------------------
    @property
    def plot(self) -> pg.PlotItem:
        """The plot, for x-linking other views to it."""
        self.flush()
        return self._plot

    @property
    def summary_text(self) -> str:
        """The one-line summary above the chart (rich text)."""
        self.flush()
        return self._header.text()

    @property
    def bar_names(self) -> list[str]:
        """The node names written on bars now (only bars wide enough on screen get one)."""
        return self._labels.shown

    @property
    def lanes(self) -> tuple[str, ...]:
        """Lane names from top to bottom: devices and ``"src → dst"`` links."""
        self.flush()
        return self._table.lanes

    @property
    def overview(self) -> OverviewStrip:
        """The overview strip under the chart."""
        self.flush()
        return self._overview

    @property
    def flows(self) -> pg.PlotCurveItem:
        """The flow arrows' line segments (x, y in pairs: copy end -> consumer start)."""
        self.flush()
        return self._flow_lines

    @property
    def range_text(self) -> str:
        """The busy/idle totals of the selected range (plain text), or ``""``."""
        self.flush()
        return self._range_label.toolTip() if self._range is not None else ""

    def flush(self) -> None:
        """Draw a result that arrived but waits for its own turn, now (before reading)."""
        if self._stale:
            self._apply_result()

    def set_measured(self, run: MeasuredRun | None) -> None:
        """Show ``run`` (an execution of the schedule on display) as ghost bars beside the
        prediction; it is dropped when another schedule is put on display."""
        self._measured = run
        self._on_document_result_changed()

    def set_compared(self, result: SolveResult | None) -> None:
        """Overlay ``result`` (another stored schedule of this graph: another budget, method,
        with or without offloading) as ghost bars in the lower half of each lane, as
        TensorBoard overlays two runs; ``None`` removes it. A measured run has precedence."""
        self._compared = result
        self._on_document_result_changed()

    @property
    def compared(self) -> SolveResult | None:
        """The schedule overlaid for comparison, if any."""
        return self._compared

    _compared: SolveResult | None = None

    @property
    def measured(self) -> MeasuredRun | None:
        """The execution drawn as ghost bars, if any."""
        self.flush()
        return self._measured

    def set_timeline_source(self, source: Callable[[Document], Timeline | None] | None) -> None:
        """Draw ``source(document)`` instead of ``document.timeline`` (``None``: back to it)."""
        self._source = source or _document_timeline
        self._on_document_result_changed()

    def timeline(self) -> Timeline | None:
        """The timeline on display (from the current source)."""
        return self._source(self._document)

    def navigate(self, key: int, center: float | None = None) -> bool:
        """Zoom or pan as key ``key`` would (W/S/A/D, arrows; F focuses the selection);
        a zoom keeps ``center`` (ms; default: the time under the mouse, if it is over the
        chart) in place. False if it is not a navigation key."""
        if Qt.Key(key) == Qt.Key.Key_F:
            return self.focus_selection()
        if center is None:
            center = self._time_under_mouse()
        return navigate(self._plot.getViewBox(), key, center)

    def focus_selection(self) -> bool:
        """Show the measured range, or else the selected node's bars, filling the chart (F)."""
        self.flush()
        vb = self._plot.getViewBox()
        if self._range is not None:
            focus_x(vb, *self._range, margin=0.05)
            return True
        bars = self._table.bars_of(self._document.selection)
        if not bars:
            return False
        focus_x(vb, min(b.start for b in bars), max(b.end for b in bars))
        return True

    def _time_under_mouse(self) -> float | None:
        vb = self._plot.getViewBox()
        view = self._widget
        local = view.mapFromGlobal(QCursor.pos())
        if not view.rect().contains(local):
            return None
        scene = view.mapToScene(local)
        if not vb.sceneBoundingRect().contains(scene):
            return None
        return float(vb.mapSceneToView(scene).x())

    @property
    def slice_table(self) -> QTableWidget:
        """The slice table of the measured range (hidden without one)."""
        self.flush()
        return self._slices

    def find(self, text: str) -> list[str]:
        """Node ids containing ``text`` (case-insensitive), in graph order; selects the first
        (every view then highlights it) and shows it in the chart."""
        graph = self._document.graph
        needle = text.strip().lower()
        self._matches = (
            [n.id for n in graph.nodes if needle in n.id.lower()] if graph and needle else []
        )
        if self._matches:
            self._select_match(self._matches[0])
        self._search.setToolTip(f"{len(self._matches)} nodes match" if needle else "")
        return list(self._matches)

    def find_next(self) -> str | None:
        """Select the next node matching the search (Enter in the field), wrapping around."""
        if not self._matches:
            return None
        selected = self._document.selection
        k = self._matches.index(selected) + 1 if selected in self._matches else 0
        node = self._matches[k % len(self._matches)]
        self._select_match(node)
        return node

    def select_range(self, t0: float | None, t1: float | None = None) -> None:
        """Measure ``[t0, t1]`` (ms): outline it and total busy/idle time per lane (None clears)."""
        self.flush()
        if t0 is None or t1 is None or t1 <= t0:
            self._range = None
            self._region.setVisible(False)
            self._show_range_text()
            return
        self._range = (float(t0), float(t1))
        self._region.setVisible(True)
        with QSignalBlocker(self._region):
            self._region.setRegion(self._range)
        self._show_range_text()

    def _show_range_text(self) -> None:
        """The measured range's readout: one short line, the totals in its tooltip, and
        the slice table (count and time of each kind in the range) over the chart."""
        if self._range is None:
            self._range_label.setText("")
            self._range_label.setToolTip(_RANGE_HINT)
            self._slices.hide()
            return
        self._range_label.setText(range_summary(self._table, *self._range))
        self._range_label.setToolTip(range_totals(self._table, *self._range))
        rows = slice_rows(self.timeline(), *self._range)
        fill_slice_table(self._slices, rows)
        self._slices.setVisible(bool(rows))
        self._place_slices()

    def _place_slices(self) -> None:
        """The slice table in the chart's top-right corner, over the plot."""
        table, chart = self._slices, self._widget
        width = table.horizontalHeader().length() + 4
        height = table.verticalHeader().length() + table.horizontalHeader().height() + 4
        table.setFixedSize(width, min(height, max(chart.height() - 8, 40)))
        table.move(max(chart.width() - width - 8, 0), 4)
        table.raise_()

    def busy_in_range(self, lane: str, t0: float, t1: float) -> float:
        """Milliseconds lane ``lane`` is busy within ``[t0, t1]``."""
        self.flush()
        return self._table.busy(lane, t0, t1)

    def layer(self, name: str) -> pg.BarGraphItem:
        """The bar item of one layer: a node kind (first computations), ``"recompute:<kind>"``,
        ``"transfer"``, ``"selection"`` or ``"cursor"``."""
        self.flush()
        return self._layers[name]

    def bar_at(self, time: float, lane: float, tolerance: float = 0.0) -> Bar | None:
        """The bar under ``(time, lane)`` in plot coordinates, if any."""
        self.flush()
        return self._table.bar_at(time, lane, tolerance)

    def tooltip_at(self, time: float, lane: float, tolerance: float = 0.0) -> str:
        """The hover text for ``(time, lane)``, or ``""`` over empty space."""
        bar = self.bar_at(time, lane, tolerance)
        return self._tooltip(bar) if bar is not None else ""

    def add_tools(self, *widgets: QWidget) -> None:
        """Put ``widgets`` in the tool row, after the search and flows (the Schedule tab's
        concurrent toggle: one row fewer above the chart)."""
        for i, widget in enumerate(widgets):
            self._tools.insertWidget(2 + i, widget)

    def reset_view(self) -> None:
        """Show the whole schedule."""
        self.flush()
        timeline = self.timeline()
        end = self._x_end(timeline)
        self._plot.setXRange(0.0, max(end, 1e-9), padding=0.01)
        self._plot.setYRange(-0.6, max(len(self._table.lanes), 1) - 0.4, padding=0.0)
        self._full_range = tuple(self._plot.getViewBox().viewRange()[0])

    @contextlib.contextmanager
    def export_context(self, kind: str) -> Iterator[None]:
        """For an SVG export, draw the recomputations' hatching as lines (``app.export``)."""
        self.flush()
        if kind != "svg":
            yield
            return
        with self._layers.svg_hatching():
            yield

    # ----- building -----------------------------------------------------------------------
    def _build_items(self) -> None:
        self._header = _SummaryLabel()
        self._header.setTextFormat(Qt.TextFormat.RichText)
        # a long summary wraps rather than force the whole view wider; it is never cut, as a
        # cut label is not cut in an SVG export, where it ran over the legend
        self._header.setWordWrap(True)
        self._header.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._legend = QLabel()
        self._legend.setTextFormat(Qt.TextFormat.RichText)
        reset = QToolButton(text="Reset view", toolTip="Show the whole schedule (zoom: wheel)")
        reset.clicked.connect(self.reset_view)
        top = QHBoxLayout()
        top.setContentsMargins(6, 2, 6, 0)
        top.addWidget(self._header, 1)
        top.addWidget(self._legend)
        top.addWidget(reset)
        self._search = QLineEdit(placeholderText="Find node\u2026", clearButtonEnabled=True)
        self._search.setMaximumWidth(200)
        self._search.textEdited.connect(self.find)
        self._search.returnPressed.connect(self.find_next)
        self._show_flows = QCheckBox("Flows", checked=True)
        self._show_flows.setToolTip("Arrows from each copy to the operation that reads it")
        self._show_flows.toggled.connect(self._redraw_flows)
        self._range_label = QLabel()
        self._range_label.setToolTip(_RANGE_HINT)
        # never wider than the room it gets: a long readout widened the whole Schedule tab,
        # and half the chart, the legend and Reset view went off-screen until Esc
        self._range_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._range_label.setMinimumWidth(0)
        tools = QHBoxLayout()
        tools.setContentsMargins(6, 2, 6, 0)
        tools.addWidget(self._search)
        tools.addWidget(self._show_flows)
        tools.addWidget(self._range_label, 1)
        # the keys in a tooltip: spelt out, the hint took a row's width at 1280x720
        hint = QLabel("\u2328 keys")
        hint.setStyleSheet("color: palette(mid);")
        hint.setProperty("export_hidden", True)  # a hint for the screen, not for a figure
        hint.setToolTip(
            "W/S or \u2191/\u2193: zoom about the mouse \u00b7 A/D or \u2190/\u2192: pan \u00b7 "
            "Ctrl+wheel: zoom \u00b7 F: focus the selection \u00b7 Shift+drag: measure a range, "
            "its slices by kind (Esc clears) \u00b7 click a bar: select its node"
        )
        tools.addWidget(hint)
        self._tools = tools
        self._viewbox = TimelineViewBox()
        self._widget = pg.PlotWidget(viewBox=self._viewbox)
        self._widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._widget.installEventFilter(self)
        self._plot = self._widget.getPlotItem()
        colors = colors_for(self)
        configure_plot(self._plot, colors)
        self._plot.invertY(True)
        self._plot.setMouseEnabled(x=True, y=False)
        self._plot.hideButtons()
        install_export_action(self._widget.scene(), self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(top)
        layout.addLayout(tools)
        layout.addWidget(self._widget, 1)
        self._overview = OverviewStrip()
        self._overview.follow(self._plot.getViewBox())
        layout.addWidget(self._overview)
        self._layers = GanttLayers(self._plot)
        self._hatch_lines = self._layers.hatch_lines
        self._labels = BarLabels(self._plot, self.font())
        self._cursor_line = pg.InfiniteLine(angle=90, movable=False)
        self._plot.addItem(self._cursor_line, ignoreBounds=True)
        self._flow_lines = pg.PlotCurveItem(connect="pairs")
        self._flow_tips = pg.ScatterPlotItem(size=7, symbol="t")  # a triangle pointing down
        self._region = pg.LinearRegionItem(movable=True)
        self._region.setVisible(False)
        self._region.sigRegionChanged.connect(self._on_region_changed)
        for item in (self._flow_lines, self._flow_tips, self._region):
            self._plot.addItem(item, ignoreBounds=True)
        self._viewbox.range_selected.connect(self.select_range)
        self._slices = make_slice_table(self._widget)
        self._hover = HoverProxy(self._widget.scene(), self._on_scene_hovered)
        self._widget.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self._plot.getViewBox().sigRangeChanged.connect(self._label_timer.start)
        self._plot.getViewBox().sigResized.connect(self._label_timer.start)
        self._label_timer.timeout.connect(self._place_labels)
        self._restyle()

    def _restyle(self) -> None:
        """Apply the theme's colours to every layer (also on a palette change)."""
        colors = colors_for(self)
        style_plot(self._widget, colors)
        self._layers.restyle(colors)
        self._cursor_line.setPen(colors.pen(colors.cursor, 1.5, dashed=True))
        flow = QColor(colors.transfer).darker(125)
        self._flow_lines.setPen(colors.pen(flow, 1.2))
        self._flow_tips.setBrush(flow)
        self._flow_tips.setPen(colors.pen(flow, 1))
        shade = QColor(colors.selection)
        shade.setAlpha(48)
        self._region.setBrush(pg.mkBrush(shade))
        self._overview.setBackground(colors.background)
        self._overview.bars.setOpts(brush=QColor(colors.muted), pen=pg.mkPen(None))
        self._update_legend()

    def _update_legend(self) -> None:
        """The colour key; offloading copies are listed only when the timeline has some."""
        timeline = self.timeline()
        offload = timeline is not None and any(tr.offload for tr in timeline.transfers)
        self._legend.setText(legend_html(colors_for(self), offload))
        self._legend.setMinimumWidth(self._legend.sizeHint().width() + 12)

    def on_theme_changed(self) -> None:
        self._restyle()
        self._redraw()

    # ----- slots ------------------------------------------------------------------------------
    def _on_document_graph_changed(self) -> None:
        graph = self._document.graph
        names = set(graph.index) if graph is not None else set()
        if len(names & self._names) * 2 < max(len(names), 1):  # another graph, not an edit
            self._search.clear()  # the search was for the old graph's names
            self._search.setToolTip("")
            self._matches = []
        self._names = names
        self._on_document_result_changed()

    def _on_document_result_changed(self) -> None:
        """Redraw in a turn of the event loop of its own (``app.views.draw_pacer``): the
        document's other listeners (memory, stepper, graph...) and this redraw then each stay
        short, a burst of results (incumbents, a slider drag) is drawn once, and reading the
        view (:meth:`flush`) still sees it."""
        self._stale = True
        self._pacer.request(self, self._apply_if_stale)

    def _apply_if_stale(self) -> None:
        if self._stale:  # not drawn since (reading the view draws it)
            self._apply_result()

    def _apply_result(self) -> None:
        self._stale = False
        result = self._document.result
        if self._measured is not None and (
            result is None or result.schedule is not self._measured.schedule
        ):
            self._measured = None  # it measured another schedule
        self._reasons.clear()
        # a provisional incumbent replacing another keeps a zoom the user chose; anything else
        # (a new answer, a new graph, an unzoomed view) starts from the whole schedule
        (x0, x1), _ = self._plot.getViewBox().viewRange()
        zoomed = self._full_range is not None and (
            abs(x0 - self._full_range[0]) + abs(x1 - self._full_range[1])
            > 1e-6 * max(abs(self._full_range[1]), 1.0)
        )
        keep_view = self._document.is_provisional and self._showing_provisional and zoomed
        self._showing_provisional = self._document.is_provisional
        self._redraw()
        if not keep_view:
            self.reset_view()
        # the labels now, in the same paint as the bars: on the zero-interval timer they came
        # after it, and a 5,000-bar chart was painted twice in the same stall
        self._label_timer.stop()
        self._place_labels()

    def _on_document_selection_changed(self) -> None:
        self._redraw_selection()
        self._redraw_flows()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Navigation keys on the chart: W/S/A/D always, the arrows while it has the focus
        (the window's step-through owns them otherwise)."""
        if watched is self._widget:
            kind = event.type()
            if kind == QEvent.Type.Resize and self._slices.isVisible():
                self._place_slices()
            if kind == QEvent.Type.ShortcutOverride and self.navigate_key(event.key(), True):
                event.accept()
                return True
            if kind == QEvent.Type.KeyPress:
                if event.key() == Qt.Key.Key_Escape and self._range is not None:
                    self.select_range(None)
                    return True
                if self.navigate_key(event.key(), False):
                    return True
        return super().eventFilter(watched, event)

    def navigate_key(self, key: int, probe: bool) -> bool:
        """Whether ``key`` navigates the chart; unless ``probe``, also do it."""
        if Qt.Key(key) not in _NAV_KEY_SET:
            return False
        return True if probe else self.navigate(key)

    def _on_region_changed(self) -> None:
        if self._range is not None:
            lo, hi = self._region.getRegion()
            self._range = (float(lo), float(hi))
            self._show_range_text()

    def _select_match(self, node: str) -> None:
        self._document.set_selection(node)
        bars = self._table.bars_of(node)
        if not bars:
            return
        (x0, x1), _ = self._plot.getViewBox().viewRange()
        first = min(bars, key=lambda b: b.start)
        if not (x0 <= first.start <= x1):
            width = x1 - x0
            self._plot.setXRange(first.start - width / 4, first.start + 3 * width / 4, padding=0)

    def _on_document_cursor_changed(self) -> None:
        self._redraw_cursor()

    def _on_scene_hovered(self, pos: QPointF) -> None:
        vb = self._plot.getViewBox()
        if not vb.sceneBoundingRect().contains(pos):
            self._document.set_hovered(None)
            return
        point = vb.mapSceneToView(pos)
        tolerance = _HIT_PIXELS * vb.viewPixelSize()[0]
        bar = self.bar_at(point.x(), point.y(), tolerance)
        self._document.set_hovered(bar.node if bar is not None else None)
        text = self.tooltip_at(point.x(), point.y(), tolerance)
        if text:
            QToolTip.showText(QCursor.pos(), text, self._widget)
        else:
            QToolTip.hideText()

    def _on_scene_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        vb = self._plot.getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        point = vb.mapSceneToView(event.scenePos())
        bar = self.bar_at(point.x(), point.y(), _HIT_PIXELS * vb.viewPixelSize()[0])
        self._document.set_selection(bar.node if bar is not None else None)
        if bar is not None and bar.what == "op" and event.double():
            self._document.set_cursor(bar.index)

    # ----- drawing ----------------------------------------------------------------------------
    def _redraw(self) -> None:
        # the header first: a header that wraps onto another line posts its layout request
        # before the scene's repaint, so the chart is painted once, at its new height (the
        # first incumbent of a solve painted it twice: 0.4 s into bench/draw.py --stream)
        self._update_header()
        timeline = self.timeline()
        self._table = LaneTable.of(lane_names(self._document.graph, timeline), timeline)
        self._layers.fill(timeline, self._table)
        self._fill_measured()
        self._update_legend()
        self._fill_overview(timeline)
        self._redraw_flows()
        if self._range is not None:
            self._show_range_text()
        lanes = self._table.lanes
        ticks = [(j, name) for j, name in enumerate(lanes)]
        self._plot.getAxis("left").setTicks([ticks, []])
        # every lane at least a line of text tall, plus the time axis
        self._widget.setMinimumHeight(_LANE_PIXELS * max(len(lanes), 2) + _AXIS_PIXELS)
        end = self._x_end(timeline)
        pad = 0.02 * max(end, 1e-9)
        self._plot.setLimits(xMin=-pad, xMax=end + pad, yMin=-0.7, yMax=max(len(lanes), 1) - 0.3)
        self._redraw_selection()
        self._redraw_hover()
        self._redraw_cursor()
        self._label_timer.start()

    def _update_header(self) -> None:
        """The summary line: what the schedule costs, and what it is (provisional, measured,
        for other memory limits than the sliders')."""
        if self._stale:
            return  # the pending redraw writes it
        document = self._document
        header = summary_html(document.result, colors_for(self), document.is_provisional)
        if self._measured is None and self._compared is not None and document.result is not None:
            header += " \u00b7 " + compared_text(document.result, self._compared)
        if self._measured is not None:
            header += (
                f" \u00b7 <b>executed</b> on this machine: {html.escape(self._measured.summary())}"
            )
            basis = prediction_basis(document.graph)
            if basis:  # 13x slower said nothing of what the prediction is for
                header += f" <i>(predicted for {html.escape(basis)})</i>"
        if document.result is not None and not document.is_result_current():
            # e.g. a slider dragged during the solve: the schedule is for the old limits
            header += " \u00b7 <i>solved for other memory limits than the sliders' now</i>"
        self._header.setText(header)
        self._header.setToolTip(self._header.text())

    def _fill_measured(self) -> None:
        run = self._measured
        if run is None and self._compared is not None and self._compared.timeline is not None:
            self._fill_compared(self._compared.timeline)
            return
        starts, ends, lanes = [], [], []
        for device in run.peak_bytes if run is not None else ():
            if device in self._table.lane_of:
                lo, hi = run.spans(device)
                starts.append(lo)
                ends.append(hi)
                lanes.append(np.full(len(lo), self._table.lane_of[device], dtype=float))
        empty = [np.zeros(0)]
        self._layers.set_ghosts(
            np.concatenate(starts or empty), np.concatenate(ends or empty),
            np.concatenate(lanes or empty),
        )  # fmt: skip

    def _fill_compared(self, other: Timeline) -> None:
        lane_of = self._table.lane_of
        spans = [(op.start, op.end, lane_of[op.device]) for op in other.ops if op.device in lane_of]
        spans += [
            (tr.start, tr.end, lane_of[link_lane(tr.source, tr.target)])
            for tr in other.transfers
            if link_lane(tr.source, tr.target) in lane_of
        ]
        array = np.array(spans, dtype=float).reshape(-1, 3)
        self._layers.set_ghosts(array[:, 0], array[:, 1], array[:, 2])

    def _x_end(self, timeline: Timeline | None) -> float:
        """The time axis' extent: the schedule, or its measured run if that took longer."""
        end = timeline_extent(timeline)
        if self._measured is not None and len(self._measured.ends):
            end = max(end, float(self._measured.ends[-1]))
        elif self._compared is not None and self._compared.timeline is not None:
            end = max(end, timeline_extent(self._compared.timeline))
        return end

    def _fill_overview(self, timeline: Timeline | None) -> None:
        end = self._x_end(timeline)
        spans = [merge_intervals(starts, ends, end / 2000) for starts, ends, _ in self._table.rows]
        x0 = np.concatenate([lo for lo, _ in spans] or [np.zeros(0)])
        width = np.concatenate([hi - lo for lo, hi in spans] or [np.zeros(0)])
        lane = np.concatenate(
            [np.full(len(lo), j, dtype=float) for j, (lo, _) in enumerate(spans)] or [np.zeros(0)]
        )
        self._overview.set_bars(x0, width, lane, len(self._table.lanes), end)

    def _redraw_flows(self, *_: object) -> None:
        if self._stale:
            return  # the pending redraw draws it
        timeline = self.timeline()
        show = self._show_flows.isChecked() and timeline is not None
        only = None
        if show and len(timeline.transfers) > _FLOWS_UP_TO:
            only = self._document.selection or "\0"  # too many: the selection's only
        x, y, tip_x, tip_y = flow_segments(timeline if show else None, self._table.lane_of, only)
        self._flow_lines.setData(x, y)
        self._flow_tips.setData(tip_x, tip_y)

    def _redraw_hover(self) -> None:
        if self._stale:
            return  # the pending redraw draws it
        bars = self._table.bars_of(self._document.hovered)
        self._layers.set_bars("hover", [(b.start, b.end, b.lane) for b in bars])

    def _redraw_selection(self) -> None:
        if self._stale:
            return  # the pending redraw draws it
        bars = self._table.bars_of(self._document.selection)
        self._layers.set_bars("selection", [(b.start, b.end, b.lane) for b in bars])

    def _redraw_cursor(self) -> None:
        if self._stale:
            return  # the pending redraw draws it
        op = self._document.cursor_op
        timeline = self.timeline()
        spans = []
        if op is not None and timeline is not None:
            lane_of = self._table.lane_of
            spans.append((op.start, op.end, lane_of[op.device]))
            for tr in timeline.transfers:
                if tr.stage == op.stage and tr.consumer == op.node and tr.target == op.device:
                    spans.append((tr.start, tr.end, lane_of[link_lane(tr.source, tr.target)]))
        self._layers.set_bars("cursor", spans)
        self._cursor_line.setVisible(op is not None)
        if op is not None:
            self._cursor_line.setPos(op.start)

    # ----- labels and tooltips ----------------------------------------------------------------
    def _place_labels(self) -> None:
        if self._stale:  # the bar table is the old result's until the redraw: labels wait for it
            return
        self._labels.place(self._table, self.timeline(), colors_for(self))

    def _tooltip(self, bar: Bar) -> str:
        timeline = self.timeline()
        if bar.what == "transfer":
            return transfer_tooltip(timeline.transfers[bar.index])
        op = timeline.ops[bar.index]
        graph = self._document.graph
        operator = graph.node(op.node).op if graph is not None and op.node in graph.index else ""
        reason = self._reason(bar.index) if op.recompute else ""
        return op_tooltip(op, operator, timeline.activation_budgets.get(op.device, 0), reason)

    def _reason(self, index: int) -> str:
        if index not in self._reasons:
            result = self._document.result
            graph = self._document.graph
            if not has_replay(result):
                return ""
            self._reasons[index] = recompute_reason(graph, result.schedule, result.timeline, index)
        return self._reasons[index]


class _SummaryLabel(QLabel):
    """The summary above the chart, which asks for two lines even while it holds one.

    The placeholder is one line and a summary beside the legend often two: the row grew with
    the first incumbent and laid out and repainted the whole Schedule tab in the middle of a
    5,000-op solve's longest stall (``bench/draw.py --stream``), and it jumped whenever a
    summary changed its number of lines. Only the preferred height is raised: a minimum of two
    lines gave the tab a scroll bar at 1280x720, which cut off the time axis.
    """

    def _two_lines(self) -> int:
        margins = self.contentsMargins()
        return 2 * self.fontMetrics().lineSpacing() + margins.top() + margins.bottom()

    def heightForWidth(self, width: int) -> int:
        return max(super().heightForWidth(width), self._two_lines())

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(hint.width(), max(hint.height(), self._two_lines()))


_RANGE_HINT = "Shift+drag on the chart to measure a range; Esc clears"
_NAV_KEY_SET = frozenset(
    [Qt.Key.Key_W, Qt.Key.Key_A, Qt.Key.Key_S, Qt.Key.Key_D, Qt.Key.Key_Up, Qt.Key.Key_Down]
    + [Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_F]
)


def _document_timeline(document: Document) -> Timeline | None:
    return document.timeline


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(GanttView))
