"""Small helpers shared by the pyqtgraph views: plot setup, hover, units, the export action.

Kept apart so that each view module holds only what it draws. Nothing here knows the document.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF
from PySide6.QtGui import QAction, QColor, QPen
from PySide6.QtWidgets import QFileDialog, QWidget

from app.export import export_widget
from app.theme import Colors
from solver.optimize.solve import SolveResult

__all__ = [
    "AXIS_WIDTH",
    "byte_unit",
    "configure_plot",
    "HoverProxy",
    "install_export_action",
    "has_replay",
    "opaque_grid",
]

AXIS_WIDTH = 84
"""Left-axis width in pixels, equal in stacked views so that x-linked plots line up."""

_UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024), ("B", 1))


def byte_unit(max_bytes: float) -> tuple[str, int]:
    """The binary unit that shows ``max_bytes`` as a number between 1 and 1024.

    Examples
    --------
    >>> byte_unit(3 * 1024**2), byte_unit(10), byte_unit(0)
    (('MiB', 1048576), ('B', 1), ('B', 1))
    """
    for name, size in _UNITS:
        if max_bytes >= size:
            return name, size
    return "B", 1


def configure_plot(plot: pg.PlotItem, colors: Colors, x_label: str | None = "time (ms)") -> None:
    """Common look of our plots: labelled time axis, faint grid, fixed left-axis width."""
    plot.showGrid(x=True, y=False, alpha=0.2)
    plot.setMenuEnabled(False)
    left = plot.getAxis("left")
    left.setWidth(AXIS_WIDTH)
    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        axis.setPen(colors.foreground)
        axis.setTextPen(colors.foreground)
        axis.setZValue(-150)  # it draws the grid: below the view box (z -100), behind the data
        axis.enableAutoSIPrefix(False)  # labels carry their unit; no "(x0.001)" suffix
    if x_label:
        plot.setLabel("bottom", x_label)
    plot.getViewBox().setDefaultPadding(0.0)
    opaque_grid(plot)


def opaque_grid(plot: pg.PlotItem) -> None:
    """Draw ``plot``'s vertical grid lines in an opaque colour (the faint colour mixed with the
    background) instead of a translucent one; the axes must lie behind the data (z below the
    view box's). The left axis is put just above the bottom one, so that its line stays on top
    of a grid line at the plot's left edge, as it showed through the translucent one.

    Why: Qt's raster engine blends a translucent vertical line one scanline at a time, so the
    50-odd grid lines of a time axis cost 3 ms each time the axis is redrawn (two thirds of a
    memory plot's paint, measured with ``bench/draw.py --stall``), opaque ones 0.2 ms; horizontal
    lines are cheap either way. Behind the data on the plain background, the mixed colour looks
    exactly like the blended one (tests/app/test_draw_pacer.py compares the pixels).
    """
    bottom = plot.getAxis("bottom")
    bottom.drawPicture = partial(_draw_opaque_grid, bottom, bottom.drawPicture)
    plot.getAxis("left").setZValue(bottom.zValue() + 1)


def _draw_opaque_grid(axis: pg.AxisItem, draw: Callable, painter, axis_spec, ticks, texts) -> None:
    scene = axis.scene()
    views = scene.views() if scene is not None else []
    background = views[0].backgroundBrush().color() if views else None
    if background is not None and background.alpha() == 255:
        ticks = [(_mixed_pen(pen, background), p1, p2) for pen, p1, p2 in ticks]
    draw(painter, axis_spec, ticks, texts)


def _mixed_pen(pen: QPen, background: QColor) -> QPen:
    """``pen`` with its translucent colour replaced by that colour drawn over ``background``."""
    color = pen.color()
    a = color.alphaF()
    if a >= 1.0:
        return pen
    mixed = QPen(pen)
    mixed.setColor(
        QColor(
            round(background.red() * (1 - a) + color.red() * a),
            round(background.green() * (1 - a) + color.green() * a),
            round(background.blue() * (1 - a) + color.blue() * a),
        )
    )
    return mixed


class HoverProxy:
    """Calls ``on_hover(scene_pos)`` at most ``rate`` times a second while the mouse moves.

    pyqtgraph items have no per-bar tooltips, so views hit-test their own
    tables; rate limiting keeps that cheap on big schedules. The views show their tips with
    ``QToolTip.showText``; Qt's own tooltip event (sent once the mouse rests, ~0.7 s) would
    reach ``QGraphicsScene.helpEvent``, find no item with a tooltip and hide theirs: tips
    vanished about a second after the mouse stopped. :class:`_KeepTips` swallows that event on
    every view of the scene, so a tip stays until the mouse moves off its bar.
    """

    def __init__(self, scene, on_hover: Callable[[QPointF], None], rate: int = 30):
        self._proxy = pg.SignalProxy(
            scene.sigMouseMoved, rateLimit=rate, slot=lambda args: on_hover(args[0])
        )
        self._keep_tips = _KeepTips(scene)
        for view in scene.views():
            view.viewport().installEventFilter(self._keep_tips)


class _KeepTips(QObject):
    """Eats ``QEvent.Type.ToolTip`` on a plot's viewport (see :class:`HoverProxy`)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        return event.type() == QEvent.Type.ToolTip


def install_export_action(scene, widget: QWidget) -> None:
    """Replace pyqtgraph's "Export..." scene menu, whose SVG path is broken on PySide6 >= 6.11
    (pyqtgraph#3495), with ours: the whole view as PNG or SVG through ``app.export``."""

    def ask_and_export() -> None:
        path, _ = QFileDialog.getSaveFileName(
            widget, "Export view", "", "PNG image (*.png);;SVG drawing (*.svg)"
        )
        if path:
            export_widget(widget, path)

    action = QAction("Export view as PNG/SVG…", scene)
    action.triggered.connect(ask_and_export)
    scene.contextMenu = [action]


def has_replay(result: SolveResult | None) -> bool:
    """Whether ``result`` carries a schedule and its replay (an error or infeasible one does not).

    The document replaces graph and result together (``Document._replace_graph``), so a result on
    display always belongs to the graph on display: no view needs to check that.
    """
    return result is not None and result.schedule is not None and result.timeline is not None
