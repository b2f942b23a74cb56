"""Covering runs: the interval model without its restriction below an incumbent's cost."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from checkmate_reference import checkmate_optimum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scale import needs_cpsat, small_graphs

from solver.document.generators import cpu_gpu_devices, unit_chain
from solver.document.graph import make_graph
from solver.execution.simulate import check_schedule
from solver.optimize.backends.cpsat import run_cpsat
from solver.optimize.covering import covering_runs, serve_pairs
from solver.optimize.interval_solve import prove_covering
from solver.optimize.intervals import able_devices, build_interval_model
from solver.optimize.solve import SolveOptions, solve_xengine, start_solve
from solver.status import SolveStatus


def test_covering_runs_on_the_three_layer_chain_by_hand():
    # Seven unit-cost nodes, optimum 10 at budget 3: three recomputations to spend.
    # cost: k <= (3 + 1) / 1 = 4; stages: k <= 7 - v; consumers, from the sink back:
    # n6: 1, n5 -> n6: 2, n4 -> n5: 3, n3 -> n4: 4, n2 -> n3, n4: 8, n1 -> n2, n5: 7,
    # n0 -> n1, n6: 6 (each capped by the other two rules before it is summed).
    graph = unit_chain(3, budget=3)
    counts = covering_runs(graph, 10.0, able_devices(graph))
    assert counts.tolist() == [[4, 4, 4, 4, 3, 2, 1]]
    assert serve_pairs(graph, counts) == sum(
        int(counts[0, u]) * int(counts[0, v]) for u, v in graph.edge_pairs
    )


def test_covering_runs_shrink_to_one_run_at_the_plain_cost():
    graph = unit_chain(3, budget=3)
    plain = float(graph.cost[0].sum())
    assert covering_runs(graph, plain, able_devices(graph)).tolist() == [[1] * graph.n]
    assert covering_runs(graph, float("inf"), able_devices(graph)) is None


@needs_cpsat
def test_covering_model_finds_the_optimum_that_two_runs_per_node_miss():
    # At budget 3 the three-layer chain needs a node computed three times: with C = 2 the
    # interval model has no schedule at all; with covering runs it has the optimum, 10.
    graph = unit_chain(3, budget=3)
    restricted = build_interval_model(graph, 2)
    assert run_cpsat(restricted.model, 10, threads=2).status is SolveStatus.INFEASIBLE
    covering = build_interval_model(
        graph, covering_runs(graph, 12.0, able_devices(graph)), covers=12.0
    )
    outcome = run_cpsat(covering.model, 10, threads=2)
    assert outcome.status is SolveStatus.OPTIMAL
    assert outcome.objective / covering.scale == pytest.approx(10.0, abs=1e-6)
    assert covering.restriction == "none for schedules costing at most 12 ms"


@needs_cpsat
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_covering_proof_meets_the_checkmate_optimum(graph):
    optimum = checkmate_optimum(graph, graph.devices[0].activation_budget)
    start = start_solve(graph, SolveOptions(time_limit_s=20), "xengine")
    if optimum is None:
        assert not hasattr(start, "best") or start.best.schedule is None
        return
    best = start.best
    assert prove_covering(best, time.monotonic() + 20, None, None, threads=2)
    assert best.cost == pytest.approx(optimum, abs=1e-6)
    assert check_schedule(graph, best.schedule).total_ms == pytest.approx(optimum, abs=1e-6)
    assert best.floor <= optimum + 1e-6  # never above the optimum: a valid bound
    assert best.floor >= optimum * (1 - 1e-4) - 1e-9  # and proven: the gap is closed
    assert best.closed.is_set()


@needs_cpsat
def test_cpsat_alone_proves_the_four_layer_chain_optimal_past_its_restriction(no_exact_search):
    # The relaxation bounds this chain at 12 and C = 2 holds no schedule of it; the
    # covering runs prove the independently known optimum, 15, for every schedule.
    graph = unit_chain(4, budget=3)
    result = solve_xengine(graph, SolveOptions(backend="cpsat", time_limit_s=30))
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(15.0)
    assert check_schedule(graph, result.schedule).total_ms == pytest.approx(15.0)
    assert result.bound == pytest.approx(15.0, rel=1e-4)


@needs_cpsat
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layers=st.integers(2, 4),
    gpu_budget=st.integers(3, 6),
    cpu_cost=st.sampled_from([1.0, 2.0, 4.0]),
)
def test_covering_proof_meets_the_papers_optimum_on_two_devices(layers, gpu_budget, cpu_cost):
    # The unit chain on a roomy CPU and a small, faster GPU joined by a link: the paper's
    # model, alone on CBC with no shortcut, is the reference.
    devices, links = cpu_gpu_devices(100, gpu_budget)
    chain = unit_chain(layers, devices=devices)
    nodes = [replace(n, cost={"cpu": cpu_cost, "gpu": 1.0}) for n in chain.nodes]
    graph = make_graph("two-device chain", devices, nodes, chain.edges, links)
    papers = solve_xengine(
        graph,
        SolveOptions(
            time_limit_s=60, gap_rel=0.0, warm_start=False, improve=False, formulation="stages"
        ),
    )
    assert papers.status is SolveStatus.OPTIMAL
    start = start_solve(graph, SolveOptions(time_limit_s=20), "xengine")
    best = start.best
    assert prove_covering(best, time.monotonic() + 20, None, None, threads=2)
    assert best.cost == pytest.approx(papers.objective, rel=1e-6)
    assert best.floor <= papers.objective * (1 + 1e-9)
    assert best.closed.is_set()
