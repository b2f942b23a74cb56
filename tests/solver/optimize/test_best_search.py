"""The exact one-device search (``solver/optimize/best_search.py``): A* over the backward
search's states.

Its optima are checked against Checkmate's plain MILP (``checkmate_reference.py``, written
independently) on small random layered graphs at several budgets, and against hand-derived
optima of the unit chain; every schedule it returns replays at the cost it claims, and every
bound it reports is at most the optimum.
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from checkmate_reference import checkmate_solve

from solver.cli import parse_budget
from solver.document.generators import unit_chain
from solver.document.graph import Graph
from solver.document.random_graphs import random_layered
from solver.execution.simulate import simulate
from solver.optimize.best_search import BestSearcher
from solver.optimize.bounds import lower_bound, no_remat_peak
from solver.optimize.construct import schedule_from_keeps
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.status import SolveStatus


def _at(graph: Graph, budget: int) -> Graph:
    return graph.with_memory_limits({graph.devices[0].name: budget})


def _replayed(graph: Graph, keeps: list[frozenset[int]]) -> float:
    timeline = simulate(graph, schedule_from_keeps(graph, keeps, "best"))
    assert timeline.valid, timeline.violation
    return timeline.total_ms


@pytest.mark.parametrize("seed", range(3))
def test_the_optimum_is_the_milps(seed: int) -> None:
    graph = random_layered(12, seed=seed, width=1.5)
    low, high = lower_bound(graph), no_remat_peak(graph)
    for budget in (low, (2 * low + high) // 3, (low + 2 * high) // 3, high):
        at = _at(graph, budget)
        found = BestSearcher(at).run()
        status, objective, _ = checkmate_solve(graph, budget, time_limit=30)
        if status == "infeasible":
            assert found.infeasible and found.bound == math.inf
            continue
        assert status == "optimal" and found.proven
        assert found.cost == pytest.approx(objective, rel=1e-9)
        assert _replayed(at, found.keeps) == pytest.approx(found.cost, rel=1e-9)


@pytest.mark.parametrize("layers", [3, 4, 6])
def test_the_unit_chain_optima_known_since_checkmate(layers: int) -> None:
    # 2n+1 unit nodes: budget 2 is infeasible, budget 3 costs (2n+1) + n(n-1)/2 (every
    # backward node recomputes its forward input from the start), n+2 costs 2n+1
    plain = 2 * layers + 1
    assert BestSearcher(unit_chain(layers, budget=2)).run().infeasible
    tight = BestSearcher(unit_chain(layers, budget=3)).run()
    assert tight.cost == plain + layers * (layers - 1) / 2
    assert _replayed(unit_chain(layers, budget=3), tight.keeps) == tight.cost
    assert BestSearcher(unit_chain(layers, budget=layers + 2)).run().cost == plain


def test_the_bound_rises_and_never_passes_the_optimum() -> None:
    graph = random_layered(100, seed=2, width=3.0)  # at 0.8, CBC proves 44,350 too
    graph = _at(graph, parse_budget(graph, "cpu=80%")[1])
    heard: list[float] = []
    found = BestSearcher(graph).run(on_bound=heard.append)
    assert found.proven and found.cost == 44350.0 and found.bound == found.cost
    assert _replayed(graph, found.keeps) == 44350.0
    assert heard == sorted(heard) and all(b <= found.cost for b in heard)
    # stopped early, it says only what it knows, and goes on where it stopped
    searcher = BestSearcher(graph)
    stopped = searcher.run(deadline=time.monotonic() - 1)
    assert not stopped.proven and stopped.keeps is None and stopped.bound <= 44350.0
    assert searcher.run().cost == 44350.0


def test_a_ceiling_proves_the_schedule_that_set_it() -> None:
    graph = random_layered(100, seed=2, width=3.0)
    graph = _at(graph, parse_budget(graph, "cpu=80%")[1])
    # at the optimum itself: nothing is cheaper, so the search runs out and says so
    at_optimum = BestSearcher(graph).run(ceiling=lambda: 44350.0)
    assert at_optimum.keeps is None and not at_optimum.proven
    assert at_optimum.bound == 44350.0
    # above it: the optimum is found as without one
    above = BestSearcher(graph).run(ceiling=lambda: 45000.0)
    assert above.cost == 44350.0


def test_a_one_device_solve_is_closed_by_it() -> None:
    # ResNet-18's training graph on its GPU at 80 %: CBC's proof took 36 s beside CP-SAT
    # (bench/README.md, "Against a plain PuLP/CBC Checkmate model"); the search proves
    # 22.889 ms in under a second
    from solver.document.examples import bundled_graphs
    from solver.document.graph_io import load_graph

    graph = load_graph(bundled_graphs()["resnet18"]).with_devices(["gpu"])
    graph = _at(graph, parse_budget(graph, "gpu=80%")[1])
    started = time.monotonic()
    result = solve_xengine(graph, SolveOptions(time_limit_s=60))
    assert result.status is SolveStatus.OPTIMAL
    assert result.timeline.total_ms == pytest.approx(22.888748710000005, rel=1e-9)
    assert time.monotonic() - started < 30
    assert "(found by the exact search (A* over every order" in result.message


class _Searcher:
    bound = 0.0


class _Best:
    def __init__(self, cost: float | None, other: float | None) -> None:
        self.cost, self.other = cost, other
        self.outpaced = threading.Event()

    def bound_besides(self, source: str) -> float | None:
        return self.other


@pytest.mark.parametrize(
    ("other", "pace", "expected"),
    [
        (95.0, 0.5, True),  # behind CBC's 95, and 10 s at 0.5 a second reach 94, not 100
        (95.0, 2.0, False),  # behind, but at this pace it proves 100 within the 10 s
        (85.0, 0.5, False),  # ahead of every other bound: it is the solve's best prover
        (None, 0.5, False),  # nobody else has a bound yet
    ],
)
def test_a_search_that_trails_another_bound_and_cannot_catch_up_yields(
    other: float | None, pace: float, expected: bool
) -> None:
    from solver.optimize import exact_beside

    look = exact_beside.TRAILING_LOOK_S
    clock = [1000.0]
    searcher = _Searcher()
    searcher.bound = 88.0
    deadline = 1000.0 + 2 * look + 10.0  # 10 s left at the second look
    trailing = exact_beside._Trailing(searcher, _Best(100.0, other), deadline, lambda: clock[0])
    clock[0] += look
    assert not trailing.is_set()  # the first look only measures the pace from here
    clock[0] += look / 2
    searcher.bound += pace * look / 2
    assert not trailing.is_set()  # too soon for another look
    clock[0] += look / 2
    searcher.bound += pace * look / 2
    assert trailing.is_set() is expected
    assert trailing.fired is expected


def test_a_search_that_took_cbcs_core_does_not_yield_it() -> None:
    # behind another bound and too slow, as in the first case above; but CBC was stopped for
    # it (exact_beside._Leading): yielding now would leave neither running
    from solver.optimize import exact_beside

    look = exact_beside.TRAILING_LOOK_S
    clock = [1000.0]
    searcher = _Searcher()
    searcher.bound = 88.0
    best = _Best(100.0, 95.0)
    trailing = exact_beside._Trailing(searcher, best, 1000.0 + 2 * look + 10.0, lambda: clock[0])
    clock[0] += look
    assert not trailing.is_set()
    best.outpaced.set()
    clock[0] += look
    searcher.bound += 0.5 * look
    assert not trailing.is_set() and not trailing.fired


def test_the_bound_besides_a_source_leaves_its_own_floor_out() -> None:
    from solver.optimize.incumbents import Incumbents

    best = Incumbents(unit_chain(4, budget=4), "xengine", "CBC", None)
    assert best.bound_besides("A*") is None
    best.raise_floor(10.0, "", "A*")
    assert best.bound_besides("A*") is None  # its own floor does not count
    best.raise_floor(12.0, "", "the relaxation")
    assert best.bound_besides("A*") == 12.0
