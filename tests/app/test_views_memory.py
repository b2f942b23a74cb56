"""Memory view and the stacked schedule view: steps are the simulator's curves, x-linked."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

from app.theme import colors_for
from app.views.memory import MemoryView
from app.views.schedule_view import ScheduleView
from solver.document.units import format_size

MiB = 2**20


@pytest.fixture
def view(document, show):
    return show(MemoryView(document), 900, 420)


def test_memory_steps_are_the_simulator_curves(view, document):
    timeline = document.timeline
    for device in ("cpu", "gpu"):
        curve, (unit, scale) = view.curve(device), view.unit(device)
        expected = timeline.memory[device]
        assert unit == "MiB"
        assert curve.opts["stepMode"] == "center"
        np.testing.assert_array_equal(curve.xData, [*expected.times, timeline.total_ms])
        np.testing.assert_array_equal(curve.yData * scale, expected.bytes)


def test_memory_gpu_steps_checked_by_hand(view):
    curve = view.curve("gpu")
    np.testing.assert_array_equal(curve.xData, [0, 1, 3, 4, 5, 11, 11])
    np.testing.assert_array_equal(curve.yData, [1, 3, 3, 2, 2, 0])


def test_memory_budget_line_only_where_it_is_to_scale(view):
    assert view.budget_line("gpu").isVisible()
    assert view.budget_line("gpu").value() == pytest.approx(3.0)
    assert not view.budget_line("cpu").isVisible()  # 16 MiB budget, 3 MiB peak


def test_memory_hover_lists_resident_tensors_by_size(view):
    text = view.tooltip_at("gpu", 3.5)
    assert "activations 3.0 MiB of the 3.0 MiB activation budget" in text
    assert "resident: b (2.0 MiB), c (1.0 MiB)" in text
    assert view.resident_at("cpu", 6.5) == (2 * MiB, ("a", "c"))


def test_memory_shows_the_selected_tensor_share(view, document):
    document.set_selection("a")
    np.testing.assert_array_equal(view.selected_curve("gpu").yData, [1, 1, 0, 1, 1, 0])


def test_memory_uses_theme_colour_per_device(view):
    colors = colors_for(view)
    assert view.curve("gpu").opts["pen"].color() == colors.device(1)


def test_schedule_view_links_the_time_axes_and_draws_the_cursor(qtbot, document):
    widget = ScheduleView(document)
    qtbot.addWidget(widget)
    widget.resize(900, 600)
    widget.show()
    qtbot.waitExposed(widget)
    widget.gantt.plot.setXRange(2.0, 6.0, padding=0)
    for device in ("cpu", "gpu"):
        (x0, x1), _ = widget.memory.plot(device).getViewBox().viewRange()
        assert (x0, x1) == pytest.approx((2.0, 6.0), abs=0.02)  # within a pixel
    document.set_cursor(4)
    lines = [widget.memory.cursor_line(d) for d in ("cpu", "gpu")]
    assert all(line.isVisible() and line.value() == 7.0 for line in lines)


def test_memory_title_names_activations_and_the_device_memory(qtbot, show):
    """The curve counts activations; the title says so and names the fixed memory too."""
    from app.document import Document
    from solver.document.examples import example_path
    from solver.document.graph_io import load_graph
    from solver.optimize.bounds import no_remat_peak
    from solver.optimize.methods import solve

    graph = load_graph(example_path("vgg16"))
    gpu = graph.device("gpu")
    graph = graph.with_memory_limits({"gpu": gpu.fixed_memory + no_remat_peak(graph)})
    result = solve(graph, "checkpoint-all:gpu")
    document = Document()
    document.set_graph(graph)
    document.set_result(result)
    view = show(MemoryView(document), 900, 420)
    title = view.title("gpu")
    peak = result.timeline.peaks["gpu"]
    budget = graph.device("gpu").activation_budget
    assert title.startswith(f"gpu activations: peak {format_size(peak)} = ")
    assert f"of the {format_size(budget)} activation budget" in title
    assert f"device memory {format_size(budget + gpu.fixed_memory)} (" in title
    assert f"({format_size(gpu.fixed_memory)} fixed)" in title
    assert view.plot("gpu").getAxis("left").labelText == view.unit("gpu")[0]


def test_schedule_view_keeps_lanes_and_memory_plots_readable_when_short(document, show):
    """A short window scrolls the schedule instead of squashing plots to a few pixels."""
    view = show(ScheduleView(document), 900, 240)
    lanes = len(view.gantt.lanes)
    assert view.gantt.plot.getViewBox().height() >= 16 * lanes  # a line of tick text each
    for device in ("cpu", "gpu"):
        assert view.memory.plot(device).getViewBox().height() >= 40
    assert view.scroll.verticalScrollBar().maximum() > 0  # the rest is a scroll away


def test_schedule_tab_needs_no_scrolling_at_1280x720(make_window, qtbot):
    """Issue 10: at 1280x720 the Gantt chart and every memory curve are on screen at once,
    the time axis title is not cut, and the Gantt opens on the whole schedule."""
    window = make_window("vgg16")
    window.resize(1280, 720)
    view = window.schedule_tabs.widget(0)
    qtbot.waitUntil(lambda: view.scroll.viewport().height() > 0)
    qtbot.waitUntil(lambda: view.scroll.verticalScrollBar().maximum() == 0, timeout=3000)
    lanes = len(view.gantt.lanes)
    assert view.gantt.plot.getViewBox().height() >= 16 * lanes
    for device in ("cpu", "gpu"):
        assert view.memory.plot(device).getViewBox().height() >= 40
    # one time-axis title, under the last plot (the Gantt's was cut by its overview strip)
    assert not view.gantt.plot.getAxis("bottom").label.isVisible()
    assert view.memory.plot("gpu").getAxis("bottom").labelText == "time (ms)"


def test_memory_of_a_device_that_holds_nothing_shows_its_budget(graph, show):
    """A device that holds nothing (every node on the GPU) is drawn against its budget, in
    whole units, instead of a 0-1 B axis ticked every 0.2 B."""
    from app.document import Document
    from solver.execution.simulate import simulate
    from solver.optimize.baselines import checkpoint_all
    from solver.optimize.incumbents import SolveResult
    from solver.status import SolveStatus

    big = graph.with_memory_limits({"gpu": 10**9})
    schedule = checkpoint_all(big, "gpu")
    timeline = simulate(big, schedule, strict=True)
    assert timeline.peaks["cpu"] == 0
    document = Document()
    document.set_graph(big)
    document.set_result(SolveResult("gpu", SolveStatus.FEASIBLE, schedule, timeline, 1.0))
    view = show(MemoryView(document), 900, 420)
    budget = big.device("cpu").activation_budget
    unit, scale = view.unit("cpu")
    assert unit == format_size(budget).split()[1]
    assert view.budget_line("cpu").isVisible()
    assert view.budget_line("cpu").value() == pytest.approx(budget / scale)
    _, (y0, y1) = view.plot("cpu").getViewBox().viewRange()
    assert y1 * scale >= budget
    assert "off scale" not in view.title("cpu")


def test_memory_budget_label_of_a_device_that_holds_nothing_fits_a_short_plot(graph, show):
    """At 1280x720 the label over ResNet-50's idle CPU budget was cut by the plot's top."""
    from app.document import Document
    from solver.execution.simulate import simulate
    from solver.optimize.baselines import checkpoint_all
    from solver.optimize.incumbents import SolveResult
    from solver.status import SolveStatus

    big = graph.with_memory_limits({"gpu": 10**9})
    schedule = checkpoint_all(big, "gpu")
    timeline = simulate(big, schedule, strict=True)
    document = Document()
    document.set_graph(big)
    document.set_result(SolveResult("gpu", SolveStatus.FEASIBLE, schedule, timeline, 1.0))
    view = show(MemoryView(document), 900, 160)
    view.flush()
    view.grab()  # a text item places itself when painted
    plot = view.plot("cpu")
    label = next(
        i for i in plot.items if isinstance(i, pg.TextItem) and "budget" in i.textItem.toPlainText()
    )
    inside = plot.getViewBox().sceneBoundingRect()
    assert inside.top() <= label.sceneBoundingRect().top()
    assert label.sceneBoundingRect().bottom() <= inside.bottom()


def test_memory_hover_names_a_running_workspace(document, show, graph):
    """The curve counts a running node's workspace: hover names it, so the listed parts add
    up to the activations shown."""
    from dataclasses import replace as replaced

    from solver.editing.edits import set_node_fields
    from solver.execution.simulate import simulate

    g = set_node_fields(graph, "d", workspace=5 * MiB)
    result = replaced(document.result, timeline=simulate(g, document.result.schedule))
    document.set_graph(g)
    document.set_result(result)
    view = show(MemoryView(document), 900, 500)
    d = next(op for op in document.timeline.ops if op.node == "d")
    text = view.tooltip_at("cpu", (d.start + d.end) / 2)
    assert "activations 8.0 MiB of the 16.0 MiB activation budget" in text
    assert "resident: workspace of d (5.0 MiB), a (1.0 MiB)" in text
    assert "workspace" not in view.tooltip_at("cpu", d.end + 0.1)  # freed when d ends


def test_memory_budget_label_of_an_empty_plot_is_inside_it(graph, show):
    """With no schedule the right-anchored label sat at time 0, outside the plot but for a
    stray red "B" at its left edge (issue 20)."""
    from app.document import Document

    document = Document()
    document.set_graph(graph)
    view = show(MemoryView(document), 900, 400)
    view.flush()
    plot = view.plot("gpu")
    label = next(
        i for i in plot.items if isinstance(i, pg.TextItem) and "budget" in i.textItem.toPlainText()
    )
    (x0, x1), _ = plot.getViewBox().viewRange()
    assert label.isVisible()
    # anchored at its right end, the label reads leftwards from there: inside the plot
    assert x0 + 0.5 * (x1 - x0) < label.pos().x() <= x1


def test_memory_of_a_device_that_holds_nothing_keeps_a_short_plot(graph, show, qtbot):
    """At 1600x1000 ResNet-50's idle CPU took half the tab for a flat line: a device that
    holds nothing keeps its plot's minimum height and the busy one takes the rest."""
    from app.document import Document
    from app.views.memory import _PLOT_PIXELS
    from solver.execution.simulate import simulate
    from solver.optimize.baselines import checkpoint_all
    from solver.optimize.incumbents import SolveResult
    from solver.status import SolveStatus

    big = graph.with_memory_limits({"gpu": 10**9})
    schedule = checkpoint_all(big, "gpu")
    timeline = simulate(big, schedule, strict=True)
    document = Document()
    document.set_graph(big)
    document.set_result(SolveResult("gpu", SolveStatus.FEASIBLE, schedule, timeline, 1.0))
    view = show(MemoryView(document), 900, 600)
    view.flush()
    view.grab()
    idle, busy = view.plot("cpu"), view.plot("gpu")
    assert idle.height() <= _PLOT_PIXELS + 1
    assert busy.getViewBox().height() > 3 * idle.getViewBox().height()
    document.set_result(None)  # nothing anywhere: the plots share the height again
    view.flush()
    qtbot.waitUntil(lambda: view.plot("cpu").height() > 3 * _PLOT_PIXELS, timeout=2_000)
