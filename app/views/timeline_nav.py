"""Getting around a long timeline, as in Perfetto: keys, wheel, an overview strip, a measured range.

* :class:`TimelineViewBox`: the wheel pans, Ctrl+wheel zooms (about the mouse), Shift+drag
  selects a time range (``range_selected``); a plain drag still pans.
* :func:`navigate`: W/S (or Up/Down) zoom in/out about the centre, A/D (or Left/Right when the
  timeline has the focus) pan by a fifth of the visible window.
* :class:`OverviewStrip`: the whole schedule in a thin plot with the visible window as a
  draggable region; dragging it moves the timeline, and the timeline moves it.
* :func:`busy_time`: how long each lane is busy within a range (overlaps counted once), for the
  busy/idle totals of a selected range.

No document here: the Gantt view wires these to its plot.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal

__all__ = [
    "NAV_KEYS",
    "OverviewStrip",
    "TimelineViewBox",
    "busy_time",
    "focus_x",
    "merge_intervals",
    "navigate",
    "pan_x",
    "zoom_x",
]

ZOOM_STEP = 1.25
"""One key press or wheel notch zooms by this factor."""
PAN_STEP = 0.2
"""One key press pans by this fraction of the visible window."""

NAV_KEYS = {
    Qt.Key.Key_W: ("zoom", 1 / ZOOM_STEP),
    Qt.Key.Key_Up: ("zoom", 1 / ZOOM_STEP),
    Qt.Key.Key_S: ("zoom", ZOOM_STEP),
    Qt.Key.Key_Down: ("zoom", ZOOM_STEP),
    Qt.Key.Key_A: ("pan", -PAN_STEP),
    Qt.Key.Key_Left: ("pan", -PAN_STEP),
    Qt.Key.Key_D: ("pan", PAN_STEP),
    Qt.Key.Key_Right: ("pan", PAN_STEP),
}
"""Key -> (what, amount): a zoom factor applied to the visible width, or a pan fraction."""


def zoom_x(vb: pg.ViewBox, factor: float, center: float | None = None) -> None:
    """Scale the visible time span by ``factor`` (< 1 zooms in) about ``center``."""
    (x0, x1), _ = vb.viewRange()
    c = (x0 + x1) / 2 if center is None else center
    vb.setXRange(c - (c - x0) * factor, c + (x1 - c) * factor, padding=0)


def pan_x(vb: pg.ViewBox, fraction: float) -> None:
    """Move the visible window by ``fraction`` of its width (negative: to earlier times)."""
    (x0, x1), _ = vb.viewRange()
    shift = (x1 - x0) * fraction
    vb.setXRange(x0 + shift, x1 + shift, padding=0)


def navigate(vb: pg.ViewBox, key: int, center: float | None = None) -> bool:
    """Apply navigation key ``key`` (see :data:`NAV_KEYS`); False if it is not one. A zoom
    keeps ``center`` (the time under the mouse, as in Perfetto) in place; without it, the
    middle of the visible window."""
    action = NAV_KEYS.get(Qt.Key(key))
    if action is None:
        return False
    what, amount = action
    if what == "zoom":
        zoom_x(vb, amount, center)
    else:
        pan_x(vb, amount)
    return True


def focus_x(vb: pg.ViewBox, t0: float, t1: float, margin: float = 0.1) -> None:
    """Show ``[t0, t1]`` with ``margin`` of its width on each side (F: focus the selection);
    an instant gets a window of a thousandth of the full extent around it."""
    width = t1 - t0
    if width <= 0:
        (x0, x1), _ = vb.viewRange()
        width = max((x1 - x0) * 0.02, 1e-9)
        t0, t1 = t0 - width / 2, t1 + width / 2
    vb.setXRange(t0 - margin * width, t1 + margin * width, padding=0)


class TimelineViewBox(pg.ViewBox):
    """A view box whose wheel pans (Ctrl+wheel zooms) and whose Shift+drag selects a range."""

    range_selected = Signal(float, float)
    """Shift+drag selected ``[t0, t1]`` (ms); emitted while dragging and at the end."""

    def wheelEvent(self, ev, axis=None):
        steps = ev.delta() / 120
        if ev.modifiers() & Qt.KeyboardModifier.ControlModifier:
            center = self.mapSceneToView(ev.scenePos()).x()
            zoom_x(self, (1 / ZOOM_STEP) ** steps, center)
        else:
            pan_x(self, -0.1 * steps)
        ev.accept()

    def mouseDragEvent(self, ev, axis=None):
        if (
            ev.button() == Qt.MouseButton.LeftButton
            and ev.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            ev.accept()
            a = self.mapSceneToView(ev.buttonDownScenePos()).x()
            b = self.mapSceneToView(ev.scenePos()).x()
            self.range_selected.emit(min(a, b), max(a, b))
            return
        super().mouseDragEvent(ev, axis)


class OverviewStrip(pg.PlotWidget):
    """The whole timeline, small, with the main plot's visible window as a draggable region."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFixedHeight(24)
        item = self.getPlotItem()
        item.hideAxis("left")
        item.hideAxis("bottom")
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        item.invertY(True)
        self.bars = pg.BarGraphItem(x0=[], width=[], y=[], height=[])
        item.addItem(self.bars)
        self.region = pg.LinearRegionItem(movable=True, brush=pg.mkBrush(230, 159, 0, 50))
        self.region.setZValue(10)
        item.addItem(self.region, ignoreBounds=True)
        self._main: pg.ViewBox | None = None
        self._sync = _Echo()
        self.region.sigRegionChanged.connect(self._on_region_changed)

    def follow(self, vb: pg.ViewBox) -> None:
        """Show ``vb``'s visible window and move it when the region is dragged."""
        self._main = vb
        vb.sigXRangeChanged.connect(self._on_main_range_changed)
        self._on_main_range_changed()

    def set_bars(self, x0: np.ndarray, width: np.ndarray, lane: np.ndarray, lanes: int, end):
        """Draw every bar in one colour, one thin row per lane, over ``[0, end]``."""
        self.bars.setOpts(x0=x0, width=width, y=lane, height=np.full(len(x0), 0.8))
        item = self.getPlotItem()
        item.setXRange(0, max(end, 1e-9), padding=0.01)
        item.setYRange(-0.6, max(lanes, 1) - 0.4, padding=0)

    def visible_window(self) -> tuple[float, float]:
        """The region's ``(start, end)`` in ms."""
        lo, hi = self.region.getRegion()
        return float(lo), float(hi)

    def _on_main_range_changed(self, *_: object) -> None:
        if self._main is None or self._sync.busy:
            return
        with self._sync:
            (x0, x1), _ = self._main.viewRange()
            self.region.setRegion((x0, x1))

    def _on_region_changed(self) -> None:
        if self._main is None or self._sync.busy:
            return
        with self._sync:
            lo, hi = self.region.getRegion()
            self._main.setXRange(lo, hi, padding=0)


class _Echo(QObject):
    """A re-entrancy guard: region and view range update each other without looping."""

    def __init__(self):
        super().__init__()
        self.busy = False

    def __enter__(self):
        self.busy = True
        return self

    def __exit__(self, *_: object) -> None:
        self.busy = False


def busy_time(starts: np.ndarray, ends: np.ndarray, t0: float, t1: float) -> float:
    """Milliseconds within ``[t0, t1]`` covered by at least one ``[start, end]`` interval.

    >>> busy_time(np.array([0.0, 2.0, 3.0]), np.array([1.0, 4.0, 5.0]), 0.5, 4.5)
    3.0
    """
    if t1 <= t0 or len(starts) == 0:
        return 0.0
    order = np.argsort(starts)
    lo = np.clip(starts[order], t0, t1)
    hi = np.clip(ends[order], t0, t1)
    total, reach = 0.0, t0
    for a, b in zip(lo, hi, strict=True):
        a = max(a, reach)
        if b > a:
            total += b - a
            reach = b
    return float(total)


def merge_intervals(
    starts: np.ndarray, ends: np.ndarray, tolerance: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Union of ``[start, end]`` intervals, joining gaps up to ``tolerance`` (the overview draws
    a lane's busy spans, a few hundred rectangles instead of one per operation).

    >>> merge_intervals(np.array([0.0, 1.0, 5.0]), np.array([1.0, 2.0, 6.0]), 0.5)
    (array([0., 5.]), array([2., 6.]))
    """
    if len(starts) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(starts)
    lo, hi = starts[order], ends[order]
    reach = np.maximum.accumulate(hi)
    new = np.ones(len(lo), dtype=bool)
    new[1:] = lo[1:] > reach[:-1] + tolerance
    first = np.nonzero(new)[0]
    last = np.append(first[1:], len(lo)) - 1
    return lo[first], reach[last]
