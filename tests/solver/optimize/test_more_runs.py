"""More runs per node once CP-SAT has proven its restricted optimum (docs/solver.md, "More
runs when C is proven")."""

from __future__ import annotations

import time

import pytest
from checkmate_reference import checkmate_optimum
from test_scale import needs_cpsat

from solver.document.generators import unit_chain
from solver.execution.simulate import check_schedule
from solver.optimize import interval_solve
from solver.optimize.incumbents import Incumbents, Restricted
from solver.optimize.interval_solve import IntervalSearch, prove_or_deepen, search_intervals
from solver.optimize.solve import SolveOptions, solve_xengine, start_solve
from solver.status import SolveStatus


@pytest.fixture
def no_covering(monkeypatch):
    """Every covering model too large: only more runs can beat a restricted optimum."""
    monkeypatch.setattr(interval_solve, "COVERING_PAIRS", 0)


@needs_cpsat
def test_a_proven_restriction_is_widened_to_the_optimum(no_covering, no_exact_search):
    # The unit chain of 5 layers at budget 4: its optimum, 14 (Checkmate's model on CBC),
    # runs some node twice. The construction's schedule costs 15 and is the best one with
    # at most one run per node (its own runs aside), which CP-SAT proves at once: that is
    # where the solve ended before.
    graph = unit_chain(5, budget=4)
    assert checkmate_optimum(graph, 4) == pytest.approx(14.0)
    result = solve_xengine(graph, SolveOptions(backend="cpsat", runs=1, time_limit_s=30))
    assert result.objective == pytest.approx(14.0)
    assert check_schedule(graph, result.schedule).total_ms == pytest.approx(14.0)
    assert result.status is SolveStatus.OPTIMAL  # the relaxation's bound meets it
    assert result.restricted is not None and result.restricted.runs >= 2
    assert result.formulation == f"retention intervals (C={result.restricted.runs})"


@needs_cpsat
def test_a_restricted_claim_never_outlives_a_cheaper_schedule(no_covering, no_exact_search):
    # The unit chain of 8 layers at budget 4: 27 with one run per node, 26 with two (the
    # optimum). Whatever C the search ends at, the claim is about the schedule returned.
    graph = unit_chain(8, budget=4)
    result = solve_xengine(graph, SolveOptions(backend="cpsat", runs=1, time_limit_s=10))
    assert result.objective == pytest.approx(26.0)
    restricted = result.restricted
    assert restricted is not None and restricted.runs >= 2
    if restricted.proven:
        assert restricted.bound == pytest.approx(26.0, abs=1e-6)
        assert f"at most {restricted.runs} runs of each node" in result.message
    assert "at most 1 run of each node" not in result.message


@needs_cpsat
def test_a_proof_for_fewer_runs_stands_when_more_find_nothing(no_covering, monkeypatch):
    graph = unit_chain(5, budget=4)
    optimum = solve_xengine(graph, SolveOptions(time_limit_s=30))  # 14, on CBC
    best: Incumbents = start_solve(graph, SolveOptions(time_limit_s=10), "xengine").best
    assert best.cost == pytest.approx(15.0)  # the construction's
    best.restricted = Restricted(2, 15.0, True)
    searched = []

    def unproven(best, deadline, cancel, stop, runs, threads):
        searched.append(runs)
        best.restricted = Restricted(runs, None, False)  # stopped before any proof
        return IntervalSearch(SolveStatus.FEASIBLE, restricted=best.restricted)

    monkeypatch.setattr(interval_solve, "search_intervals", unproven)
    assert prove_or_deepen(best, time.monotonic() + 10, None, None)
    assert searched == [3]
    assert best.restricted == Restricted(2, 15.0, True)  # nothing cheaper: it still stands

    def cheaper(best, deadline, cancel, stop, runs, threads):
        best.offer(optimum.schedule, optimum.timeline, "a wider search")
        best.restricted = Restricted(runs, 13.0, False)
        return IntervalSearch(SolveStatus.FEASIBLE, restricted=best.restricted)

    monkeypatch.setattr(interval_solve, "search_intervals", cheaper)
    best.restricted = Restricted(2, 15.0, True)
    assert prove_or_deepen(best, time.monotonic() + 10, None, None)
    assert best.cost == pytest.approx(14.0)
    assert best.restricted == Restricted(3, 13.0, False)  # 15 for two runs: not this one's


def test_nothing_runs_without_a_proven_restriction(no_covering):
    graph = unit_chain(4, budget=3)
    best = start_solve(graph, SolveOptions(time_limit_s=10), "xengine").best
    best.restricted = Restricted(2, None, False)
    assert not prove_or_deepen(best, time.monotonic() + 10, None, None)
    assert best.restricted == Restricted(2, None, False)


@needs_cpsat
def test_a_schedule_cpsat_finds_beside_cbc_is_called_cpsats():
    # The solve's backend is CBC; a schedule from the interval search beside it used to be
    # "the best schedule found is CBC's" in the result's message.
    graph = unit_chain(5, budget=4)
    best: Incumbents = start_solve(graph, SolveOptions(time_limit_s=10), "xengine").best
    assert best.backend == "CBC" and best.cost == pytest.approx(15.0)
    search = search_intervals(best, time.monotonic() + 10, None, None, runs=2)
    assert search.restricted is not None and search.restricted.proven
    assert best.cost == pytest.approx(14.0)  # two runs of a node: cheaper than 15
    assert best.source == "CP-SAT"
