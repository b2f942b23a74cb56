"""The Schedule tab's concurrent toggle and the drawing of offloaded tensors (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest

from app.document import Document
from app.views.concurrent_source import timeline_end
from app.views.schedule_view import ScheduleView
from solver.document.graph_io import graph_from_dict
from solver.document.schedule_io import schedule_from_dict
from solver.execution.concurrent import concurrent_layout
from solver.execution.simulate import simulate
from solver.optimize.solve import SolveResult
from solver.status import SolveStatus

# tests/solver/handmade.py's offload_chain: a (GPU, 10 ms) offloaded to the host at the end of
# stage 1 and copied back and kept at the end of stage 2, each copy 1 ms: serial 15 ms,
# concurrent 14 ms (the copy out runs beside b).
CHAIN = {
    "format": "remat-graph",
    "version": 1,
    "name": "offload chain",
    "devices": [{"name": "cpu", "memory": 100}, {"name": "gpu", "memory": 3}],
    "links": [
        {"from": "gpu", "to": "cpu", "bandwidth": 1000},
        {"from": "cpu", "to": "gpu", "bandwidth": 1000},
    ],
    "nodes": [
        {"id": "a", "memory": 1, "cost": {"gpu": 10}},
        {"id": "b", "memory": 2, "cost": {"gpu": 1}, "inputs": ["a"]},
        {"id": "c", "memory": 1, "cost": {"gpu": 1}, "inputs": ["b"]},
        {"id": "d", "memory": 1, "cost": {"gpu": 1}, "inputs": ["c", "a"]},
    ],
}
SCHEDULE = {
    "format": "remat-schedule",
    "version": 1,
    "graph": "offload chain",
    "budgets": {},
    "stages": [
        {"ops": [{"node": "a", "device": "gpu"}], "keep": {"gpu": ["a"]}},
        {
            "ops": [{"node": "b", "device": "gpu"}],
            "keep": {"gpu": ["b"], "cpu": [{"id": "a", "from": "gpu"}]},
        },
        {
            "ops": [{"node": "c", "device": "gpu"}],
            "keep": {"gpu": ["c", {"id": "a", "from": "cpu"}]},
        },
        {"ops": [{"node": "d", "device": "gpu"}], "keep": {}},
    ],
}


@pytest.fixture
def chain_document() -> Document:
    graph = graph_from_dict(CHAIN)
    schedule = schedule_from_dict(SCHEDULE, graph)
    timeline = simulate(graph, schedule, strict=True)
    doc = Document()
    doc.set_graph(graph)
    doc.set_result(SolveResult("hand", SolveStatus.FEASIBLE, schedule, timeline, 15.0))
    return doc


def _bars(view, layer: str) -> list[tuple[float, float]]:
    opts = view.gantt.layer(layer).opts
    return sorted(
        zip(np.asarray(opts["x0"]).tolist(), np.asarray(opts["width"]).tolist(), strict=True)
    )


def test_concurrent_toggle_redraws_gantt_and_memory(chain_document, show, qtbot):
    document = chain_document
    view = show(ScheduleView(document), 1200, 700)
    ops = [(op.node, op.start, op.end) for op in view.gantt.timeline().ops]
    assert ops == [("a", 0, 10), ("b", 10, 11), ("c", 12, 13), ("d", 14, 15)]
    view.concurrent_action.trigger()
    qtbot.waitUntil(lambda: view.gantt.timeline() is not document.timeline)
    drawn = view.gantt.timeline()
    # by hand: the copy out (10-11) runs beside b; the copy back waits for b's release (12)
    ops = [(op.node, op.start, op.end) for op in drawn.ops]
    assert ops == [("a", 0, 10), ("b", 10, 11), ("c", 11, 12), ("d", 13, 14)]
    assert view.memory.timeline() is drawn
    layout = concurrent_layout(document.graph, document.result.schedule, document.timeline)
    gpu = layout.timeline.memory["gpu"]
    np.testing.assert_array_equal(view.memory.curve("gpu").xData, [*gpu.times, 14.0])
    # the x extent is the makespan (14 ms), not the serial sum (15 ms)
    assert timeline_end(drawn) == 14.0
    x_max = view.gantt.plot.getViewBox().state["limits"]["xLimits"][1]
    assert x_max == pytest.approx(14.0 * 1.02)
    view.concurrent_action.trigger()
    qtbot.waitUntil(lambda: view.gantt.timeline() is document.timeline)
    assert view.memory.timeline() is document.timeline


def test_makespan_label_shows_serial_and_concurrent(chain_document, show):
    view = show(ScheduleView(chain_document), 1200, 700)
    assert view.makespan_label.text().startswith("<b>serial 15 ms</b> · concurrent 14 ms (1.07×")
    view.concurrent_box.setChecked(True)  # the check box drives the action
    assert view.concurrent_action.isChecked()
    assert view.makespan_label.text().startswith("serial 15 ms · <b>concurrent 14 ms</b>")
    view.concurrent_action.setChecked(False)  # and follows it (View menu)
    assert not view.concurrent_box.isChecked()


def test_concurrent_toggle_is_in_the_view_menu(make_window):
    window = make_window("chain")
    view = window.schedule_tabs.widget(0)
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert view.concurrent_action in menu.actions()


def test_offloading_copies_drawn_in_their_own_layer(chain_document, show):
    view = show(ScheduleView(chain_document), 1200, 700)
    assert _bars(view, "offload") == [(11.0, 1.0), (13.0, 1.0)]
    assert _bars(view, "transfer") == []
    assert "offload (kept)" in view.gantt._legend.text()
    view.concurrent_action.setChecked(True)
    assert _bars(view, "offload") == [(10.0, 1.0), (12.0, 1.0)]
    assert "concurrent 14 ms" in view.makespan_label.text()


def test_offloaded_tensor_band_in_the_memory_view(chain_document, show):
    view = show(ScheduleView(chain_document), 1200, 700)
    band = view.memory.offloaded_curve("cpu")
    curve = view.memory.curve("cpu")
    np.testing.assert_array_equal(band.xData, curve.xData)
    # a (1 byte) is on the host from its copy's start (11 ms) until the stage-2 release
    assert band.yData.max() * view.memory.unit("cpu")[1] == 1
    times = chain_document.timeline.memory["cpu"].times
    held = dict(
        zip(times.tolist(), (band.yData * view.memory.unit("cpu")[1]).tolist(), strict=True)
    )
    assert held[11.0] == 1 and held[0.0] == 0
    # on the GPU, a is offloaded (copied back) from 13 ms until d's end
    gpu = view.memory.offloaded_curve("gpu")
    gpu_times = chain_document.timeline.memory["gpu"].times.tolist()
    scale = view.memory.unit("gpu")[1]
    assert gpu.yData[gpu_times.index(13.0)] * scale == 1
    assert gpu.yData[gpu_times.index(0.0)] == 0


def test_memory_per_tensor_marks_offloaded_copies(chain_document):
    from app.views.tensors import ORIGINS, resident_reason, tensor_bands

    graph, timeline = chain_document.graph, chain_document.timeline
    cpu = tensor_bands(graph, timeline, "cpu")
    assert [ORIGINS[o] for o in cpu.origin] == ["offloaded here (kept)"]
    gpu = tensor_bands(graph, timeline, "gpu")
    a = graph.index["a"]
    origins = sorted({ORIGINS[o] for o, k in zip(gpu.origin, gpu.node, strict=True) if k == a})
    assert origins == ["computed", "offloaded here (kept)"]
    reason = resident_reason(graph, timeline, "cpu", "a", 11.5)
    assert reason == "offloaded to gpu (kept there) at 13 ms"


def test_provisional_results_get_the_concurrent_figure_when_the_solve_ends(chain_document, show):
    view = show(ScheduleView(chain_document), 1200, 700)
    result = chain_document.result
    chain_document.set_result(result, provisional=True)
    assert view.makespan_label.text() == "<b>serial 15 ms</b> · concurrent: when the solve ends"
    chain_document.set_result(result)
    assert view.makespan_label.text().startswith("<b>serial 15 ms</b> · concurrent 14 ms")


def test_big_schedule_label_layout_is_made_off_the_gui_thread(
    qtbot, chain_document, show, monkeypatch
):
    """A finished 5,000-operation solve spent 0.1 s of the GUI thread laying the schedule out
    for this label (issue 20); a big schedule's layout is made in a child process."""
    import app.views.concurrent_job as concurrent_job
    import app.views.concurrent_source as concurrent_source
    import app.views.schedule_view as schedule_view
    from app.workers import ProcessWorker

    here = []  # layouts made in this process (the child has the real one)
    for module in (concurrent_source, concurrent_job):
        monkeypatch.setattr(module, "concurrent_layout", lambda *a: here.append(a), raising=False)
    monkeypatch.setattr(schedule_view, "BACKGROUND_LAYOUT_EVENTS", 0, raising=False)  # big
    view = show(ScheduleView(chain_document), 1200, 700)
    assert view.makespan_label.text() == "<b>serial 15 ms</b> · concurrent: computing\u2026"
    qtbot.waitUntil(lambda: "concurrent 14 ms" in view.makespan_label.text(), timeout=10_000)
    assert view.makespan_label.text().startswith("<b>serial 15 ms</b> · concurrent 14 ms (1.07×")
    assert here == []
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=5_000)
    result = chain_document.result
    chain_document.set_result(result, provisional=True)  # the next solve's incumbent
    chain_document.set_result(result)  # and its end: the figures are known, shown at once
    assert view.makespan_label.text().startswith("<b>serial 15 ms</b> · concurrent 14 ms")
    assert not ProcessWorker.running()
