"""roomier_limits(): the memory a solve without a schedule would need for the construction."""

from __future__ import annotations

from solver.cli import parse_budget
from solver.document.generators import unit_chain
from solver.document.random_graphs import random_layered
from solver.execution.simulate import check_schedule
from solver.optimize.bounds import no_remat_peak
from solver.optimize.construct import construct_best
from solver.optimize.roomier import Roomier, roomier_limits
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.status import SolveStatus


def _narrow(percent: int):
    """A narrow random layered graph on which the construction finds no schedule at 76 % of
    its peak, nor proves there is none (at 80 % only mending its repair found one:
    test_join_search.py; the backward search settles the narrower 100-node ones)."""
    graph = random_layered(250, seed=0, width=0.3 * 250**0.5)
    name, budget = parse_budget(graph, f"cpu={percent}%")
    return graph.with_memory_limits({name: budget})


def test_the_limits_found_hold_a_schedule_the_budget_does_not():
    graph = _narrow(76)
    budget = graph.devices[0].memory_limit
    assert construct_best(graph, deadline=None).timeline is None
    roomier = roomier_limits(graph)
    assert roomier is not None
    limit = roomier.limits["cpu"]
    assert budget < limit <= no_remat_peak(graph)
    found = construct_best(graph.with_memory_limits(roomier.limits))
    assert found.schedule is not None
    assert check_schedule(graph.with_memory_limits(roomier.limits), found.schedule).valid
    # the percentage, as --budget reads it, gives at least those bytes
    assert parse_budget(graph, f"cpu={roomier.percents['cpu']}%")[1] >= limit


def test_a_solve_without_a_schedule_names_the_memory_that_has_one():
    graph = _narrow(76)
    result = solve_xengine(graph, SolveOptions(time_limit_s=2))
    assert result.schedule is None and result.status is SolveStatus.TIME_LIMIT
    assert result.advice.startswith("no schedule yet: try a longer time limit than 2 s")
    assert "; the construction finds a schedule with cpu at " in result.advice
    assert "% of the peak without recomputation)" in result.advice


def test_nothing_to_raise_gives_nothing():
    graph = unit_chain(4)  # unlimited: the budget holds the peak
    assert roomier_limits(graph) is None


def test_the_description_names_every_raised_device():
    roomier = Roomier({"gpu": 2_000_000, "cpu": 3_000}, {"gpu": 61.5, "cpu": 40.0})
    assert roomier.describe() == (
        "the construction finds a schedule with gpu at 1.9 MiB (2,000,000 B, 61.5 % of the "
        "peak without recomputation) and cpu at 2.9 KiB (3,000 B, 40.0 % of the peak without "
        "recomputation)"
    )
