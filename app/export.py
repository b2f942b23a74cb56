"""Exporting what the views show: images (PNG, SVG), the schedule (JSON), the timeline (CSV).

SVG goes through Qt's ``QSvgGenerator`` because pyqtgraph 0.14's ``SVGExporter`` fails on
PySide6 >= 6.11 (qt-stack.md §3.3 #2, pyqtgraph#3495). Images render the whole widget, so a view
exports with its header, legend and every stacked plot, as it looks on screen.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QWidget

from solver.formats import atomic_write_text, save_schedule
from solver.schedule import Schedule
from solver.simulate import Timeline

__all__ = [
    "CSV_COLUMNS",
    "export_png",
    "export_svg",
    "export_widget",
    "export_schedule_json",
    "export_timeline_csv",
    "timeline_rows",
]

logger = logging.getLogger(__name__)

CSV_COLUMNS = (
    "event",
    "stage",
    "node",
    "node_kind",
    "device",
    "source",
    "target",
    "consumer",
    "start_ms",
    "end_ms",
    "duration_ms",
    "memory_bytes",
)
"""Timeline CSV columns. ``event`` is compute, recompute or transfer; ``memory_bytes`` is the
memory in use on the device during an operation, or the bytes moved by a transfer."""


def export_png(widget: QWidget, path: str | os.PathLike, scale: float = 2.0) -> QSize:
    """Render ``widget`` to a PNG at ``scale`` times its size (2 = crisp on slides); returns
    the pixel size written."""
    size = widget.size() * scale
    image = QImage(size, QImage.Format.Format_ARGB32)
    image.setDevicePixelRatio(scale)
    image.fill(widget.palette().color(widget.backgroundRole()))
    painter = QPainter(image)
    try:
        widget.render(painter, QPoint(0, 0))
    finally:
        painter.end()
    if not image.save(os.fspath(path), "PNG"):
        raise OSError(f"{path}: could not write the PNG image")
    logger.info("exported %s (%dx%d)", path, size.width(), size.height())
    return size


def export_svg(widget: QWidget, path: str | os.PathLike, title: str = "") -> None:
    """Render ``widget`` as an SVG drawing (vector text and lines, scalable in slides)."""
    generator = QSvgGenerator()
    generator.setFileName(os.fspath(path))
    generator.setSize(widget.size())
    generator.setViewBox(QRect(0, 0, widget.width(), widget.height()))
    generator.setTitle(title or widget.windowTitle() or type(widget).__name__)
    generator.setDescription("Exported from XEngine Studio")
    painter = QPainter(generator)
    try:
        widget.render(painter, QPoint(0, 0))
    finally:
        painter.end()
    if not Path(path).is_file():
        raise OSError(f"{path}: could not write the SVG drawing")
    logger.info("exported %s", path)


def export_widget(widget: QWidget, path: str | os.PathLike) -> None:
    """Export ``widget`` as PNG or SVG, chosen by the file suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        export_png(widget, path)
    elif suffix == ".svg":
        export_svg(widget, path)
    else:
        raise ValueError(f"{path}: unknown image type {suffix!r}; use .png or .svg")


def export_schedule_json(
    schedule: Schedule, path: str | os.PathLike, timeline: Timeline | None = None
) -> None:
    """Write the schedule file (spec/formats.md), with the timeline's summary when given."""
    save_schedule(schedule, path, timeline.summary() if timeline is not None else None)


def timeline_rows(timeline: Timeline) -> list[dict[str, object]]:
    """One row per operation and transfer, in time order, keyed by :data:`CSV_COLUMNS`."""
    rows: list[dict[str, object]] = []
    for op in timeline.ops:
        rows.append(
            {
                "event": "recompute" if op.recompute else "compute",
                "stage": op.stage,
                "node": op.node,
                "node_kind": op.kind,
                "device": op.device,
                "source": "",
                "target": "",
                "consumer": "",
                "start_ms": op.start,
                "end_ms": op.end,
                "duration_ms": op.duration,
                "memory_bytes": op.memory,
            }
        )
    for tr in timeline.transfers:
        rows.append(
            {
                "event": "transfer",
                "stage": tr.stage,
                "node": tr.tensor,
                "node_kind": "",
                "device": f"{tr.source}->{tr.target}",
                "source": tr.source,
                "target": tr.target,
                "consumer": tr.consumer,
                "start_ms": tr.start,
                "end_ms": tr.end,
                "duration_ms": tr.end - tr.start,
                "memory_bytes": tr.bytes,
            }
        )
    rows.sort(key=lambda row: (row["start_ms"], row["end_ms"]))
    return rows


def export_timeline_csv(timeline: Timeline, path: str | os.PathLike) -> None:
    """Write the timeline as CSV (``repr`` floats, so the numbers read back exactly)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in timeline_rows(timeline):
        writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in row.items()})
    atomic_write_text(path, buffer.getvalue())
