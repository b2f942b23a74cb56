"""The backward search for any schedule that fits (``solver/optimize/fit_search.py``).

Its answer is checked against Checkmate's plain MILP (``checkmate_reference.py``, written
independently), which decides the same question: on small random layered graphs the least
budget the search finds a schedule for is the least budget the MILP is feasible at. Every
schedule it finds replays in the simulator within the budget.
"""

from __future__ import annotations

import time

import pytest
from checkmate_reference import checkmate_solve
from test_once import pressure_graph

from solver.cli import parse_budget
from solver.document.generators import unit_chain
from solver.document.graph import Graph
from solver.document.random_graphs import random_layered
from solver.execution.simulate import check_schedule, simulate
from solver.optimize import construct as construct_module
from solver.optimize.bounds import lower_bound, no_remat_peak
from solver.optimize.construct import construct_best, schedule_from_keeps
from solver.optimize.fit_search import FitSearcher, search_fit
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.status import SolveStatus


def _at(graph: Graph, budget: int) -> Graph:
    return graph.with_memory_limits({graph.devices[0].name: budget})


def _schedule_of(graph: Graph, keeps: list[frozenset[int]]):
    return schedule_from_keeps(graph, keeps, "fit")


def _least_budget(graph: Graph) -> int:
    """The least budget the search finds a schedule at (feasibility grows with the budget),
    each answer a proof or a replayed schedule."""
    low, high = lower_bound(graph) - 1, no_remat_peak(graph)  # low fails, high fits
    while high - low > 1:
        middle = (low + high) // 2
        found = search_fit(_at(graph, middle))
        assert found.found or found.proven
        if found.found:
            assert simulate(_at(graph, middle), _schedule_of(graph, found.keeps)).valid
            high = middle
        else:
            low = middle
    return high


@pytest.mark.parametrize("seed", range(4))
def test_the_least_budget_is_the_milps(seed: int) -> None:
    graph = random_layered(12, seed=seed, width=1.5)
    least = _least_budget(graph)
    assert lower_bound(graph) <= least <= no_remat_peak(graph)
    fits, _, _ = checkmate_solve(graph, least, time_limit=30)
    short, _, _ = checkmate_solve(graph, least - 1, time_limit=30)
    assert (fits, short) == ("optimal", "infeasible")


def test_a_stuck_narrow_graph_gets_a_schedule_that_replays() -> None:
    # 100 nodes, 3 per layer: every greedy repair of the construction gets stuck at 90 %
    graph = random_layered(100, seed=9, width=3.0)
    graph = _at(graph, parse_budget(graph, "cpu=90%")[1])
    found = search_fit(graph, deadline=time.monotonic() + 60)
    assert found.found and not found.proven
    timeline = check_schedule(graph, _schedule_of(graph, found.keeps))
    assert timeline.peaks["cpu"] <= graph.devices[0].activation_budget


def test_a_budget_too_small_for_any_order_is_proven() -> None:
    graph = random_layered(100, seed=9, width=3.0)
    graph = _at(graph, parse_budget(graph, "cpu=70%")[1])
    assert lower_bound(graph) <= graph.devices[0].activation_budget  # no node alone is too big
    found = search_fit(graph, deadline=time.monotonic() + 60)
    assert found.proven and not found.found


def test_nodes_computed_once_are_never_recomputed() -> None:
    # test_once's graph at 12 B: with r computed once, a is recomputed instead
    graph = pressure_graph(once=True)
    found = search_fit(graph)
    assert found.found
    recomputed = [e.node for e in check_schedule(graph, _schedule_of(graph, found.keeps)).ops]
    assert recomputed.count("r") == 1 and recomputed.count("a") == 2
    assert search_fit(_at(graph, 11)).proven  # 4 + 7 held while h runs: r's 4 B never leave


def test_a_deadline_gives_neither_answer_and_the_search_goes_on() -> None:
    graph = random_layered(100, seed=9, width=3.0)
    graph = _at(graph, parse_budget(graph, "cpu=90%")[1])
    searcher = FitSearcher(graph)
    stopped = searcher.run(deadline=time.monotonic() - 1)
    assert not stopped.found and not stopped.proven and stopped.states == 255
    found = searcher.run(deadline=time.monotonic() + 60)
    assert found.found and found.states == search_fit(graph).states
    assert searcher.run() is found


def test_the_construction_uses_it_when_every_greed_is_stuck(monkeypatch) -> None:
    # the join search mends this graph's stuck repair first (test_join_search.py): without it
    monkeypatch.setattr(construct_module, "MEND_SECONDS", 0.0)
    monkeypatch.setattr(construct_module, "RESTART_SECONDS", 0.2)
    graph = random_layered(100, seed=9, width=3.0)
    graph = _at(graph, parse_budget(graph, "cpu=90%")[1])
    built = construct_best(graph, deadline=time.monotonic() + 60)
    assert built.timeline is not None and built.timeline.valid
    assert built.timeline.peaks["cpu"] <= graph.devices[0].activation_budget


def test_a_solve_says_infeasible_with_the_proof() -> None:
    graph = random_layered(100, seed=9, width=3.0)
    graph = _at(graph, parse_budget(graph, "cpu=70%")[1])
    result = solve_xengine(graph, SolveOptions(time_limit_s=30))
    assert result.status is SolveStatus.INFEASIBLE and result.schedule is None
    assert "no schedule fits" in result.message and "give it more memory" in result.message
    assert result.seconds < 15


def test_the_unit_chain_fits_its_lower_bound() -> None:
    graph = unit_chain(4, budget=lower_bound(unit_chain(4)))
    found = search_fit(graph)
    assert found.found
    assert check_schedule(graph, _schedule_of(graph, found.keeps)).valid
