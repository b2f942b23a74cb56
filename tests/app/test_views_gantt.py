"""Gantt view: bars are the simulator's events, coloured by kind; hover explains; click selects.

Uses the hand-built schedule of tests/data (see tests/solver/execution/test_explain.py for
its story).
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest

from app.theme import colors_for
from app.views.gantt import GanttView


@pytest.fixture
def view(document, show):
    return show(GanttView(document), 900, 320)


def click(qtbot, view: GanttView, x: float, lane: float, double: bool = False) -> None:
    """A real mouse click on the plot at data coordinates (time, lane)."""
    vb = view.plot.getViewBox()
    graphics_view = vb.scene().views()[0]
    pos = graphics_view.mapFromScene(vb.mapViewToScene(QPointF(x, lane)))
    viewport, left = graphics_view.viewport(), Qt.MouseButton.LeftButton
    QTest.mouseClick(viewport, left, pos=pos)
    if double:  # Qt's sequence: press, release, double-click, release
        QTest.mouseDClick(viewport, left, pos=pos)
        QTest.mouseRelease(viewport, left, pos=pos)


def spans(view: GanttView, layer: str) -> list[tuple[float, float, float]]:
    opts = view.layer(layer).opts
    return sorted(
        zip(
            np.asarray(opts["x0"]),
            np.asarray(opts["x0"]) + np.asarray(opts["width"]),
            np.asarray(opts["y"]),
            strict=True,
        )
    )


def test_gantt_lanes_are_devices_each_followed_by_its_links(view):
    assert view.lanes == ("cpu", "cpu → gpu", "gpu", "gpu → cpu")


def test_gantt_bars_match_the_simulator_by_kind(view, document):
    gpu, cpu, link = 2.0, 0.0, 3.0
    assert spans(view, "forward") == [(0.0, 1.0, gpu), (1.0, 3.0, gpu)]
    assert spans(view, "loss") == [(3.0, 4.0, gpu)]
    assert spans(view, "backward") == [(7.0, 11.0, cpu)]
    assert spans(view, "recompute:forward") == [(4.0, 5.0, gpu)]
    assert spans(view, "hatch:forward") == [(4.0, 5.0, gpu)]
    assert spans(view, "transfer") == [(5.0, 6.0, link), (6.0, 7.0, link)]
    timeline = document.timeline
    drawn = sum(len(spans(view, k)) for k in ("forward", "loss", "backward", "recompute:forward"))
    assert drawn == len(timeline.ops)


def test_gantt_colours_first_computations_recomputations_and_transfers_apart(view):
    colors = colors_for(view)
    assert view.layer("forward").opts["brush"] == colors.kind("forward")
    assert view.layer("backward").opts["brush"] == colors.kind("backward")
    assert view.layer("recompute:forward").opts["brush"] == colors.recompute("forward")
    assert view.layer("hatch:forward").opts["brush"].style() == Qt.BrushStyle.BDiagPattern
    assert view.layer("transfer").opts["brush"].name() == colors.transfer
    assert colors.kind("forward") != colors.kind("backward") != colors.recompute("forward")


def test_gantt_tooltip_says_why_a_node_is_recomputed(view):
    text = view.tooltip_at(4.5, 2.0)
    assert "<b>a</b>" in text and "stage 3" in text and "duration 1 ms" in text
    assert "recomputed: its output was freed on gpu after b used it in stage 1" in text
    assert "to stay under 3.0 MiB" in text


def test_gantt_tooltip_of_a_transfer_names_source_target_and_consumer(view):
    text = view.tooltip_at(6.5, 3.0)
    assert "copy of c</b> gpu → cpu, for d" in text and "1.0 MiB" in text
    assert view.tooltip_at(8.0, 3.0) == ""


def test_gantt_click_selects_the_node_and_empty_space_clears(qtbot, view, document):
    with qtbot.waitSignal(document.selection_changed):
        click(qtbot, view, 2.0, 2.0)
    assert document.selection == "b"
    assert spans(view, "selection") == [(1.0, 3.0, 2.0)]
    with qtbot.waitSignal(document.selection_changed):
        click(qtbot, view, 9.0, 2.0)
    assert document.selection is None
    assert spans(view, "selection") == []


def test_gantt_selection_outlines_every_bar_of_the_node(view, document):
    document.set_selection("a")
    assert spans(view, "selection") == [(0.0, 1.0, 2.0), (4.0, 5.0, 2.0), (5.0, 6.0, 3.0)]


def test_gantt_double_click_moves_the_cursor_and_outlines_its_copies(qtbot, view, document):
    with qtbot.waitSignal(document.cursor_changed):
        click(qtbot, view, 9.0, 0.0, double=True)
    assert document.cursor == 4
    assert spans(view, "cursor") == [(5.0, 6.0, 3.0), (6.0, 7.0, 3.0), (7.0, 11.0, 0.0)]


def test_gantt_reset_view_shows_the_whole_schedule(view):
    view.plot.setXRange(2.0, 3.0, padding=0)
    view.reset_view()
    (x0, x1), _ = view.plot.getViewBox().viewRange()
    assert x0 <= 0.0 and x1 >= 11.0


def test_gantt_empties_when_the_result_goes(view, document):
    document.set_result(None)
    assert spans(view, "forward") == [] and spans(view, "transfer") == []


def test_gantt_summary_says_only_what_the_schedule_has(view, document, graph):
    """A third line of summary took the chart's time axis at 1280x720 during a solve: the
    provisional note is short, and a schedule without transfers says so in two words."""
    from dataclasses import replace as replaced

    from app.views.gantt_text import summary_html
    from solver.optimize.methods import solve

    colors = colors_for(view)
    moved = summary_html(document.result, colors)
    assert "compute 9 ms · transfers 2 ms (2)" in moved  # the handbuilt schedule: 11 ms
    alone = solve(graph, "checkpoint-all:cpu")
    text = summary_html(replaced(alone, seconds=2.34), colors, provisional=True)
    assert "<b>provisional</b> (2.3 s in, still solving)" in text
    assert "no transfers" in text and "compute" not in text
