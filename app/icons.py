"""Media icons (first, previous, play, pause, next, last) drawn in a given colour.

The style's standard media pixmaps are dark grey on every theme, nearly invisible on the dark
one (issue 10). These are painted from simple shapes in the palette's button-text colour, so a
theme change only needs the icons to be made again.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap, QPolygonF

__all__ = ["MEDIA_ICONS", "media_icon"]

MEDIA_ICONS = ("first", "previous", "play", "pause", "next", "last")
_SIZE = 32  # drawn at 2x, shown at 16 px


def media_icon(name: str, color: QColor | str) -> QIcon:
    """The ``name`` icon (one of :data:`MEDIA_ICONS`) filled with ``color``."""
    if name not in MEDIA_ICONS:
        raise ValueError(f"unknown media icon {name!r}; choose one of {', '.join(MEDIA_ICONS)}")
    pixmap = QPixmap(_SIZE, _SIZE)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(color))
    for shape in _shapes(name):
        if isinstance(shape, QRectF):
            painter.drawRect(shape)
        else:
            painter.drawPolygon(shape)
    painter.end()
    pixmap.setDevicePixelRatio(2.0)
    return QIcon(pixmap)


def _triangle(left: float, right: float, pointing_right: bool) -> QPolygonF:
    tip, base = (right, left) if pointing_right else (left, right)
    return QPolygonF([QPointF(base, 7), QPointF(base, 25), QPointF(tip, 16)])


def _shapes(name: str) -> list[QRectF | QPolygonF]:
    if name == "play":
        return [_triangle(9, 25, True)]
    if name == "pause":
        return [QRectF(9, 7, 5, 18), QRectF(18, 7, 5, 18)]
    if name == "next":
        return [_triangle(5, 16, True), _triangle(16, 27, True)]
    if name == "previous":
        return [_triangle(5, 16, False), _triangle(16, 27, False)]
    if name == "last":
        return [_triangle(6, 20, True), QRectF(21, 7, 4, 18)]
    return [QRectF(7, 7, 4, 18), _triangle(12, 26, False)]  # first
