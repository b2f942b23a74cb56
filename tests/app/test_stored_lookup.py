"""The result-store lookup runs in a child process: the GUI thread never replays a stored
schedule (0.4 s on a 5,000-operation graph, issue 20), and a late answer for a setting that
is gone is dropped."""

from __future__ import annotations

import time

import pytest
from PySide6.QtWidgets import QApplication

from app.document import Document
from app.project import SolverSettings
from app.solving import SolveController
from app.store_lookup import StoreWriter, remember_result
from solver.document.generators import unit_chain
from solver.optimize.methods import solve
from solver.optimize.solve import SolveOptions
from solver.results.store import ResultStore
from solver.status import SolveStatus

WRITER = StoreWriter()
SETTINGS = SolverSettings(time_limit_s=20)
OPTIONS = SolveOptions(time_limit_s=20)


@pytest.fixture
def controller(qtbot):
    document = Document()
    document.set_settings(SETTINGS)
    controller = SolveController(document)
    yield controller
    controller.shutdown(30_000)


@pytest.fixture
def slow_lookups(monkeypatch):
    """Every lookup made in this (the GUI) process takes 0.5 s more, and is recorded; the
    child process of a background lookup has the real one."""
    calls: list[float] = []
    real = ResultStore.lookup

    def slow(self, *args):
        calls.append(time.perf_counter())
        time.sleep(0.5)
        return real(self, *args)

    monkeypatch.setattr(ResultStore, "lookup", slow)
    return calls


def test_stored_result_is_looked_up_off_the_gui_thread(qtbot, controller, slow_lookups):
    graph = unit_chain(3, budget=3)
    remember_result(graph, "xengine", OPTIONS, solve(graph, "xengine", OPTIONS), WRITER).result()
    document = controller._document
    started = time.perf_counter()
    document.open(graph, settings=SETTINGS)
    QApplication.processEvents()  # the settled-graph handler runs (a zero-delay timer)
    QApplication.processEvents()
    assert time.perf_counter() - started < 0.3  # it did not wait for the lookup
    assert controller.looking_up
    with qtbot.waitSignal(controller.notice, timeout=10_000) as notice:
        pass
    assert notice.args[0] == "Result from the result store (row 1)"  # the text is unchanged
    assert document.result.status is SolveStatus.OPTIMAL
    assert document.result.timeline.total_ms == 10.0
    assert document.cached_result() is document.result  # auto-solve will not run again
    assert not slow_lookups  # nothing was looked up (nor replayed) on the GUI thread
    qtbot.waitUntil(lambda: not controller.looking_up, timeout=5_000)


def test_answer_for_a_setting_that_changed_meanwhile_is_dropped(qtbot, controller):
    graph = unit_chain(3, budget=3)
    remember_result(graph, "xengine", OPTIONS, solve(graph, "xengine", OPTIONS), WRITER).result()
    document = controller._document
    notices: list[str] = []
    controller.notice.connect(notices.append)
    document.open(graph.with_memory_limits({"cpu": 4}), settings=SETTINGS)
    document.set_memory_limits({"cpu": 3})  # the stored budget: a lookup starts...
    document.set_memory_limits({"cpu": 5})  # ...and the slider moves on before it answers
    qtbot.waitUntil(lambda: not controller.looking_up, timeout=10_000)
    assert notices == []  # the answer for cpu 3 came for a setting no longer on display
    assert document.result is None
    document.set_memory_limits({"cpu": 3})  # back on the stored budget: now it is shown
    with qtbot.waitSignal(controller.notice, timeout=10_000) as notice:
        pass
    assert notice.args[0] == "Result from the result store (row 1)"
    assert document.result.timeline.total_ms == 10.0


def test_auto_solve_waits_for_the_lookup(qtbot, controller):
    """Auto-solve's delay may end before the child answers: a stored final answer still
    means no solve."""
    graph = unit_chain(3, budget=3)
    remember_result(graph, "xengine", OPTIONS, solve(graph, "xengine", OPTIONS), WRITER).result()
    controller._auto_timer.setInterval(1)  # its delay ends long before the child answers
    document = controller._document
    auto = SolverSettings(time_limit_s=20, auto_solve=True)
    document.open(graph.with_memory_limits({"cpu": 4}), settings=auto)
    qtbot.waitUntil(lambda: not controller.looking_up, timeout=10_000)
    started: list[object] = []
    controller.started.connect(started.append)
    with qtbot.waitSignal(controller.notice, timeout=10_000):
        document.set_memory_limits({"cpu": 3})
    qtbot.wait(100)
    assert started == []
    assert document.result.timeline.total_ms == 10.0


def test_finished_solve_is_stored_after_it_is_drawn_or_at_close(qtbot, controller, monkeypatch):
    """Serializing a 5,000-op schedule on the writer's thread took the GIL from the GUI thread
    while the final result was drawn (issue 20): it is handed over a moment later, and a close
    hands it over at once (the window then drains the writer)."""
    from types import SimpleNamespace

    import app.solving as solving
    from app.workers import SolveRequest

    stored: list[object] = []
    monkeypatch.setattr(solving, "remember_result", lambda *a: stored.append(a[3]))
    graph = unit_chain(3, budget=3)
    result = solve(graph, "xengine", OPTIONS)
    worker = SimpleNamespace(request=SolveRequest(1, graph, "xengine", OPTIONS, key=None))
    controller._on_worker_finished(worker, result)
    assert stored == []  # not while the final result is being drawn
    qtbot.waitUntil(lambda: stored == [result], timeout=5_000)
    controller._on_worker_finished(worker, result)
    controller.shutdown(30_000)
    assert stored == [result, result]  # the window's close: stored before the writer drains
