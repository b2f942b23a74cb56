"""Exports load back: PNG sizes, SVG parses and renders, CSV and JSON round-trip exactly."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtGui import QImage
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QToolButton

from app.export import (
    CSV_COLUMNS,
    export_png,
    export_schedule_json,
    export_timeline_csv,
    export_widget,
)
from app.theme import colors_for
from app.views.matrices import MatricesView
from app.views.schedule_view import ScheduleView
from solver.document.schedule_io import load_schedule, schedule_from_dict, schedule_to_dict
from solver.editing.edits import rename_node
from solver.execution.simulate import simulate

DATA = Path(__file__).resolve().parents[1] / "data"


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


def test_export_figures_leave_the_controls_out(view, tmp_path):
    """No "Reset view" button in a figure; the button is back on screen afterwards."""
    path = tmp_path / "schedule.svg"
    export_widget(view, path)
    text = path.read_text()
    assert "Reset view" not in text and "recomputations" in text
    assert "keys" not in text and "Find node" not in text  # screen hints, not figure text
    reset = next(b for b in view.findChildren(QToolButton) if b.text() == "Reset view")
    assert reset.isVisible()


def test_export_svg_draws_the_recomputation_hatching_as_lines(view, document, tmp_path):
    gantt = view.gantt
    hatch = gantt.layer("hatch:forward")
    assert len(hatch.opts["x0"]) == 1  # the hand-built schedule recomputes a (forward) once
    with gantt.export_context("svg"):
        lines = gantt._hatch_lines["forward"]
        x, y = lines.getData()
        assert lines.isVisible() and not hatch.isVisible() and len(x) >= 4
        start, width = hatch.opts["x0"][0], hatch.opts["width"][0]
        assert x.min() >= start - 1e-9 and x.max() <= start + width + 1e-9
        lane, height = hatch.opts["y"][0], hatch.opts["height"][0]
        assert y.min() >= lane - height / 2 - 1e-9 and y.max() <= lane + height / 2 + 1e-9
    assert hatch.isVisible() and not lines.isVisible()
    path = tmp_path / "gantt.svg"
    export_widget(gantt, path)
    stroke = colors_for(gantt).kind("forward").name()
    root = ET.parse(path).getroot()
    hatched = [  # Qt puts the stroke on a group around the drawn path
        child
        for group in root.iter()
        if group.get("stroke") == stroke
        for child in group
        if child.tag.endswith("path") and child.get("d", "").count("M") >= 4
    ]
    assert hatched, "the hatching lines are in the SVG"


def test_export_timeline_csv_rounds_float_noise_and_neutralises_text(document, tmp_path):
    graph = rename_node(document.graph, "a", "=HYPERLINK(1)")
    noisy = graph.with_memory_limits(document.memory_limits)
    schedule = load_schedule(DATA / "handbuilt.schedule.json", document.graph)
    schedule = schedule_from_dict(
        json.loads(json.dumps(schedule_to_dict(schedule)).replace('"a"', '"=HYPERLINK(1)"')),
        noisy,
    )
    timeline = simulate(noisy, schedule)
    assert timeline.valid
    shifted = replace(
        timeline,
        ops=tuple(replace(op, start=op.start + 0.062000000000000055) for op in timeline.ops),
    )
    path = tmp_path / "t.csv"
    export_timeline_csv(shifted, path)
    text = path.read_text()
    assert "0.062000000000000055" not in text and "1.062," in text
    assert "'=HYPERLINK(1)" in text and ",=HYPERLINK" not in text
