"""Small input widgets shared by the panels: a size field with units and a slider with markers.

A size field shows its value in a binary (IEC) unit like every size in the window, exact when
short (``16 GiB``), otherwise rounded with the exact bytes in its tooltip (``27.7 MiB``, never
``2751027520 B``); it accepts any unit typed (``29 MB``) and keeps the exact
bytes and commits only valid input that the user changed; the slider draws the memory landmarks
of docs/model.md §4 (lower bound, no-rematerialization peak) as ticks over its groove.
"""

from __future__ import annotations

import math
from fractions import Fraction

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QLineEdit,
    QProgressBar,
    QSlider,
    QStyle,
    QStyleOptionSlider,
    QWidget,
)

from solver.document.units import parse_size

__all__ = [
    "exact_size_text",
    "size_text",
    "count_bar",
    "SizeEdit",
    "MarkedSlider",
    "ERROR_STYLE",
]

ERROR_STYLE = "QLineEdit { border: 1px solid #d62728; background: #fdecea; }"
_UNITS = (
    ("GiB", 1024**3),
    ("GB", 1000**3),
    ("MiB", 1024**2),
    ("MB", 1000**2),
    ("KiB", 1024),
    ("kB", 1000),
)


def exact_size_text(num_bytes: int) -> str:
    """The shortest exact spelling of a size: the largest unit that needs at most 3 decimals
    and fewer than 5 integer digits; otherwise plain bytes.

    >>> exact_size_text(29_000_000), exact_size_text(16 * 1024**3), exact_size_text(25_200_000_000)
    ('29 MB', '16 GiB', '25.2 GB')
    >>> exact_size_text(1_234_567), exact_size_text(3 * 1024**2 // 2), exact_size_text(2751027520)
    ('1234.567 kB', '1.5 MiB', '2751027520 B')
    """
    for unit, factor in _UNITS:
        if num_bytes < factor:
            continue
        text = f"{num_bytes / factor:.3f}".rstrip("0").rstrip(".")
        if (
            num_bytes < 10_000 * factor and Fraction(text) * factor == num_bytes
        ):  # exact: parse_size would drop a fraction
            return f"{text} {unit}"
    return f"{num_bytes} B"


def size_text(num_bytes: int) -> str:
    """What a size field shows: always a binary (IEC) unit, so that it reads like every other
    size in the window; exact when that needs at most 3 decimals, else 3 significant digits
    (the exact bytes are in the field's tooltip and are kept until the user types).

    >>> size_text(29_000_000), size_text(2751027520), size_text(3 * 1024**2 // 2), size_text(512)
    ('27.7 MiB', '2.56 GiB', '1.5 MiB', '512 B')
    >>> size_text(16 * 1024**3), size_text(1023 * 1024**2 + 1)
    ('16 GiB', '1023 MiB')
    """
    for unit, factor in _UNITS[::2]:  # GiB, MiB, KiB
        if num_bytes >= factor:
            text = f"{num_bytes / factor:.3f}".rstrip("0").rstrip(".")
            if Fraction(text) * factor == num_bytes:
                return f"{text} {unit}"
            value = num_bytes / factor
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
    return f"{num_bytes} B"


def count_bar(text_format: str, widest: int = 888) -> QProgressBar:
    """A progress bar that counts (``"%v / %m solves"``) and is never narrower than its text.

    Beside a stretching status line a bar can be squeezed below its text's width, and the
    count is cut off mid-sweep. Its minimum width fits the text at ``widest``.
    """
    bar = QProgressBar()
    bar.setFormat(text_format)
    bar.setTextVisible(True)
    sample = text_format.replace("%v", str(widest)).replace("%m", str(widest))
    bar.setMinimumWidth(bar.fontMetrics().horizontalAdvance(sample) + 24)
    return bar


class SizeEdit(QLineEdit):
    """A line edit for a size in bytes, with units (``4 MB``, ``1.5 GiB``, ``12``).

    Emits ``size_committed(int)`` on Enter or focus-out with valid, changed input; invalid input
    turns red with the parser's reason as tooltip, and Escape restores the last value. A rounded
    text left as shown commits nothing, so the exact bytes behind it survive a focus-out.
    """

    size_committed = Signal(object)
    """A new, valid size in bytes was entered (an ``int``; ``Signal(int)`` stops at 2 GiB)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._value: int | None = None
        self._shown = ""
        self._percent_of: tuple[int, int] | None = None
        self.setPlaceholderText("e.g. 4 GiB")
        self.editingFinished.connect(self._on_self_editing_finished)
        self.textEdited.connect(self._on_self_text_edited)

    def value(self) -> int | None:
        return self._value

    def set_value(self, num_bytes: int | None) -> None:
        """Show ``num_bytes`` (``None`` clears); never emits ``size_committed``."""
        self._value = num_bytes
        self._show()
        self._mark(None)

    def set_percent_base(self, fixed: int, peak: int) -> None:
        """Accept ``60%`` as ``fixed + 60 % of peak``, as ``--budget gpu=60%`` reads it (the
        no-remat peak; the fixed memory on top). A peak of 0 turns percentages off."""
        self._percent_of = (fixed, peak) if peak > 0 else None

    def parse(self, text: str) -> int:
        """Bytes for ``text``: a size with a unit, or a percentage of the peak (see
        :meth:`set_percent_base`); raises ``ValueError`` with the reason."""
        stripped = text.strip()
        if not stripped.endswith("%"):
            return parse_size(text)
        if self._percent_of is None:
            raise ValueError("a percentage needs a graph with a no-remat peak; type a size")
        try:
            percent = float(stripped[:-1])
        except ValueError:
            raise ValueError(f"{stripped!r} is not a percentage") from None
        if not math.isfinite(percent) or percent < 0:
            raise ValueError("a percentage must be a number >= 0, e.g. 60%")
        fixed, peak = self._percent_of
        return fixed + int(percent / 100 * peak)

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.set_value(self._value)
            return
        super().keyPressEvent(event)

    def _on_self_text_edited(self, text: str) -> None:
        try:
            self.parse(text)
        except ValueError as exc:
            self._mark(str(exc))
        else:
            self._mark(None)

    def _on_self_editing_finished(self) -> None:
        if self.text() == self._shown:
            return  # untouched; parsing a rounded text would change the exact value
        try:
            value = self.parse(self.text())
        except ValueError as exc:
            self._mark(str(exc))
            return
        self._mark(None)
        if value != self._value:
            self._value = value
            self._show()
            self.size_committed.emit(value)
        else:
            self._show()

    def _show(self) -> None:
        self._shown = "" if self._value is None else size_text(self._value)
        self.setText(self._shown)

    def _mark(self, error: str | None) -> None:
        self.setStyleSheet(ERROR_STYLE if error else "")
        exact = f"{self._value:,} bytes. " if self._value is not None else ""
        hint = "Type bytes, or a number with B, kB, MB, GB, KiB, MiB or GiB"
        if self._percent_of is not None:
            hint += ", or a percentage of the no-remat peak (60%)"
        self.setToolTip(error or exact + hint)


class MarkedSlider(QSlider):
    """A horizontal slider that draws labelled ticks at given slider values.

    Markers are ``(value, colour, tooltip)``; they are drawn over the groove so that the handle
    can be dragged to them.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(Qt.Orientation.Horizontal, parent)
        self._markers: list[tuple[int, QColor, str]] = []
        self.setMinimumHeight(26)

    def set_markers(self, markers: list[tuple[int, str, str]]) -> None:
        self._markers = [(v, QColor(c), tip) for v, c, tip in markers]
        self.setToolTip("\n".join(tip for _, _, tip in markers))
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if not self._markers:
            return
        option = QStyleOptionSlider()
        self.initStyleOption(option)
        groove = self.style().subControlRect(
            QStyle.ComplexControl.CC_Slider, option, QStyle.SubControl.SC_SliderGroove, self
        )
        handle = self.style().subControlRect(
            QStyle.ComplexControl.CC_Slider, option, QStyle.SubControl.SC_SliderHandle, self
        )
        span = groove.width() - handle.width()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        for value, colour, _ in self._markers:
            if not self.minimum() <= value <= self.maximum():
                continue
            x = (
                groove.x()
                + handle.width() // 2
                + QStyle.sliderPositionFromValue(self.minimum(), self.maximum(), value, span)
            )
            painter.setPen(QPen(colour, 2))
            painter.drawLine(x, 1, x, self.height() - 2)
            painter.fillRect(QRect(x - 3, 0, 7, 3), colour)
        painter.end()
