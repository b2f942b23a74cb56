"""Two stored results overlaid in the Gantt chart and the memory curves (issue 20)."""

from __future__ import annotations

import pytest

from app.views.schedule_view import ScheduleView
from solver.optimize.methods import solve


@pytest.fixture
def two(qtbot, make_window):
    window = make_window("chain")
    doc = window.document
    first = solve(doc.graph, "checkpoint-all:cpu")
    second = solve(doc.graph, "greedy")
    for method, result in (("checkpoint-all:cpu", first), ("greedy", second)):
        key = (doc.structure_token, method, tuple(sorted(doc.memory_limits.items())))
        doc.cache_result(key, result)
    doc.set_result(second)
    return window, first, second


def test_schedule_view_overlays_another_stored_result(two):
    window, first, second = two
    view = window.schedule_tabs.widget(0)
    assert isinstance(view, ScheduleView)
    choices = view.compare_choices()
    assert len(choices) == 2 and "checkpoint-all:cpu" in choices[1]
    view.compare_with(first)
    ghosts = view.gantt.layer("measured").opts
    assert len(ghosts["x0"]) == len(first.timeline.ops) + len(first.timeline.transfers)
    assert "overlaid" in view.gantt.summary_text and "checkpoint-all:cpu" in view.gantt.summary_text
    x, y = view.memory.compared_curve("cpu").getData()
    assert len(x) and max(y) > 0
    view.compare_with(None)
    assert len(view.gantt.layer("measured").opts["x0"]) == 0
    x, _ = view.memory.compared_curve("cpu").getData()
    assert x is None or len(x) == 0


def test_schedule_view_drops_the_overlay_when_it_goes_on_display(two):
    window, first, second = two
    view = window.schedule_tabs.widget(0)
    view.compare_with(first)
    window.document.set_result(first)  # the compared one is now the one on display
    assert view.gantt.compared is None
    assert any("greedy" in c for c in view.compare_choices())
