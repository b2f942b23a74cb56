"""When CBC's root LP stalls, CP-SAT takes both cores (solver/optimize/handover.py)."""

from __future__ import annotations

import threading
import time

import pytest
from test_scale import needs_cpsat

from solver.document.generators import unit_chain
from solver.execution.simulate import check_schedule
from solver.optimize import solve as solve_module
from solver.optimize.backends import BackendResult
from solver.optimize.handover import RootWatch, root_wait_s
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.status import Progress, SolveStatus


def _watch(wait_s: float) -> tuple[RootWatch, threading.Event]:
    done = threading.Event()
    watch = RootWatch(wait_s, done)
    watch.start()
    return watch, done


def _line(bound: float | None = None) -> Progress:
    return Progress(0.0, None, bound, None, "a log line")


def test_a_backend_without_a_bound_in_time_is_stalled():
    watch, _ = _watch(0.2)
    report = watch.progress(None)
    time.sleep(0.4)
    assert not watch.stalled.is_set()  # the clock starts at the backend's first line
    report(_line())
    assert watch.stalled.wait(2.0)


def test_a_bound_in_time_keeps_the_backend():
    watch, _ = _watch(0.3)
    seen: list[Progress] = []
    report = watch.progress(seen.append)
    report(_line())
    report(_line(bound=9.5))
    time.sleep(0.6)
    assert not watch.stalled.is_set()
    assert [p.bound for p in seen] == [None, 9.5]  # passed on as they came


def test_a_finished_backend_is_never_stalled():
    watch, done = _watch(0.2)
    watch.progress(None)(_line())
    done.set()
    time.sleep(0.5)
    assert not watch.stalled.is_set()


def test_the_wait_grows_with_the_time_limit_up_to_half_a_minute():
    assert root_wait_s(10) == 6.0
    assert root_wait_s(60) == 15.0
    assert root_wait_s(120) == 30.0
    assert root_wait_s(300) == 30.0  # not 75 s of a stalled root in a five-minute solve


def _stalling_backend(calls: list[str]):
    """A backend that prints one line without a bound, then runs until it is stopped."""

    def run(program, options, on_progress, cancel, start=None, on_solution=None):
        on_progress(Progress(0.0, None, None, None, "Welcome to the CBC MILP Solver"))
        while not cancel.is_set():
            time.sleep(0.01)
        calls.append("stopped")
        return BackendResult(SolveStatus.CANCELLED, None, None, None, 0.1, False, "stopped")

    return run


@pytest.fixture
def stalling(monkeypatch) -> list[str]:
    """CBC replaced by a stand-in that never roots (its stops are recorded in the list), and
    no first phase of CP-SAT: the solve goes straight to CBC with CP-SAT beside it."""
    calls: list[str] = []
    monkeypatch.setattr(solve_module, "run_backend", _stalling_backend(calls))
    monkeypatch.setattr(solve_module, "INTERVALS_FIRST_CAP_S", 0.0)
    return calls


@needs_cpsat
def test_a_stalled_cbc_hands_both_cores_to_cpsat(stalling, monkeypatch, no_exact_search):
    # CBC may wait 0.2 s for its root LP, and no relaxation is there to close the solve
    # early. The unit chain of 8 layers at budget 4 costs 26 at best (test_more_runs.py):
    # the answer must be that, found by CP-SAT after the handover, which the log says.
    calls = stalling
    monkeypatch.setattr(solve_module, "root_wait_s", lambda _limit: 0.2)
    monkeypatch.setattr(solve_module, "relaxation_bound", lambda *_a, **_k: None)
    graph = unit_chain(8, budget=4)
    lines: list[str] = []
    options = SolveOptions(time_limit_s=20)
    result = solve_xengine(graph, options, on_progress=lambda p: lines.append(p.log_line or ""))
    assert calls == ["stopped"]  # by the watch: the user did not cancel
    why = "CBC had not solved its root LP 0 s after it started; CP-SAT took both cores"
    assert why in lines
    assert result.ok and result.objective == pytest.approx(26.0)
    assert check_schedule(graph, result.schedule).total_ms == pytest.approx(26.0)
    assert result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    if result.status is SolveStatus.FEASIBLE:
        assert why in result.message


@needs_cpsat
def test_a_user_cancel_is_not_a_stall(stalling, monkeypatch, no_exact_search):
    # The user cancels while CBC has no bound: the solve ends cancelled, no handover.
    calls = stalling
    monkeypatch.setattr(solve_module, "root_wait_s", lambda _limit: 60.0)
    graph = unit_chain(8, budget=4)
    cancel = threading.Event()
    lines: list[str] = []

    def progress(p: Progress) -> None:
        lines.append(p.log_line or "")
        if p.log_line == "Welcome to the CBC MILP Solver":
            cancel.set()

    result = solve_xengine(graph, SolveOptions(time_limit_s=30), progress, cancel)
    assert calls == ["stopped"]
    assert result.status is SolveStatus.CANCELLED
    assert not any("took both cores" in line for line in lines)
