"""Exporting what the views show: images (PNG, SVG), the schedule (JSON), the timeline (CSV).

SVG goes through Qt's ``QSvgGenerator`` because pyqtgraph 0.14's ``SVGExporter`` fails on
PySide6 >= 6.11 (pyqtgraph#3495). Images render the whole widget, so a view
exports with its header, legend and every stacked plot, as it looks on screen, but without its
controls (buttons, boxes): a figure shows what is drawn, not a "Reset view" button. The SVG is
written at the screen's resolution (at Qt's default 72 dpi the text of rich-text labels came out
mis-spaced), and a view may offer ``export_context(kind)`` to swap what SVG cannot express (Qt
writes pattern brushes such as the Gantt's hatching as plain fills) for plain lines. Every file
is written atomically; CSV numbers are rounded to a nanosecond and text cells neutralised so
that a spreadsheet never runs them as formulas.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRect, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QProgressBar,
    QWidget,
)

from solver.document.atomic import atomic_write_bytes, atomic_write_text
from solver.document.csvsafe import neutralise_row
from solver.document.schedule import Schedule
from solver.document.schedule_io import save_schedule
from solver.execution.simulate import Timeline

__all__ = [
    "CSV_COLUMNS",
    "CSV_DECIMALS",
    "figure_only",
    "export_png",
    "export_svg",
    "export_widget",
    "export_schedule_json",
    "export_timeline_csv",
    "chrome_trace",
    "export_chrome_trace",
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
CSV_DECIMALS = 6
"""CSV times are rounded to 1e-6 ms (a nanosecond): ``0.062``, not ``0.062000000000000055``."""
_CONTROLS = (QAbstractButton, QComboBox, QAbstractSpinBox, QProgressBar, QLineEdit)
"""Widgets left out of exported figures (and any widget whose ``export_hidden`` property is
true, such as the Gantt chart's keys hint)."""


@contextlib.contextmanager
def figure_only(widget: QWidget, kind: str = "png") -> Iterator[None]:
    """Hide ``widget``'s controls (and let views swap in export-friendly items) while rendering.

    Hidden children are skipped by ``QWidget.render``; their space stays blank because the
    layout is not re-run, so the figure is the on-screen picture without the buttons.
    """
    hidden = [
        c
        for c in widget.findChildren(QWidget)
        if (isinstance(c, _CONTROLS) or c.property("export_hidden")) and c.isVisible()
    ]
    views = [w for w in (widget, *widget.findChildren(QWidget)) if hasattr(w, "export_context")]
    with contextlib.ExitStack() as stack:
        for view in views:
            stack.enter_context(view.export_context(kind))
        for child in hidden:
            child.hide()
        try:
            yield
        finally:
            for child in hidden:
                child.show()


def export_png(widget: QWidget, path: str | os.PathLike, scale: float = 2.0) -> QSize:
    """Render ``widget`` (without its controls) to a PNG at ``scale`` times its size (2 = crisp
    on slides); returns the pixel size written."""
    size = widget.size() * scale
    image = QImage(size, QImage.Format.Format_ARGB32)
    image.setDevicePixelRatio(scale)
    image.fill(widget.palette().color(widget.backgroundRole()))
    with figure_only(widget, "png"):
        painter = QPainter(image)
        try:
            widget.render(painter, QPoint(0, 0))
        finally:
            painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise OSError(f"{path}: could not encode the PNG image")
    buffer.close()
    atomic_write_bytes(path, bytes(data))
    logger.info("exported %s (%dx%d)", path, size.width(), size.height())
    return size


def export_svg(widget: QWidget, path: str | os.PathLike, title: str = "") -> None:
    """Render ``widget`` (without its controls) as an SVG drawing: vector text and lines."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setResolution(widget.logicalDpiX())  # fonts measured as on screen
    generator.setSize(widget.size())
    generator.setViewBox(QRect(0, 0, widget.width(), widget.height()))
    generator.setTitle(title or widget.windowTitle() or type(widget).__name__)
    generator.setDescription("Exported from XEngine Studio")
    with figure_only(widget, "svg"):
        painter = QPainter(generator)
        try:
            widget.render(painter, QPoint(0, 0))
        finally:
            painter.end()
    buffer.close()
    if data.isEmpty():
        raise OSError(f"{path}: could not render the SVG drawing")
    atomic_write_bytes(path, bytes(data))
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
    """Write the schedule file (docs/formats.md), with the timeline's summary when given."""
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
    """Write the timeline as CSV: times rounded to :data:`CSV_DECIMALS`, text neutralised."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in timeline_rows(timeline):
        cells = [_csv_number(row[c]) if isinstance(row[c], float) else row[c] for c in CSV_COLUMNS]
        writer.writerow(neutralise_row(cells))
    atomic_write_text(path, buffer.getvalue())


def _csv_number(value: float) -> str:
    """``repr`` of the value rounded to :data:`CSV_DECIMALS` (shortest text, no float noise).

    >>> _csv_number(0.062000000000000055), _csv_number(2.0), _csv_number(1e-9)
    ('0.062', '2.0', '0.0')
    """
    return repr(round(value, CSV_DECIMALS) + 0.0)


def chrome_trace(timeline: Timeline, name: str = "schedule") -> dict[str, object]:
    """The timeline as a Chrome trace (the JSON Perfetto and chrome://tracing open).

    One complete event (``"ph": "X"``) per operation and per transfer, times in microseconds;
    one thread per device and per link, named by metadata events, in the Gantt's order. Each
    device's memory in use is a counter track (``"ph": "C"``, one sample per change, beside a
    flat one for its activation budget), and each copy is joined to the operation that reads
    it by a flow arrow (``"ph": "s"`` at the copy's end, ``"f"`` at the operation's start).
    """
    lanes = list(dict.fromkeys([*timeline.devices, *(op.device for op in timeline.ops)]))
    links = list(dict.fromkeys(f"{t.source} \u2192 {t.target}" for t in timeline.transfers))
    tid = {lane: k + 1 for k, lane in enumerate([*lanes, *links])}
    events: list[dict[str, object]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": name}},
    ]
    for lane, k in tid.items():
        events.append(
            {"ph": "M", "pid": 1, "tid": k, "name": "thread_name", "args": {"name": lane}}
        )
        events.append(
            {"ph": "M", "pid": 1, "tid": k, "name": "thread_sort_index", "args": {"sort_index": k}}
        )
    for op in timeline.ops:
        events.append(
            {
                "ph": "X",
                "pid": 1,
                "tid": tid[op.device],
                "name": op.node,
                "cat": "recompute" if op.recompute else op.kind,
                "ts": _us(op.start),
                "dur": _us(op.end - op.start),
                "args": {"stage": op.stage, "memory_bytes": op.memory},
            }
        )
    for tr in timeline.transfers:
        events.append(
            {
                "ph": "X",
                "pid": 1,
                "tid": tid[f"{tr.source} \u2192 {tr.target}"],
                "name": f"{'offload' if tr.offload else 'copy'} {tr.tensor}",
                "cat": "offload" if tr.offload else "transfer",
                "ts": _us(tr.start),
                "dur": _us(tr.end - tr.start),
                "args": {"stage": tr.stage, "for": tr.consumer, "bytes": tr.bytes},
            }
        )
    events += _memory_counters(timeline)
    events += _copy_flows(timeline, tid)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _memory_counters(timeline: Timeline) -> list[dict[str, object]]:
    """A counter track per device: bytes in use at each change, and its activation budget."""
    events: list[dict[str, object]] = []
    end = _us(max((op.end for op in timeline.ops), default=0.0))
    for device, curve in timeline.memory.items():
        last = None
        for t, value in zip(curve.times, curve.bytes, strict=True):
            if value != last:
                events.append(_counter(f"{device} memory", _us(float(t)), int(value)))
                last = value
        budget = int(timeline.activation_budgets.get(device, 0))
        if budget:
            for t in (0.0, end):
                events.append(_counter(f"{device} activation budget", t, budget))
    return events


def _counter(name: str, ts: float, value: int) -> dict[str, object]:
    return {"ph": "C", "pid": 1, "name": name, "ts": ts, "args": {"bytes": value}}


def _copy_flows(timeline: Timeline, tid: dict[str, int]) -> list[dict[str, object]]:
    """A flow arrow from each copy's end to the start of the operation that reads it."""
    readers = {(op.stage, op.node, op.device): op for op in timeline.ops}
    events: list[dict[str, object]] = []
    for k, tr in enumerate(timeline.transfers):
        op = readers.get((tr.stage, tr.consumer, tr.target))
        if tr.offload or op is None:
            continue  # an offloading copy is kept, not read at once
        flow = {"pid": 1, "name": f"copy {tr.tensor}", "cat": "copy", "id": k + 1}
        link = tid[f"{tr.source} \u2192 {tr.target}"]
        events.append({**flow, "ph": "s", "tid": link, "ts": _us(tr.end) - 0.001})
        events.append(
            {**flow, "ph": "f", "bp": "e", "tid": tid[op.device], "ts": _us(op.start) + 0.001}
        )
    return events


def export_chrome_trace(timeline: Timeline, path: str | os.PathLike, name: str = "") -> None:
    """Write :func:`chrome_trace` as JSON (atomically)."""
    text = json.dumps(chrome_trace(timeline, name or Path(path).stem), separators=(",", ":"))
    atomic_write_text(path, text)
    logger.info("exported %s", path)


def _us(ms: float) -> float:
    """Milliseconds to trace microseconds, rounded to a nanosecond."""
    return round(ms * 1000.0, 3) + 0.0
