"""Live and stale states: incumbents drawn as provisional during a solve, and nothing from the
last graph left on screen after opening another one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtWidgets import QApplication

import app.solve_process as solve_process
from app.solve_process import ProvisionalSchedule, solve_reporting_incumbents
from app.workers import ProcessWorker
from solver.optimize.solve import SolveOptions, SolveResult
from solver.status import Progress, SolveStatus


def test_solve_reporting_incumbents_replays_each_announced_schedule(
    monkeypatch, graph, handbuilt_result
):
    """The child turns ``Progress.schedule`` into a replayed :class:`ProvisionalSchedule`."""
    schedule = handbuilt_result.schedule

    def fake_solve(graph_, method, options, on_progress, cancel):
        on_progress(Progress(0.5, incumbent=12.0, log_line="first"))
        on_progress(Progress(1.0, incumbent=11.0, schedule=schedule))
        return handbuilt_result

    monkeypatch.setattr(solve_process, "solve", fake_solve)
    items: list = []
    result = solve_reporting_incumbents(graph, "xengine", SolveOptions(), items.append)
    assert result is handbuilt_result
    first, announced, provisional = items
    assert first.log_line == "first" and first.schedule is None
    assert announced == Progress(1.0, incumbent=11.0)  # sent without its schedule
    assert isinstance(provisional, ProvisionalSchedule)
    assert provisional.schedule is schedule and provisional.objective == 11.0
    assert provisional.timeline.valid and provisional.timeline.total_ms == pytest.approx(11.0)


@pytest.fixture
def held_solve(monkeypatch, make_window):
    """A window whose Solve starts a worker that never runs: the test plays its signals."""
    monkeypatch.setattr(ProcessWorker, "start", lambda self, pool=None: None)
    window = make_window(None)
    return window


def _provisional(result: SolveResult, elapsed: float = 2.5) -> ProvisionalSchedule:
    return ProvisionalSchedule(elapsed, result.objective, result.schedule, result.timeline)


def test_window_draws_each_incumbent_as_provisional(qtbot, held_solve, graph, handbuilt_result):
    window = held_solve
    doc = window.document
    doc.open(graph)
    request = window.controller.solve()
    worker = window.controller.current_worker
    assert request is not None and doc.result is None
    gantt = window.schedule_tabs.widget(0).gantt

    with qtbot.waitSignal(doc.result_changed, timeout=2_000):
        worker.signals.progress.emit(Progress(2.4, incumbent=11.0))
        worker.signals.progress.emit(_provisional(handbuilt_result))
    assert doc.is_provisional and doc.result.timeline is handbuilt_result.timeline
    assert doc.result.seconds == 2.5 and doc.result.objective == 11.0
    assert "provisional" in gantt.summary_text and "still solving" in gantt.summary_text
    assert gantt.layer("forward").opts["x0"].size > 0  # the bars are drawn
    assert "provisional" in window.result_label.text()
    assert doc.cached_result() is None  # an incumbent is never cached as an answer

    final = replace(handbuilt_result, status=SolveStatus.OPTIMAL, seconds=3.0)
    with qtbot.waitSignal(window.controller.finished, timeout=2_000):
        worker.signals.finished.emit(final)
    assert doc.result is final and not doc.is_provisional
    assert "provisional" not in gantt.summary_text
    assert "optimal" in window.result_label.text()


def test_window_drops_an_unconfirmed_incumbent_when_the_solve_fails(
    qtbot, held_solve, graph, handbuilt_result
):
    window = held_solve
    doc = window.document
    doc.open(graph)
    window.controller.solve()
    worker = window.controller.current_worker
    with qtbot.waitSignal(doc.result_changed, timeout=2_000):
        worker.signals.progress.emit(_provisional(handbuilt_result))
    assert doc.is_provisional
    with qtbot.waitSignal(window.controller.failed, timeout=2_000):
        worker.signals.failed.emit("the solver process ended")
    assert doc.result is None and not doc.is_provisional


def test_window_keeps_drawing_incumbents_after_a_slider_drag(
    qtbot, held_solve, graph, handbuilt_result
):
    """After a mid-solve slider drag the drawing froze on the last incumbent, still labelled
    "still solving" (issue 20): the solve's incumbents go on being drawn, marked as solved for
    the limits it started with."""
    window = held_solve
    doc = window.document
    doc.open(graph)
    window.controller.solve()
    worker = window.controller.current_worker
    doc.set_memory_limits(
        {"gpu": doc.memory_limits["gpu"] + 1}
    )  # the user moved on; the solve goes on
    with qtbot.waitSignal(doc.result_changed, timeout=2_000):
        worker.signals.progress.emit(_provisional(handbuilt_result))
    assert doc.is_provisional and doc.result.timeline is handbuilt_result.timeline
    gantt = window.schedule_tabs.widget(0).gantt
    assert "other memory limits" in gantt.summary_text
    later = _provisional(replace(handbuilt_result, objective=10.5), elapsed=4.0)
    with qtbot.waitSignal(doc.result_changed, timeout=2_000):
        worker.signals.progress.emit(later)
    assert doc.result.seconds == 4.0  # not frozen on the first


def test_window_ignores_an_incumbent_over_an_answer_for_the_new_limits(
    qtbot, held_solve, graph, handbuilt_result
):
    window = held_solve
    doc = window.document
    doc.open(graph)
    window.controller.solve()
    worker = window.controller.current_worker
    doc.set_memory_limits({"gpu": doc.memory_limits["gpu"] + 1})
    answer = replace(handbuilt_result, status=SolveStatus.OPTIMAL)
    doc.set_result(answer)  # e.g. cached for the new limits
    worker.signals.progress.emit(_provisional(handbuilt_result))
    worker.signals.progress.emit(Progress(2.6, incumbent=11.0))
    with qtbot.waitSignal(window.controller.progressed, timeout=2_000):
        pass
    assert doc.result is answer and not doc.is_provisional


def test_window_without_incumbent_schedules_still_reports_progress(
    qtbot, held_solve, graph, handbuilt_result
):
    """A backend that announces no schedule: the curve moves, the final result is drawn."""
    window = held_solve
    doc = window.document
    doc.open(graph)
    window.controller.solve()
    worker = window.controller.current_worker
    with qtbot.waitSignal(window.controller.progressed, timeout=2_000):
        worker.signals.progress.emit(Progress(1.0, incumbent=12.0, bound=9.0, gap=0.25))
    assert doc.result is None and window.solver_panel.curve_points == 1
    with qtbot.waitSignal(window.controller.finished, timeout=2_000):
        worker.signals.finished.emit(handbuilt_result)
    assert doc.result is handbuilt_result and not doc.is_provisional


def test_window_new_graph_clears_the_live_plot_and_log(qtbot, held_solve, graph, handbuilt_result):
    window = held_solve
    panel = window.solver_panel
    window.document.open(graph)
    window.controller.solve()
    worker = window.controller.current_worker
    with qtbot.waitSignal(window.controller.progressed, timeout=2_000):
        worker.signals.progress.emit(Progress(1.0, incumbent=12.0, log_line="Cbc0010I ..."))
    with qtbot.waitSignal(window.controller.finished, timeout=2_000):
        worker.signals.finished.emit(handbuilt_result)
    # the report and the result's end (the curves run to the end of the solve)
    qtbot.waitUntil(lambda: panel.curve_points == 2, timeout=2_000)
    assert "Cbc0010I" in panel.log.toPlainText()
    assert panel.incumbent_curve.xData.size == 2

    assert window.open_example("chain")
    assert panel.curve_points == 0 and panel.log.toPlainText() == ""
    assert panel.incumbent_curve.xData is None or panel.incumbent_curve.xData.size == 0


def test_window_live_plot_axes_read_plain_units(make_window):
    plot = make_window("chain").solver_panel.plot.getPlotItem()
    for side, text in (("bottom", "solve time (s)"), ("left", "ms")):
        axis = plot.getAxis(side)
        axis.setScale(1.0)
        axis.updateAutoSIPrefix()
        assert axis.labelString().count("x0.001") == 0
        assert text in axis.labelString()


def test_window_fresh_comparison_does_not_claim_the_graph_changed(make_window):
    window = make_window("chain")
    comparison = next(
        window.schedule_tabs.widget(i)
        for i in range(window.schedule_tabs.count())
        if window.schedule_tabs.tabText(i) == "Comparison"
    )
    assert "changed" not in comparison.status_text
    assert "Compare methods" in comparison.status_text


def test_window_real_solve_draws_its_incumbent_before_it_ends(qtbot, make_window, loop_probe):
    """End to end: the solver announces incumbents in the child, the window draws them, and
    the event loop keeps ticking. The timing is retried (up to three solves) when other
    processes on the two shared cores skew it, as the core's profiling test does."""
    from app.project import SolverSettings
    from solver.document.generators import unit_chain

    window = make_window(None)
    doc = window.document
    probes = []
    for _ in range(3):
        doc.open(unit_chain(30, budget=7))  # the warm start is an incumbent at once
        doc.set_settings(SolverSettings(time_limit_s=600))
        for _ in range(3):  # lay out and paint the new graph: its first paint is not the solve's
            QApplication.processEvents()
        probe = loop_probe()
        try:
            window.window_actions.solve.trigger()
            qtbot.waitUntil(lambda: doc.is_provisional, timeout=60_000)
            shown = doc.result
            assert shown.ok and window.controller.is_running
            assert "provisional" in window.schedule_tabs.widget(0).gantt.summary_text
            with qtbot.waitSignal(window.controller.finished, timeout=30_000) as blocker:
                window.window_actions.cancel.trigger()
        finally:
            probe.stop()
        final = blocker.args[0]
        assert doc.result is final and not doc.is_provisional
        assert final.objective <= shown.objective + 1e-9  # the answer is never worse than shown
        probes.append(probe)
        if probe.max_cpu < 0.1 and probe.max_gap < 0.3:
            break
    # Regression guards: the GUI's own work between two ticks (a full redraw ~30 ms here) and
    # the wall-clock gap, which also counts waiting for one of two shared cores. The 50 ms
    # target is measured on the real window: bench/draw.py --stall vgg16.
    best = min(probes, key=lambda p: p.max_gap)
    assert best.max_cpu < 0.1, str(best)
    assert best.max_gap < 0.3, str(best)
