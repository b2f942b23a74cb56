"""Trade-off explorer: a budget sweep in the background; points open their schedules."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.views.explorer import ExplorerView, sweep_fractions
from app.workers import ProcessWorker
from solver.document.units import format_size
from solver.optimize.bounds import lower_bound, no_remat_peak
from solver.optimize.solve import SolveOptions


@pytest.fixture
def view(qtbot, document, show):
    widget = show(ExplorerView(document, options=SolveOptions(time_limit_s=20)), 900, 500)
    yield widget
    widget.cancel()
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=30_000)


def test_sweep_fractions_run_from_the_peak_down_to_the_lower_bound(document):
    graph = document.graph
    fractions = sweep_fractions(graph, "gpu", 3)
    peak, bound = no_remat_peak(graph), lower_bound(graph, "gpu")
    assert fractions[0] == 1.0
    assert int(fractions[-1] * peak) >= bound
    assert fractions == sorted(fractions, reverse=True)


def test_explorer_sweep_plots_time_against_budget(qtbot, view, document):
    with qtbot.waitSignal(view.sweep_finished, timeout=60_000) as blocker:
        view.run("gpu", 3)
    points = blocker.args[0]
    fractions = sweep_fractions(document.graph, "gpu", 3)
    assert len(points) == 2 * len(fractions)
    scale = 2**20
    for method, scatter in view.scatter.items():
        good = sorted(
            (p for p in points if p.method == method and p.total_ms),
            key=lambda p: p.activation_budget,
        )
        x, y = scatter.getData()
        np.testing.assert_allclose(x, [p.activation_budget / scale for p in good])
        np.testing.assert_allclose(y, [p.total_ms for p in good])


def test_explorer_clicking_a_point_opens_its_schedule(qtbot, view, document):
    with qtbot.waitSignal(view.sweep_finished, timeout=60_000):
        view.run("gpu", 2)
    spot = view.scatter["xengine"].points()[0]
    vb = view.plot.getViewBox()
    graphics_view = vb.scene().views()[0]
    pos = graphics_view.mapFromScene(vb.mapViewToScene(spot.pos()))
    with qtbot.waitSignal(document.result_changed):
        QTest.mouseClick(graphics_view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert document.result is spot.data().result


def test_explorer_cancel_keeps_points_so_far(qtbot, view):
    view.run("gpu", 4)
    view.cancel()
    assert not view.running
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=30_000)


def test_explorer_offers_to_apply_the_budget_of_an_opened_point(qtbot, view, document):
    with qtbot.waitSignal(view.sweep_finished, timeout=60_000) as blocker:
        view.run("gpu", 2)
    current = document.memory_limits["gpu"]
    point = next(
        p
        for p in blocker.args[0]
        if p.result.ok and p.result.schedule.memory_limits["gpu"] != current
    )
    assert not view.apply_button.isVisible()
    view.open_point(point)
    assert not document.is_result_current()
    wanted = point.result.schedule.memory_limits["gpu"]
    assert view.apply_button.isVisible()
    assert view.apply_button.text() == f"Apply this memory limit (gpu = {format_size(wanted)})"
    view.apply_button.click()
    assert document.memory_limits["gpu"] == wanted
    assert document.result is point.result and document.is_result_current()
    assert not view.apply_button.isVisible()
    assert document.undo_stack.undoText().startswith("Set ")
    document.undo_stack.undo()
    assert document.memory_limits["gpu"] == current and view.apply_button.isVisible()


def test_explorer_steps_box_says_what_is_swept(qtbot, view):
    """run("gpu", 8) from a script or a test: the box said 6 while 8 budgets were swept."""
    assert view._steps.value() == 6
    view.run("gpu", 8)
    assert view._steps.value() == 8
    assert view._status.text().startswith("Sweeping gpu in ")
    view.cancel()


def test_explorer_progress_count_is_never_cut(qtbot, view):
    view.resize(420, 300)  # narrow: the status line stretches, the bar must keep its text
    view.run("gpu", 8)
    bar = view._progress
    qtbot.waitUntil(lambda: bar.isVisible())
    widest = bar.fontMetrics().horizontalAdvance(f"{bar.maximum()} / {bar.maximum()} solves")
    assert bar.isTextVisible() and bar.width() >= widest
    view.cancel()


def test_explorer_landmarks_computed_once_per_graph(
    qtbot, view, document, handbuilt_result, monkeypatch
):
    """Each incumbent of a solve redrew the ringed point and recomputed the no-remat peak
    (1.8 ms on ResNet-50): now once per graph structure, whatever the results shown."""
    import app.landmarks as landmarks
    import app.views.explorer as explorer

    calls = []
    original = landmarks.no_remat_peak
    for module in (landmarks, explorer):  # wherever the explorer gets it from
        monkeypatch.setattr(module, "no_remat_peak", lambda g: calls.append(g) or original(g))
    document.set_graph(document.graph.with_memory_limits(document.memory_limits))  # new structure
    calls.clear()
    for _ in range(5):
        document.set_result(None)
        document.set_result(handbuilt_result)
    assert len(calls) <= 1
    assert document.landmarks().peak == no_remat_peak(document.graph)
    assert document.landmarks().lower["gpu"] == lower_bound(document.graph, "gpu")


@pytest.mark.parametrize("steps", [3, 6, 7])
def test_sweep_fractions_are_as_many_as_asked_below_the_bound(steps):
    """The chain's gpu opens below its lower bound: "6 budgets" swept 7 (issue 20)."""
    from solver.document.examples import example_path
    from solver.document.graph_io import load_graph

    graph = load_graph(example_path("chain"))
    peak, bound = no_remat_peak(graph), lower_bound(graph, "gpu")
    assert graph.device("gpu").activation_budget < bound
    fractions = sweep_fractions(graph, "gpu", steps)
    assert len(fractions) == steps
    assert fractions[0] == 1.0
    assert any(abs(f * peak - bound) <= 1e-5 * peak for f in fractions)


def test_explorer_mark_labels_never_overlap(qtbot, view):
    """ "current" and "lower bound" wrote over each other (issue 20)."""
    with qtbot.waitSignal(view.sweep_finished, timeout=60_000):
        view.run("gpu", 3)
    rects = list(view.mark_label_rects().values())
    assert len(rects) == 3
    for i, a in enumerate(rects):
        for b in rects[i + 1 :]:
            assert not a.intersects(b)
