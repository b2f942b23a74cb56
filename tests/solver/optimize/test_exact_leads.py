"""When the exact search's bound leads CBC's and CBC's has stopped rising, CBC's core goes to
the search (solver/optimize/exact_beside.py, ``_Leading``)."""

from __future__ import annotations

import threading
import time

import pytest

from solver.cli import parse_budget
from solver.document.random_graphs import random_layered
from solver.execution.simulate import check_schedule
from solver.optimize import exact_beside
from solver.optimize import solve as solve_module
from solver.optimize.backends import BackendResult
from solver.optimize.best_search import BestSearcher
from solver.optimize.construct import construct_best
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.status import Progress, SolveStatus


class _Best:
    """The incumbents as the watch sees them: a cost, the backend's bound, notes."""

    backend = "CBC"

    def __init__(self, cost: float, backend_bound: float | None) -> None:
        self.cost, self.bound = cost, backend_bound
        self.outpaced = threading.Event()
        self.notes: list[str] = []

    def backend_bound(self) -> float | None:
        return self.bound

    def note(self, line: str) -> None:
        self.notes.append(line)


@pytest.mark.parametrize(
    ("backend_then", "backend_now", "pace", "expected"),
    [
        (90.0, 90.0, 1.0, True),  # leads 90 by 6 of 10, CBC still, 10 s at 1/s reach 106
        (89.9, 90.0, 1.0, True),  # CBC's bound creeps: 10 s at 0.05/s reach 90.5, not 100
        (86.0, 90.0, 1.0, False),  # CBC's rises 2/s: in 10 s it proves 100 itself
        (93.0, 93.0, 1.0, False),  # leads by 3 of 7 only: not the solve's clear best prover
        (90.0, 90.0, 0.2, False),  # 10 s at 0.2/s reach 98: the search would not prove it
        (None, None, 1.0, False),  # CBC has no bound yet (its root: the handover's business)
    ],
)
def test_a_search_far_ahead_of_a_stalled_cbc_takes_its_core(
    backend_then: float | None, backend_now: float | None, pace: float, expected: bool
) -> None:
    look = exact_beside.TRAILING_LOOK_S
    clock = [1000.0]
    best = _Best(100.0, backend_then)
    deadline = 1000.0 + look + 10.0  # 10 s left at the second look
    leading = exact_beside._Leading(best, deadline, lambda: clock[0])  # type: ignore[arg-type]
    leading.heard(96.0 - pace * look)  # the first look only measures the pace from here
    clock[0] += look / 2
    leading.heard(96.0 - pace * look / 2)
    assert not best.outpaced.is_set()  # too soon for another look
    clock[0] += look / 2
    best.bound = backend_now
    leading.heard(96.0)
    assert best.outpaced.is_set() is expected
    assert bool(best.notes) is expected
    if expected:
        assert "its bound 96 ms leads CBC's 90, which would not reach" in best.notes[0]


def _idle_backend(calls: list[str], bound: float):
    """CBC stood in for by a backend that reports one bound, then idles until stopped."""

    def run(program, options, on_progress, cancel, start=None, on_solution=None):
        on_progress(Progress(0.0, None, bound, None, "root LP"))
        while not cancel.is_set():
            time.sleep(0.01)
        calls.append("stopped")
        return BackendResult(SolveStatus.CANCELLED, None, None, None, 0.1, False, "stopped")

    return run


def test_a_solve_stops_cbc_and_waits_for_the_search_to_prove(monkeypatch):
    # A 60-node random layered graph at 0.8 of its peak on which the exact search alone needs
    # about 100,000 states (3-4 s) to prove that nothing beats the construction. CBC's
    # stand-in reports a bound of half the plain cost and no more; the search looks every
    # 0.05 s. CBC must be stopped by the watch (no cancel, no time limit), the solve must wait
    # for the search, and its answer is the search's optimum, found by the search alone here.
    graph = random_layered(60, seed=2)
    name, budget = parse_budget(graph, f"{graph.devices[0].name}=80%")
    graph = graph.with_memory_limits({name: budget})
    built = construct_best(graph)
    assert built.timeline is not None
    alone = BestSearcher(graph).run(time.monotonic() + 60, None, None, lambda: None)
    assert alone.proven and alone.cost is not None
    optimum = alone.cost

    calls: list[str] = []
    monkeypatch.setattr(solve_module, "run_backend", _idle_backend(calls, optimum / 2))
    monkeypatch.setattr(solve_module, "relaxation_bound", lambda *_a, **_k: None)
    monkeypatch.setattr(exact_beside, "TRAILING_LOOK_S", 0.05)
    lines: list[str] = []
    options = SolveOptions(time_limit_s=120, improve=False)  # CBC and the search alone
    started = time.monotonic()
    result = solve_xengine(graph, options, on_progress=lambda p: lines.append(p.log_line or ""))
    assert time.monotonic() - started < 60  # the proof ended it, not the time limit
    assert calls == ["stopped"]
    assert any("CBC stops and its core goes to the search" in line for line in lines)
    # said only when CBC stopped before the proof (a proof stops it as well, silently)
    stopped = "the exact search's bound led its own, which rose too slowly to prove"
    assert any(stopped in line for line in lines) and stopped in result.message
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(optimum)
    assert check_schedule(graph, result.schedule).total_ms == pytest.approx(optimum)
