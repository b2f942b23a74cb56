"""Checkmate's R and S matrices of the schedule on display, one pair per device.

Rows are stages (top to bottom), columns are nodes. ``R[t, i]``: node ``i`` computed on the device
in stage ``t`` (the diagonal is each node's first computation, cells left of it are
recomputations); ``S[t, i]``: its output is resident there when stage ``t`` starts. Each matrix is
one ``pg.ImageItem`` of one-byte cell codes with a colour table (Qt draws it as an indexed image,
no RGBA copy), as in pyqtgraph's ``MatrixDisplayExample``; the matrices come from
:func:`solver.execution.explain.stage_matrices`, i.e. from the replayed timeline and the keep sets.
The axes name the nodes (as many as fit), every matrix fits its plot (Fit, or double-click, brings
the whole matrix back after a zoom), and a hidden view redraws only when shown again.
"""

from __future__ import annotations

import functools
import html
import logging

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QCursor, QFontMetrics
from PySide6.QtWidgets import (
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.theme import Colors, FollowsTheme, colors_for, style_plot
from app.views.plotting import HoverProxy, has_replay, install_export_action
from solver.execution.explain import StageMatrices, stage_matrices

__all__ = ["MatricesView"]

logger = logging.getLogger(__name__)

_GRID_UP_TO = 64
"""Draw cell borders up to this many nodes; beyond, they would only grey the picture."""
_NAME_CHARS = 14
"""Longer node names are elided on the axes (the tooltip has the full name)."""


class NameAxis(pg.AxisItem):
    """An axis over node (or stage) indices that labels them with names, as many as fit.

    The tick spacing is the smallest power-of-two-ish step (1, 2, 5, 10, ...) at which the
    widest label still fits between two ticks, so zooming in names every node.
    """

    def __init__(self, orientation: str, prefix_index: bool = False):
        super().__init__(orientation)
        self.names: list[str] = []
        self._prefix_index = prefix_index
        self.enableAutoSIPrefix(False)

    def set_names(self, names: list[str]) -> None:
        elided = [n if len(n) <= _NAME_CHARS else n[: _NAME_CHARS - 1] + "\u2026" for n in names]
        self.names = [f"{i} {n}" if self._prefix_index else n for i, n in enumerate(elided)]
        self.picture = None
        self.update()

    def widest(self) -> int:
        """Pixel width of the widest label."""
        font = self.style["tickFont"] or self.font()
        metrics = QFontMetrics(font)
        longest = sorted(self.names, key=len)[-32:]  # names are elided: the longest decide
        return max((metrics.horizontalAdvance(n) for n in longest), default=0)

    def label_text(self, index: int) -> str:
        """The label drawn at ``index`` (elided name, with the index on the stage axis)."""
        return self.names[index] if 0 <= index < len(self.names) else ""

    def tickValues(self, minVal, maxVal, size):
        if not self.names:
            return []
        minVal, maxVal = sorted((minVal, maxVal))  # an inverted axis passes them reversed
        metrics = QFontMetrics(
            self.font() if self.style["tickFont"] is None else self.style["tickFont"]
        )
        if self.orientation in ("left", "right"):
            need = metrics.height() + 2
        else:
            widest = max(
                metrics.horizontalAdvance(n)
                for n in self.names[:: max(1, len(self.names) // 64)] or [""]
            )
            need = widest + 10
        span = max(maxVal - minVal, 1e-9)
        per_cell = size / span
        step = 1
        for candidate in _steps():
            step = candidate
            if candidate * per_cell >= need:
                break
        first = max(int(np.ceil(minVal / step)) * step, 0)
        last = min(int(np.floor(maxVal)), len(self.names) - 1)
        return [(step, list(range(first, last + 1, step)))]

    def tickStrings(self, values, scale, spacing):
        return [self.label_text(int(round(v))) for v in values]


def _steps():
    for power in range(0, 7):
        for mantissa in (1, 2, 5):
            yield mantissa * 10**power


class _MatrixPlot:
    """One matrix (R or S of one device): image, grid, and highlight rectangles."""

    def __init__(self, layout: pg.GraphicsLayoutWidget, device: str, which: str, row: int):
        self.device = device
        self.which = which
        self.bottom = NameAxis("bottom")
        self.left = NameAxis("left", prefix_index=True)
        self.plot: pg.PlotItem = layout.addPlot(
            row=row,
            col=0 if which == "R" else 1,
            axisItems={"bottom": self.bottom, "left": self.left},
        )
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setLabel("bottom", "node")
        self.plot.setLabel("left", "stage (computes node)")
        self.plot.getViewBox().setDefaultPadding(0.02)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.grid = pg.PlotCurveItem(connect="pairs")
        self.column = QGraphicsRectItem()
        self.row = QGraphicsRectItem()
        self.cell = QGraphicsRectItem()
        self.plot.addItem(self.image)
        for item in (self.grid, self.column, self.row, self.cell):
            self.plot.addItem(item, ignoreBounds=True)
        self.names_stages = True
        """Whether its left axis names the stages (in one row, only the first matrix's does)."""
        self.codes = np.zeros((0, 0), dtype=np.uint8)
        self.table = np.zeros((1, 4), dtype=np.uint8)

    @property
    def rgba(self) -> np.ndarray:
        """The drawn colours as RGBA (made on demand: the image itself stays indexed)."""
        return self.table[self.codes]

    def fit(self) -> None:
        """Show the whole matrix, and keep fitting it when the plot is resized."""
        self.plot.getViewBox().enableAutoRange()


class MatricesView(FollowsTheme, QWidget):
    """R and S per device, with the selected node's column and the cursor's stage outlined.

    Listens to ``graph_changed``, ``result_changed``, ``selection_changed``, ``cursor_changed``.
    Clicking a cell selects its node (``document.set_selection``).
    """

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self._plots: dict[tuple[str, str], _MatrixPlot] = {}
        self._wide: bool | None = None
        """Whether the plots stand in one row (a short, wide view: 1280x720) or a grid."""
        self._matrices: dict[str, StageMatrices] = {}
        self._dirty = False
        self._build_items()
        document.graph_changed.connect(self._on_document_graph_changed)
        document.result_changed.connect(self._on_document_result_changed)
        document.selection_changed.connect(self._on_document_selection_changed)
        document.cursor_changed.connect(self._on_document_cursor_changed)
        self._redraw()

    # ----- public API -------------------------------------------------------------------------
    def plot(self, device: str, which: str) -> pg.PlotItem:
        """The plot of matrix ``which`` ("R" or "S") of ``device``."""
        return self._plots[device, which].plot

    def image(self, device: str, which: str) -> np.ndarray:
        """RGBA cells of matrix ``which`` ("R" or "S") of ``device``: shape (stages, nodes, 4)."""
        return self._plots[device, which].rgba

    def cell_color(self, device: str, which: str, stage: int, node: int) -> QColor:
        """The colour drawn for one cell."""
        plot = self._plots[device, which]
        r, g, b, a = (int(v) for v in plot.table[plot.codes[stage, node]])
        return QColor(r, g, b, a)

    def axis_label(self, device: str, which: str, side: str, index: int) -> str:
        """The text the ``side`` ("bottom" or "left") axis draws at ``index``."""
        plot = self._plots[device, which]
        return (plot.bottom if side == "bottom" else plot.left).label_text(index)

    def fit(self) -> None:
        """Show every matrix whole (the Fit button, a double-click)."""
        for plot in self._plots.values():
            plot.fit()

    def selected_column(self, device: str, which: str) -> int | None:
        """The node column outlined as the selection in that matrix, or ``None``."""
        rect = self._plots[device, which].column
        return round(rect.rect().center().x()) if rect.isVisible() else None

    def cursor_row(self, device: str, which: str) -> int | None:
        """The stage row outlined for the step cursor in that matrix, or ``None``."""
        rect = self._plots[device, which].row
        return round(rect.rect().center().y()) if rect.isVisible() else None

    def cell_at(self, device: str, which: str, x: float, y: float) -> tuple[int, int] | None:
        """``(stage, node)`` of the cell at plot coordinates ``(x, y)``, if inside."""
        n = self._plots[device, which].codes.shape[0]
        node, stage = int(round(x)), int(round(y))
        return (stage, node) if 0 <= node < n and 0 <= stage < n else None

    def tooltip_for(self, device: str, which: str, stage: int, node: int) -> str:
        """What one cell means, in words."""
        graph = self._document.graph
        m = self._matrices.get(device)
        if graph is None or m is None:
            return ""
        name = html.escape(graph.nodes[node].id)
        head = f"stage {stage} · node {node} <b>{name}</b> · {device}<br>"
        if which == "R":
            if not m.R[stage, node]:
                return head + ("not computed here" if node <= stage else "beyond the frontier")
            return head + ("computed (first time)" if node == stage else "recomputed")
        if m.S[stage, node]:
            return head + "resident at the start of the stage (a checkpoint)"
        return head + ("not resident" if node < stage else "not computed yet")

    # ----- building ---------------------------------------------------------------------------
    def _build_items(self) -> None:
        self._layout = pg.GraphicsLayoutWidget()
        install_export_action(self._layout.scene(), self)
        self._hover = HoverProxy(self._layout.scene(), self._on_scene_hovered)
        self._layout.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self._legend = QLabel()
        self._legend.setTextFormat(Qt.TextFormat.RichText)
        self._legend.setWordWrap(True)
        self._legend.setContentsMargins(6, 2, 6, 0)
        fit = QToolButton(text="Fit", toolTip="Show the whole matrices (or double-click one)")
        fit.clicked.connect(self.fit)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 6, 0)
        top.addWidget(self._legend, 1)
        top.addWidget(fit)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(top)
        layout.addWidget(self._layout, 1)

    def _ensure_plots(self) -> None:
        graph = self._document.graph
        devices = [d.name for d in graph.devices] if graph is not None else []
        if list(dict.fromkeys(device for device, _ in self._plots)) == devices:
            return
        self._layout.clear()
        self._plots = {}
        for row, device in enumerate(devices):
            for which in ("R", "S"):
                self._plots[device, which] = _MatrixPlot(self._layout, device, which, row)
        self._wide = None
        self._arrange()
        self._restyle()

    @property
    def in_one_row(self) -> bool:
        """The plots stand side by side (the view is more than twice as wide as tall)."""
        return bool(self._wide)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._arrange()

    def _arrange(self) -> None:
        """A grid (a device per row, R beside S) or, in a short wide view where the grid's
        squares would be a few dozen pixels tall, all matrices in one row."""
        wide = self.width() > 2.2 * max(self.height(), 1) and len(self._plots) <= 4
        if wide == self._wide:
            return
        self._wide = wide
        layout = self._layout.ci
        for plot in self._plots.values():
            layout.removeItem(plot.plot)
        for j, plot in enumerate(self._plots.values()):
            layout.addItem(plot.plot, *((0, j) if wide else divmod(j, 2)))
            # every matrix has the same stages: in one row, the first names them for all
            # (four axes of names took the row's width and cut the third and fourth matrix)
            plot.names_stages = not (wide and j > 0)
            plot.plot.showAxis("left", plot.names_stages)
            plot.left.setWidth(plot.left.widest() + 28 if plot.names_stages else 0)
        self._title_plots()
        # re-added items grew the layout to their preferred widths, past the view (the third
        # and fourth matrix were cut off at 1280x720): once the layout has settled, give it
        # the view's size again
        QTimer.singleShot(0, self, self._fit_layout)

    def _fit_layout(self) -> None:
        size = self._layout.viewport().size()
        self._layout.ci.setGeometry(QRectF(0, 0, size.width(), size.height()))

    def _restyle(self) -> None:
        colors = colors_for(self)
        style_plot(self._layout, colors)
        swatch = '<span style="color:{c}; font-size:14px">■</span>&nbsp;{t}'
        items = [(colors.kinds[k], k) for k in ("forward", "loss", "backward")]
        items.append((colors.recompute("forward").name(), "recomputed"))
        graph = self._document.graph
        devices = [d.name for d in graph.devices] if graph is not None else []
        items += [(colors.device(j).name(), f"kept on {d}") for j, d in enumerate(devices)]
        items.append((colors.selection, "□ selected node"))
        items.append((colors.cursor, "▭ step cursor"))
        parts = [swatch.format(c=c, t=t) for c, t in items[:-2]]
        parts += [f'<span style="color:{c}">{t}</span>' for c, t in items[-2:]]
        self._legend.setText(" &nbsp; ".join(parts))
        for plot in self._plots.values():
            for name in ("left", "bottom"):
                plot.plot.getAxis(name).setPen(colors.foreground)
                plot.plot.getAxis(name).setTextPen(colors.foreground)
            plot.grid.setPen(colors.pen(colors.grid, 1))
            plot.column.setPen(colors.pen(colors.selection, 2))
            plot.row.setPen(colors.pen(colors.cursor, 1.5, dashed=True))
            plot.cell.setPen(colors.pen(colors.cursor, 2.5))
        self._title_plots()

    def _title_plots(self) -> None:
        """Name each matrix; in one row, briefly (a title sets its plot's minimum width, and
        four long ones cut the fourth matrix off at 1280x720)."""
        colors = colors_for(self)
        for plot in self._plots.values():
            if self._wide:
                meaning = "computed" if plot.which == "R" else "resident"
            else:
                meaning = "computed in stage" if plot.which == "R" else "resident at stage start"
            plot.plot.setTitle(
                f"<b>{plot.which}</b> · {plot.device}: {meaning}",
                size="9pt",
                color=colors.foreground,
            )

    def on_theme_changed(self) -> None:
        self._restyle()
        self._redraw()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty:
            self._redraw()

    # ----- slots ------------------------------------------------------------------------------
    def _on_document_graph_changed(self) -> None:
        self._redraw()

    def _on_document_result_changed(self) -> None:
        self._redraw()

    def _on_document_selection_changed(self) -> None:
        self._draw_highlights()

    def _on_document_cursor_changed(self) -> None:
        self._draw_highlights()

    def _on_scene_hovered(self, pos: QPointF) -> None:
        hit = self._hit(pos)
        if hit is None:
            QToolTip.hideText()
            return
        QToolTip.showText(QCursor.pos(), self.tooltip_for(*hit), self._layout)

    def _on_scene_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        if event.double():
            self.fit()
            return
        hit = self._hit(event.scenePos())
        graph = self._document.graph
        if hit is not None and graph is not None:
            self._document.set_selection(graph.nodes[hit[3]].id)

    def _hit(self, pos: QPointF) -> tuple[str, str, int, int] | None:
        for (device, which), plot in self._plots.items():
            vb = plot.plot.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                point = vb.mapSceneToView(pos)
                cell = self.cell_at(device, which, point.x(), point.y())
                return (device, which, *cell) if cell is not None else None
        return None

    # ----- drawing ----------------------------------------------------------------------------
    def _redraw(self) -> None:
        if not self.isVisible() and self._plots:
            self._dirty = True  # a hidden tab: nobody looks, so do the work when shown
            return
        self._dirty = False
        self._ensure_plots()
        graph = self._document.graph
        result = self._document.result
        if has_replay(result):
            self._matrices = stage_matrices(graph, result.schedule, result.timeline)
        else:
            self._matrices = {}
        colors = colors_for(self)
        n = graph.n if graph is not None else 0
        names = [node.id for node in graph.nodes] if graph is not None else []
        for (device, which), plot in self._plots.items():
            m = self._matrices.get(device)
            if m is not None:
                plot.codes, plot.table = _cells(graph, m, which, graph.device_index[device], colors)
            else:  # nothing to show; an empty graph still gets a (transparent) 1x1 image
                plot.codes = np.zeros((max(n, 1), max(n, 1)), dtype=np.uint8)
                plot.table = np.zeros((1, 4), dtype=np.uint8)
            # pyqtgraph scales codes by levels onto the table's length: a 256-row table with
            # levels 0..255 makes code k draw row k (a short table drew everything as row 0)
            lut = np.zeros((256, 4), dtype=np.uint8)
            lut[: len(plot.table)] = plot.table
            plot.image.setImage(plot.codes, lut=lut, levels=(0, 255), autoLevels=False)
            plot.image.setRect(QRectF(-0.5, -0.5, max(n, 1), max(n, 1)))
            plot.grid.setData(*_grid(n))
            # very loose: with the aspect locked, a wide short plot must show far more columns
            # than exist, and a tighter limit made pyqtgraph cut rows instead (issue 10)
            margin = 50 * max(n, 1)
            plot.plot.setLimits(xMin=-margin, xMax=n + margin, yMin=-margin, yMax=n + margin)
            plot.bottom.set_names(names)
            plot.left.set_names(names)
            # pyqtgraph skips a tick label that does not fit inside its axis: make room
            plot.left.setWidth(plot.left.widest() + 28 if plot.names_stages else 0)
            plot.fit()
        self._draw_highlights()
        QTimer.singleShot(0, self, self._fit_layout)  # new names resized the axes

    def _draw_highlights(self) -> None:
        graph = self._document.graph
        n = graph.n if graph is not None else 0
        selection = self._document.selection
        column = graph.index.get(selection) if graph is not None and selection else None
        op = self._document.cursor_op
        for (device, _), plot in self._plots.items():
            plot.column.setVisible(column is not None)
            if column is not None:
                plot.column.setRect(QRectF(column - 0.5, -0.5, 1.0, n))
            plot.row.setVisible(op is not None)
            plot.cell.setVisible(op is not None and op.device == device)
            if op is not None and graph is not None and op.node in graph.index:
                plot.row.setRect(QRectF(-0.5, op.stage - 0.5, n, 1.0))
                plot.cell.setRect(QRectF(graph.index[op.node] - 0.5, op.stage - 0.5, 1.0, 1.0))


def _cells(
    graph, m: StageMatrices, which: str, device_index: int, colors: Colors
) -> tuple[np.ndarray, np.ndarray]:
    """One-byte cell codes and their RGBA colour table: outside the triangle greyed; R by node
    kind (recomputations lighter); S in the device's colour. A few whole-array passes over
    uint8 codes keep a 2,500-stage schedule's matrices at tens of milliseconds."""
    n = graph.n
    palette = [QColor(colors.background), QColor(colors.grid), colors.device(device_index)]
    # 0 inside the triangle, 1 outside (R: right of the diagonal; S: on it or right of it)
    codes = _outside(n, 1 if which == "R" else 0).copy()
    if which == "S":
        np.copyto(codes, np.uint8(2), where=m.S)
    else:
        names = sorted({nd.kind for nd in graph.nodes})
        kind = np.array([names.index(nd.kind) for nd in graph.nodes], dtype=np.uint8)
        palette += [colors.kind(k) for k in names] + [colors.recompute(k) for k in names]
        again = (3 + len(names) + kind).astype(np.uint8)
        np.copyto(codes, again[None, :], where=m.R)
        diagonal = np.arange(n)
        first = m.R[diagonal, diagonal]
        codes[diagonal[first], diagonal[first]] = 3 + kind[first]
    table = np.array([_rgba(c) for c in palette], dtype=np.uint8)
    return codes, table


@functools.lru_cache(maxsize=4)
def _outside(n: int, offset: int) -> np.ndarray:
    """1 right of diagonal ``offset`` of an n x n matrix, else 0 (cached: a redraw copies it)."""
    codes = np.triu(np.ones((n, n), dtype=np.uint8), offset)
    codes.flags.writeable = False
    return codes


def _rgba(color: QColor) -> tuple[int, int, int, int]:
    return color.red(), color.green(), color.blue(), 255


def _grid(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Segments (pairs of points) of the cell borders, or nothing for big matrices."""
    if n == 0 or n > _GRID_UP_TO:
        return np.zeros(0), np.zeros(0)
    edges = np.arange(n + 1) - 0.5
    lo, hi = np.full(n + 1, -0.5), np.full(n + 1, n - 0.5)
    x = np.concatenate(
        [np.ravel(np.column_stack([edges, edges])), np.ravel(np.column_stack([lo, hi]))]
    )
    y = np.concatenate(
        [np.ravel(np.column_stack([lo, hi])), np.ravel(np.column_stack([edges, edges]))]
    )
    return x, y


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(MatricesView))
