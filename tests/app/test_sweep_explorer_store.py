"""The window and the explorer with the result store: stored schedules at once, parallel points."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtWidgets import QLabel

from app.document import Document
from app.project import SolverSettings
from app.solving import SolveController
from app.store_lookup import StoreWriter, current_store, remember_result
from app.views.explorer import ExplorerView
from app.workers import ProcessWorker
from solver.document.generators import unit_chain
from solver.optimize.methods import solve
from solver.optimize.solve import SolveOptions
from solver.status import SolveStatus

WRITER = StoreWriter()
"""The tests' own writer (the window's is drained when it closes)."""

SETTINGS = SolverSettings(time_limit_s=20)
OPTIONS = SolveOptions(time_limit_s=20)


@pytest.fixture
def view(qtbot, document, show):
    widget = show(ExplorerView(document, options=OPTIONS), 900, 500)
    yield widget
    widget.cancel()
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=30_000)


def test_repeated_explorer_sweep_comes_from_the_store(qtbot, view):
    with qtbot.waitSignal(view.sweep_finished, timeout=60_000) as first:
        view.run("gpu", 2)
    solved = first.args[0]
    assert solved and not any(p.from_store for p in solved)
    assert len(current_store().rows()) == len(solved)  # each child stored its point
    with qtbot.waitSignal(view.sweep_finished, timeout=5_000) as again:
        view.run("gpu", 2)
    stored = again.args[0]
    assert all(p.from_store for p in stored)
    assert [(p.method, p.activation_budget, p.total_ms) for p in stored] == [
        (p.method, p.activation_budget, p.total_ms) for p in solved
    ]
    assert not ProcessWorker.running()  # nothing was solved the second time
    texts = [label.text() for label in view.findChildren(QLabel)]
    assert f"Done: {len(stored)} solves ({len(stored)} from the result store)" in "".join(texts)


@pytest.fixture
def controller(qtbot):
    document = Document()
    document.set_settings(SETTINGS)
    controller = SolveController(document)
    yield controller
    controller.shutdown(30_000)


def test_reopened_graph_shows_its_stored_schedule_at_once(qtbot, controller):
    graph = unit_chain(3, budget=3)  # Checkmate: 10 ms at budget 3 (by hand)
    remember_result(graph, "xengine", OPTIONS, solve(graph, "xengine", OPTIONS), WRITER).result()
    document = controller._document
    with qtbot.waitSignal(controller.notice, timeout=5_000) as notice:
        document.open(graph, settings=SETTINGS)
    assert notice.args[0] == "Result from the result store (row 1)"
    assert document.result.status is SolveStatus.OPTIMAL
    assert document.result.timeline.total_ms == 10.0
    assert document.cached_result() is document.result  # auto-solve will not run again
    assert not controller.is_running


def test_stored_result_from_a_shorter_limit_is_shown_but_not_taken(qtbot, controller):
    graph = unit_chain(3, budget=3)
    short = SolveOptions(time_limit_s=1)
    result = replace(solve(graph, "xengine", short), status=SolveStatus.FEASIBLE)
    remember_result(graph, "xengine", short, result, WRITER).result()
    document = controller._document
    with qtbot.waitSignal(controller.notice, timeout=5_000) as notice:
        document.open(graph.with_memory_limits({"cpu": 4}), settings=SETTINGS)
        document.set_memory_limits({"cpu": 3})  # a slider dragged onto the stored budget
    assert notice.args[0] == (
        "Shown: stored result (row 1) came from a 1 s time limit, shorter than the 20 s "
        "asked; solve again for the full limit"
    )
    assert document.result.status is SolveStatus.FEASIBLE
    assert document.cached_result() is None  # so auto-solve / Solve still runs


def test_window_owns_and_drains_its_store_writer(make_window, monkeypatch):
    """The store's writer was a module-level pool that the window neither owned nor drained
    (issue 21): a write pending at close could be cut off."""
    window = make_window("chain")
    drained = []
    real = window.store_writer.drain
    monkeypatch.setattr(window.store_writer, "drain", lambda *a: drained.append(a) or real(*a))
    assert window.controller.store_writer is window.store_writer
    window.document.undo_stack.setClean()
    window.close()
    assert drained
