"""Mending a stuck repair by a search that joins its keep sets
(``solver/optimize/join_search.py``).

The graphs are the narrow random layered graphs on which every greed of the construction's
repair ends with stages over the budget. Every mended schedule is replayed by the simulator
within the budget; where no schedule exists at all (proven by the backward search of
``fit_search.py``), mending must fail rather than return one.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from solver.cli import parse_budget
from solver.document.graph import Graph
from solver.document.random_graphs import random_layered
from solver.execution.simulate import check_schedule
from solver.optimize.construct import GREEDS, construct_best, schedule_from_keeps
from solver.optimize.fit_search import search_fit
from solver.optimize.join_search import mend
from solver.optimize.repair import Repair


def _narrow(n: int, seed: int, percent: int) -> Graph:
    graph = random_layered(n, seed=seed, width=0.3 * n**0.5)
    name, budget = parse_budget(graph, f"cpu={percent}%")
    return graph.with_memory_limits({name: budget})


def _stuck(graph: Graph) -> Repair:
    repair = Repair(graph, [0] * graph.n, *GREEDS[0])
    assert not repair.run(None)  # the premise: the greedy repair ends over the budget
    return repair


def _mended(graph: Graph, repair: Repair, seconds: float = 30.0):
    placement = [0] * graph.n

    def overflowing(keeps: list[frozenset[int]]) -> list[int]:
        return np.flatnonzero(Repair.from_keeps(graph, placement, keeps).over).tolist()

    keeps = [frozenset(np.flatnonzero(row).tolist()) for row in repair.keep]
    return mend(graph, keeps, overflowing, time.monotonic() + seconds)


@pytest.mark.parametrize(("n", "seed", "percent"), [(100, 8, 80), (100, 9, 90)])
def test_a_stuck_repair_is_mended_into_a_schedule_that_fits(n, seed, percent) -> None:
    graph = _narrow(n, seed, percent)
    keeps = _mended(graph, _stuck(graph))
    assert keeps is not None
    timeline = check_schedule(graph, schedule_from_keeps(graph, keeps, "mended"))
    assert timeline.valid
    assert timeline.peaks["cpu"] <= graph.devices[0].activation_budget


def test_the_mended_schedule_recomputes_less_than_the_searchs() -> None:
    # the backward search from nothing finds a schedule of this graph too, recomputing about
    # three times the plain cost; mending the repair keeps most of the repair's choices
    graph = _narrow(100, 9, 90)
    keeps = _mended(graph, _stuck(graph))
    assert keeps is not None
    mended = check_schedule(graph, schedule_from_keeps(graph, keeps, "mended"))
    searched = search_fit(graph)
    assert searched.found
    found = check_schedule(graph, schedule_from_keeps(graph, searched.keeps, "searched"))
    plain = float(np.nansum(graph.cost[0]))
    assert mended.total_ms - plain < 0.5 * (found.total_ms - plain)


def test_where_no_schedule_exists_mending_fails() -> None:
    graph = _narrow(100, 9, 70)
    assert search_fit(graph).proven  # nothing fits 70 % of this graph's peak
    assert _mended(graph, _stuck(graph), seconds=5.0) is None


def test_the_construction_mends_a_250_node_graph_nothing_else_could_schedule() -> None:
    # at 0.8 of its peak the repair overflowed one stage by 46 B of 54 KB; restarts and the
    # backward search found nothing in 30 s (bench/README.md)
    graph = _narrow(250, 0, 80)
    built = construct_best(graph, deadline=time.monotonic() + 30)
    assert built.timeline is not None and built.timeline.valid
    assert built.timeline.peaks["cpu"] <= graph.devices[0].activation_budget
