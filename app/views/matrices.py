"""Checkmate's R and S matrices of the schedule on display, one pair per device.

Rows are stages (top to bottom), columns are nodes. ``R[t, i]``: node ``i`` computed on the device
in stage ``t`` (the diagonal is each node's first computation, cells left of it are
recomputations); ``S[t, i]``: its output is resident there when stage ``t`` starts. Drawn as RGBA
images, as in pyqtgraph's ``MatrixDisplayExample``; the matrices come from
:func:`solver.explain.stage_matrices`, i.e. from the replayed timeline and the keep sets.
"""

from __future__ import annotations

import html
import logging

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QCursor
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QToolTip, QVBoxLayout, QWidget

from app.document import Document
from app.theme import Colors, colors_for, style_plot
from app.views.plotting import HoverProxy, install_export_action, result_matches
from solver.explain import StageMatrices, stage_matrices

__all__ = ["MatricesView"]

logger = logging.getLogger(__name__)

_GRID_UP_TO = 64
"""Draw cell borders up to this many nodes; beyond, they would only grey the picture."""


class _MatrixPlot:
    """One matrix (R or S of one device): image, grid, and highlight rectangles."""

    def __init__(self, layout: pg.GraphicsLayoutWidget, device: str, which: str, row: int):
        self.device = device
        self.which = which
        self.plot: pg.PlotItem = layout.addPlot(row=row, col=0 if which == "R" else 1)
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setLabel("bottom", "node")
        self.plot.setLabel("left", "stage")
        self.plot.getViewBox().setDefaultPadding(0.02)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.grid = pg.PlotCurveItem(connect="pairs")
        self.column = QGraphicsRectItem()
        self.row = QGraphicsRectItem()
        self.cell = QGraphicsRectItem()
        self.plot.addItem(self.image)
        for item in (self.grid, self.column, self.row, self.cell):
            self.plot.addItem(item, ignoreBounds=True)
        self.rgba = np.zeros((0, 0, 4), dtype=np.uint8)


class MatricesView(QWidget):
    """R and S per device, with the selected node's column and the cursor's stage outlined.

    Listens to ``graph_changed``, ``result_changed``, ``selection_changed``, ``cursor_changed``.
    Clicking a cell selects its node (``document.set_selection``).
    """

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self._plots: dict[tuple[str, str], _MatrixPlot] = {}
        self._matrices: dict[str, StageMatrices] = {}
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
        r, g, b, a = (int(v) for v in self._plots[device, which].rgba[stage, node])
        return QColor(r, g, b, a)

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
        n = self._plots[device, which].rgba.shape[0]
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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._legend)
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
        self._restyle()

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
            meaning = "computed in stage" if plot.which == "R" else "resident at stage start"
            plot.plot.setTitle(
                f"<b>{plot.which}</b> · {plot.device}: {meaning}",
                size="9pt",
                color=colors.foreground,
            )

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._restyle()
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
        self._ensure_plots()
        graph = self._document.graph
        result = self._document.result
        if result_matches(graph, result):
            self._matrices = stage_matrices(graph, result.schedule, result.timeline)
        else:
            self._matrices = {}
        colors = colors_for(self)
        n = graph.n if graph is not None else 0
        for (device, which), plot in self._plots.items():
            m = self._matrices.get(device)
            if m is not None:
                plot.rgba = _cells(graph, m, which, graph.device_index[device], colors)
            else:  # nothing to show; an empty graph still gets a (transparent) 1x1 image
                plot.rgba = np.zeros((max(n, 1), max(n, 1), 4), dtype=np.uint8)
            plot.image.setImage(plot.rgba, levels=(0, 255))
            plot.image.setRect(QRectF(-0.5, -0.5, max(n, 1), max(n, 1)))
            plot.grid.setData(*_grid(n))
            margin = max(n, 1)  # loose: a tight limit fights the locked aspect and clips rows
            plot.plot.setLimits(xMin=-margin, xMax=n + margin, yMin=-margin, yMax=n + margin)
            plot.plot.setRange(xRange=(-0.5, n - 0.5), yRange=(-0.5, n - 0.5), padding=0.02)
            step = max(1, int(np.ceil(n / 12)))
            ticks = [[(i, str(i)) for i in range(0, n, step)], []]
            plot.plot.getAxis("bottom").setTicks(ticks)
            plot.plot.getAxis("left").setTicks(ticks)
        self._draw_highlights()

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


def _cells(graph, m: StageMatrices, which: str, device_index: int, colors: Colors) -> np.ndarray:
    """RGBA cells: outside the triangle greyed; R by node kind (recomputations lighter); S in
    the device's colour. Built as a small code per cell and one palette lookup, which keeps a
    2,500-stage schedule's matrices well under a second."""
    n = graph.n
    stage, node = np.arange(n)[:, None], np.arange(n)[None, :]  # broadcast, no n*n indices
    palette = [QColor(colors.background), QColor(colors.grid), colors.device(device_index)]
    codes = np.where(node > stage if which == "R" else node >= stage, 1, 0).astype(np.uint8)
    if which == "S":
        codes[m.S] = 2
    else:
        names = sorted({nd.kind for nd in graph.nodes})
        kind = np.array([names.index(nd.kind) for nd in graph.nodes], dtype=np.uint8)
        palette += [colors.kind(k) for k in names] + [colors.recompute(k) for k in names]
        first = (3 + kind)[None, :]
        again = (3 + len(names) + kind)[None, :]
        codes = np.where(m.R, np.where(node == stage, first, again), codes).astype(np.uint8)
    table = np.array([_rgba(c) for c in palette], dtype=np.uint8)
    return table[codes]


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
