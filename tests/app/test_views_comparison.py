"""Comparison view: every method solved in the background; rows, speedups and selection."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication

from app.document import Document
from app.views.comparison import ComparisonView, default_methods
from app.workers import ProcessWorker
from solver.document.generators import unit_chain
from solver.optimize.solve import SolveOptions

GRAPHS = Path(__file__).resolve().parents[2] / "resources" / "graphs"


OPTIONS = SolveOptions(time_limit_s=20)


@pytest.fixture
def view(qtbot, document, show):
    widget = show(ComparisonView(document, options=OPTIONS), 900, 600)
    yield widget
    widget.cancel()
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=30_000)


@pytest.fixture
def compared(qtbot, view):
    with qtbot.waitSignal(view.comparison_finished, timeout=60_000) as blocker:
        view.run()
    return blocker.args[0]


def cell(view, row: int, column: str) -> str:
    from app.views.comparison import COLUMNS

    return view.table.item(row, COLUMNS.index(column)).text()


def test_comparison_lists_every_method_with_its_result(view, compared, document):
    methods = default_methods(document.graph)
    assert [r.method for r in compared.results] == methods
    assert view.table.rowCount() == len(methods) == 7
    assert cell(view, 6, "method") == "XEngine (all devices)"
    assert cell(view, 0, "method") == "Checkmate on cpu"
    assert cell(view, 6, "status") == "optimal"
    xengine = compared.results[-1]
    assert xengine.ok and xengine.timeline.total_ms == pytest.approx(
        float(cell(view, 6, "time")[:-3])
    )


def test_comparison_speedup_is_over_the_best_single_device(view, compared):
    best = compared.best_single_device
    xengine = compared.results[-1]
    expected = best.timeline.total_ms / xengine.timeline.total_ms
    assert cell(view, 6, "speedup") == f"{expected:.2f}×"
    assert {len({op.device for _, op in best.schedule.operations})} == {1}


def test_comparison_infeasible_rows_say_why(view, compared):
    infeasible = [j for j, r in enumerate(compared.results) if not r.ok]
    assert infeasible, "checkpoint-all cannot fit the 3 MiB GPU"
    for row in infeasible:
        assert cell(view, row, "status") == "infeasible"
        assert "the budget is 3145728" in cell(view, row, "note")  # the simulator's reason


def test_comparison_selecting_a_row_shows_that_schedule(view, compared, document):
    row = next(j for j, r in enumerate(compared.results) if r.ok and r.method != "xengine")
    view.table.selectRow(row)
    assert document.result is compared.results[row]


def test_comparison_cancel_stops_and_keeps_the_view_usable(qtbot, view):
    view.run()
    assert view.running
    view.cancel()
    assert not view.running
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=30_000)
    assert view.table.rowCount() == 7


def test_comparison_goes_stale_when_budgets_change(view, compared, document):
    document.set_memory_limits({"gpu": 4 * 2**20})
    assert view.table.rowCount() == 0


def test_comparison_never_stalls_the_event_loop(qtbot, make_window, loop_probe):
    window = make_window(None)
    assert window.open_file(str(GRAPHS / "skip.graph.json"))
    view = next(
        window.schedule_tabs.widget(j)
        for j in range(window.schedule_tabs.count())
        if isinstance(window.schedule_tabs.widget(j), ComparisonView)
    )
    window.schedule_tabs.setCurrentWidget(view)
    window.repaint()  # the first paint of the opened graph is not part of the comparison
    schedule = window.schedule_tabs.widget(0)
    schedule.gantt.flush()  # nor the schedule views' drawing of it, due in an event of its
    schedule.memory.flush()  # own (the memory plots' first build: 50-60 ms)
    probes = []
    for _ in range(3):
        for _ in range(3):  # nor the layout the opening left pending (the docks' fit: ~40 ms)
            QApplication.processEvents()
        probe = loop_probe()
        with qtbot.waitSignal(view.comparison_finished, timeout=60_000) as blocker:
            view.run()
        probe.stop()
        assert len(blocker.args[0].results) == len(default_methods(window.document.graph))
        probes.append(probe)
        if probe.max_cpu < 0.1 and probe.max_gap < 0.3:
            break
    # Regression guards, as for the solve (test_window_live): the GUI thread's own longest
    # piece of work, which the window controls (a redraw of table and chart: 10-50 ms here),
    # and the wall-clock gap, which also counts waiting for one of two shared cores. The best
    # of three runs is judged: one run's noise on a loaded machine is not the window's.
    best = min(probes, key=lambda p: p.max_gap)
    assert best.max_cpu < 0.1, str(best)
    assert best.max_gap < 0.3, str(best)


def test_comparison_cancel_stops_the_solver_process(qtbot):
    document = Document()
    document.set_graph(unit_chain(30, budget=7))  # XEngine would run for minutes
    view = ComparisonView(document, options=SolveOptions(time_limit_s=600))
    qtbot.addWidget(view)
    view.run(["checkpoint-all:cpu", "xengine"])
    qtbot.waitUntil(lambda: len(view.comparison.results) == 1, timeout=30_000)
    view.cancel()
    assert not view.running
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=30_000)
    assert [r.method for r in view.comparison.results] == ["checkpoint-all:cpu"]


def test_comparison_names_the_best_line_in_the_axis_title(view, compared):
    """The dashed line's own label ran into the first row's bar and value (issue 20)."""
    assert "dashed line: best single device" in view.axis_title
