"""Light and dark themes, and every colour the schedule views use, in one place.

pyqtgraph ignores ``QPalette`` (pyqtgraph#1588), so :func:`apply_theme` sets both: the Qt palette
for widgets and pyqtgraph's background/foreground for plots, including plots that already exist.
Views pick their colours with :func:`colors_for`, which reads the theme back from the widget's
palette; they listen for ``QEvent.Type.PaletteChange`` and recolour, so no module state is needed.
Colours follow the Okabe-Ito palette, which stays distinguishable under colour blindness.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QBrush, QColor, QPalette, QPen
from PySide6.QtWidgets import (
    QApplication,
    QProxyStyle,
    QStyle,
    QStyleFactory,
    QStyleOption,
    QWidget,
)

__all__ = ["THEMES", "Colors", "FollowsTheme", "colors_for", "apply_theme", "style_plot"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Colors:
    """The colours of one theme, as ``#rrggbb`` strings.

    ``kinds`` maps node kinds (forward, loss, backward, other) to the fill of their first
    computation; a recomputation uses :meth:`recompute_brush` (a lighter fill) with the kind's
    colour as hatching and outline, so the two never look alike.
    """

    name: str
    dark: bool
    background: str
    foreground: str
    muted: str
    grid: str
    kinds: dict[str, str]
    transfer: str
    devices: tuple[str, ...]
    selection: str
    cursor: str
    budget: str
    peak: str
    text_on_bar: str

    def kind(self, kind: str) -> QColor:
        """Fill colour of a first computation of a node of ``kind``."""
        return QColor(self.kinds.get(kind, self.kinds["other"]))

    def recompute(self, kind: str) -> QColor:
        """Fill colour of a recomputation: the kind's colour halfway to the background."""
        return _mix(self.kind(kind), QColor(self.background), 0.55)

    def recompute_brush(self, kind: str) -> QBrush:
        """Hatching drawn over a recomputation's fill (cosmetic, so it does not scale)."""
        return QBrush(self.kind(kind), Qt.BrushStyle.BDiagPattern)

    def device(self, index: int) -> QColor:
        """Colour of the ``index``-th device (memory curves, S matrices)."""
        return QColor(self.devices[index % len(self.devices)])

    def device_fill(self, index: int) -> QColor:
        """Opaque, light fill under a device's memory curve (the grid stays behind it)."""
        return _mix(self.device(index), QColor(self.background), 0.6)

    def pen(self, color: str | QColor, width: float = 1.0, dashed: bool = False) -> QPen:
        """A cosmetic pen (its width is in pixels at any zoom)."""
        pen = pg.mkPen(QColor(color), width=width)
        if dashed:
            pen.setStyle(Qt.PenStyle.DashLine)
        return pen


LIGHT = Colors(
    name="light",
    dark=False,
    background="#ffffff",
    foreground="#262626",
    muted="#8a8a8a",
    grid="#e6e6e6",
    kinds={"forward": "#0072b2", "loss": "#cc79a7", "backward": "#d55e00", "other": "#7f7f7f"},
    transfer="#009e73",
    devices=("#e69f00", "#6a3d9a", "#56b4e9", "#8c564b"),
    selection="#111111",
    cursor="#e4002b",
    budget="#c0392b",
    peak="#111111",
    text_on_bar="#ffffff",
)

DARK = Colors(
    name="dark",
    dark=True,
    background="#1e1f22",
    foreground="#dcdcdc",
    muted="#8c8c8c",
    grid="#34363a",
    kinds={"forward": "#4da3e0", "loss": "#e08cc0", "backward": "#ff7f3f", "other": "#a6a6a6"},
    transfer="#2ecc9a",
    devices=("#f0b429", "#b39ddb", "#7fd3f7", "#c49c94"),
    selection="#ffffff",
    cursor="#ff4d4d",
    budget="#ff6b5e",
    peak="#ffffff",
    text_on_bar="#101010",
)

THEMES: dict[str, Colors] = {"light": LIGHT, "dark": DARK}


def colors_for(widget: QWidget | None = None) -> Colors:
    """The theme in effect for ``widget`` (or the application), read from its palette."""
    palette = widget.palette() if widget is not None else QApplication.palette()
    return DARK if palette.color(QPalette.ColorRole.Window).lightness() < 128 else LIGHT


class FollowsTheme:
    """Mixin (before ``QWidget`` in the bases) for widgets that draw with theme colours: calls
    :meth:`on_theme_changed` on every palette change, the one place that reacts to
    :func:`apply_theme` (each view had its own copy of this ``changeEvent``)."""

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)  # type: ignore[misc]
        if event.type() == QEvent.Type.PaletteChange:
            self.on_theme_changed()

    def on_theme_changed(self) -> None:
        """Recolour with :func:`colors_for`; the palette already is the new theme's."""


class _FramedIndicators(QProxyStyle):
    """Fusion, with check boxes framed in the muted text colour on a dark window.

    Fusion outlines an indicator in the window colour made darker: on the dark theme's
    dark grey the unchecked boxes (Allow offloading, Flows, Auto-solve) all but vanished.
    """

    def drawPrimitive(self, element, option: QStyleOption, painter, widget=None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        indicator = QStyle.PrimitiveElement.PE_IndicatorCheckBox
        if (
            element == indicator
            and option.palette.color(QPalette.ColorRole.Window).lightness() < 128
        ):
            painter.save()
            painter.setPen(QPen(option.palette.color(QPalette.ColorRole.PlaceholderText), 1))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(option.rect.adjusted(0, 0, -1, -1))
            painter.restore()


def apply_theme(app: QApplication, name: str) -> None:
    """Switch the whole application to theme ``name`` ("light" or "dark").

    Sets the Fusion style's palette, pyqtgraph's defaults for new plots, and restyles every
    existing plot. Views that draw with theme colours recolour on their ``PaletteChange`` event.
    """
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}; choose one of {', '.join(THEMES)}")
    colors = THEMES[name]
    if not isinstance(app.style(), _FramedIndicators):
        fusion = QStyleFactory.create("Fusion")
        if fusion is not None:
            app.setStyle(_FramedIndicators(fusion))
    pg.setConfigOptions(background=colors.background, foreground=colors.foreground, antialias=True)
    app.setPalette(_palette(colors))
    for widget in app.allWidgets():
        if isinstance(widget, pg.GraphicsView):
            style_plot(widget, colors)
    logger.info("theme %s applied", name)


def style_plot(view: pg.GraphicsView, colors: Colors) -> None:
    """Give an existing pyqtgraph widget the theme's background, axes and titles."""
    view.setBackground(colors.background)
    for item in view.scene().items():
        if isinstance(item, pg.AxisItem):
            item.setPen(colors.foreground)
            item.setTextPen(colors.foreground)
        elif isinstance(item, pg.LabelItem):
            item.setText(item.text, color=colors.foreground)


def _palette(colors: Colors) -> QPalette:
    palette = QPalette()
    base = QColor(colors.background)
    text = QColor(colors.foreground)
    window = base.darker(108) if not colors.dark else base.lighter(115)
    role = QPalette.ColorRole
    for r, c in (
        (role.Window, window),
        (role.WindowText, text),
        (role.Base, base),
        (role.AlternateBase, window),
        (role.Text, text),
        (role.Button, window),
        (role.ButtonText, text),
        (role.ToolTipBase, base),
        (role.ToolTipText, text),
        (role.Highlight, QColor(colors.kinds["forward"])),
        (role.HighlightedText, QColor("#ffffff")),
        (role.PlaceholderText, QColor(colors.muted)),
    ):
        palette.setColor(r, c)
    palette.setColor(QPalette.ColorGroup.Disabled, role.Text, QColor(colors.muted))
    palette.setColor(QPalette.ColorGroup.Disabled, role.ButtonText, QColor(colors.muted))
    palette.setColor(QPalette.ColorGroup.Disabled, role.WindowText, QColor(colors.muted))
    return palette


def _mix(a: QColor, b: QColor, amount: float) -> QColor:
    """``a`` moved ``amount`` (0..1) of the way towards ``b``."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )
