"""Exports load back: PNG sizes, SVG parses and renders, CSV and JSON round-trip exactly."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import pytest
from PySide6.QtGui import QImage
from PySide6.QtSvg import QSvgRenderer

from app.export import (
    CSV_COLUMNS,
    export_png,
    export_schedule_json,
    export_timeline_csv,
    export_widget,
)
from app.views.matrices import MatricesView
from app.views.schedule_view import ScheduleView
from solver.formats import load_schedule, schedule_to_dict
from solver.simulate import simulate


@pytest.fixture
def view(document, show):
    return show(ScheduleView(document), 800, 500)


def test_export_png_has_the_view_size_times_the_scale(view, tmp_path):
    path = tmp_path / "schedule.png"
    export_png(view, path, scale=2.0)
    image = QImage(str(path))
    assert (image.width(), image.height()) == (1600, 1000)
    colours = {image.pixel(x, y) for x in range(0, 1600, 16) for y in range(0, 1000, 16)}
    assert len(colours) > 5  # bars, curves and text, not a blank page


def test_export_svg_parses_and_renders(qtbot, document, tmp_path):
    matrices = MatricesView(document)
    qtbot.addWidget(matrices)
    matrices.resize(600, 600)
    matrices.show()
    qtbot.waitExposed(matrices)
    path = tmp_path / "matrices.svg"
    export_widget(matrices, path)
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    renderer = QSvgRenderer(str(path))
    assert renderer.isValid() and renderer.viewBox().width() == 600


def test_export_widget_refuses_unknown_suffixes(view, tmp_path):
    with pytest.raises(ValueError, match="unknown image type '.bmp'; use .png or .svg"):
        export_widget(view, tmp_path / "x.bmp")


def test_export_timeline_csv_round_trips(document, tmp_path):
    path = tmp_path / "timeline.csv"
    timeline = document.timeline
    export_timeline_csv(timeline, path)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(timeline.ops) + len(timeline.transfers)
    ops = [r for r in rows if r["event"] != "transfer"]
    for row, op in zip(ops, timeline.ops, strict=True):
        assert (row["event"] == "recompute") == op.recompute
        assert (row["node"], row["device"], int(row["stage"])) == (op.node, op.device, op.stage)
        assert (float(row["start_ms"]), float(row["end_ms"])) == (op.start, op.end)
        assert int(row["memory_bytes"]) == op.memory
    copies = [r for r in rows if r["event"] == "transfer"]
    assert [(r["node"], r["source"], r["target"], r["consumer"]) for r in copies] == [
        ("a", "gpu", "cpu", "d"),
        ("c", "gpu", "cpu", "d"),
    ]
    assert [float(r["duration_ms"]) for r in copies] == [1.0, 1.0]


def test_export_schedule_json_round_trips(document, tmp_path):
    path = tmp_path / "handbuilt.schedule.json"
    schedule = document.result.schedule
    export_schedule_json(schedule, path, document.timeline)
    again = load_schedule(path, document.graph)
    assert schedule_to_dict(again) == schedule_to_dict(schedule)
    assert simulate(document.graph, again).total_ms == document.timeline.total_ms
