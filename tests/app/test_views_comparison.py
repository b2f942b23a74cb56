"""Comparison view: every method solved in the background; rows, speedups and selection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.document import Document
from app.views.background import BackgroundTask
from app.views.comparison import ComparisonView, default_methods
from solver.formats import load_graph, load_schedule
from solver.simulate import simulate
from solver.solve import SolveOptions, SolveResult
from solver.status import SolveStatus

# before pytest-qt makes the QApplication (no display needed; xvfb-run can still override)
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def document():
    graph = load_graph(DATA / "handbuilt.graph.json")
    schedule = load_schedule(DATA / "handbuilt.schedule.json", graph)
    timeline = simulate(graph, schedule, strict=True)
    doc = Document()
    doc.set_graph(graph)
    doc.set_result(SolveResult("hand", SolveStatus.FEASIBLE, schedule, timeline, 11.0))
    return doc


OPTIONS = SolveOptions(time_limit_s=20)


@pytest.fixture
def view(qtbot, document):
    widget = ComparisonView(document, options=OPTIONS)
    qtbot.addWidget(widget)
    widget.resize(900, 600)
    widget.show()
    qtbot.waitExposed(widget)
    yield widget
    widget.cancel()
    qtbot.waitUntil(lambda: not BackgroundTask.running(), timeout=30_000)


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
    assert cell(view, 6, "method") == "XEngine · cpu+gpu"
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
    qtbot.waitUntil(lambda: not BackgroundTask.running(), timeout=30_000)
    assert view.table.rowCount() == 7


def test_comparison_goes_stale_when_budgets_change(view, compared, document):
    document.set_budgets({"gpu": 4 * 2**20})
    assert view.table.rowCount() == 0
