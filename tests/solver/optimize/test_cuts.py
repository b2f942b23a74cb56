"""The conflict cuts of solver.optimize.cuts: valid for every schedule, and tighter."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import small_graphs

import solver.optimize.miqp as miqp
from solver.document.generators import cpu_gpu_devices, unit_chain
from solver.document.graph import Device, Edge, Node, make_graph
from solver.document.graph_io import graph_from_dict
from solver.execution.simulate import simulate
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.construct import construct_best
from solver.optimize.cuts import conflict_pairs
from solver.optimize.miqp import build_array_model
from solver.optimize.miqp_schedule import values_from_schedule
from solver.optimize.solve import SolveOptions, best_baseline, solve_xengine
from solver.optimize.xengine import build_model
from solver.status import SolveStatus


def lp_bound(graph) -> float:
    """The LP relaxation of the solved model (every column continuous), by HiGHS."""
    program = build_array_model(graph).program
    relaxed = replace(program, integer=np.zeros(program.num_cols, dtype=bool))
    result = run_backend(relaxed, BackendOptions(backend="highs", time_limit_s=30))
    assert result.status is SolveStatus.OPTIMAL
    return float(result.objective)


def reference_optimum(graph) -> float:
    """The spec's formulation line by line (solver.optimize.xengine, no cuts), by CBC."""
    result = run_backend(build_model(graph).prob, BackendOptions(time_limit_s=30, gap_rel=0.0))
    assert result.status is SolveStatus.OPTIMAL
    return float(result.objective)


def test_conflict_cuts_lift_the_lp_bound_of_the_unit_chain_to_its_optimum(monkeypatch):
    # Checkmate's unit chain of 4 layers (9 unit nodes, node 8-i reads node 7-i and f_i) at a
    # budget of 3 bytes. By hand: every backward op needs exactly 3 bytes (two inputs and its
    # output), so while it runs nothing else is resident; the only tensors that can cross a
    # backward stage are its inputs and output. The backward of layer i (stage 8-i, i = 2,
    # 1, 0) reads f_i, which is none of those of stage 9-i's op, so f_0..f_i are recomputed in
    # its stage (each run holds its input, its output and the gradient: 3 bytes): 3 + 2 + 1
    # = 6 runs on top of the 9 first runs, optimum 15 (the generator's formula
    # (2n+1) + n(n-1)/2). The LP relaxation without the cuts holds halves of tensors across
    # the backward and says 11.5; the cuts S + R <= 1 forbid exactly that.
    graph = unit_chain(4, budget=3)
    with_cuts = lp_bound(graph)
    monkeypatch.setattr(miqp, "add_conflict_cuts", lambda model, builder: 0)
    without = lp_bound(graph)
    assert without == pytest.approx(11.5)
    assert with_cuts == pytest.approx(15.0)
    monkeypatch.undo()
    result = solve_xengine(graph, SolveOptions(time_limit_s=30, gap_rel=0.0, warm_start=False))
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(15.0)
    assert simulate(graph, result.schedule).total_ms == pytest.approx(15.0)


def two_device_chain(layers: int, gpu_budget: int):
    """The unit chain on a CPU (costs 4, memory 100) and a GPU (costs 1, ``gpu_budget``)."""
    devices, links = cpu_gpu_devices(100, gpu_budget)
    graph = unit_chain(layers, devices=devices)
    nodes = [replace(n, cost={"cpu": 4.0, "gpu": 1.0}) for n in graph.nodes]
    return make_graph("two-device chain", devices, nodes, graph.edges, links)


def kept_input_graph():
    """v0 (2 bytes) -> v1 (1 byte) -> v2 (1 byte), and v0 -> v2; unit costs, budget 4.

    By hand: v1 needs 3 bytes, v2 needs 4 (its inputs v0, v1 and itself), so v0 can be kept
    from stage 0 to 2 (3 bytes in stage 1, 4 in stage 2): optimum 3, nothing recomputed. A
    cut that counted an input of the running node again (v0 kept while v1 runs: 2 + 3 > 4)
    would force v0's recomputation, 4."""
    nodes = [Node("v0", 2, {"cpu": 1.0}), Node("v1", 1, {"cpu": 1.0}), Node("v2", 1, {"cpu": 1.0})]
    edges = [Edge("v0", "v1"), Edge("v1", "v2"), Edge("v0", "v2")]
    return make_graph("kept input", [Device("cpu", "cpu", 4)], nodes, edges)


@pytest.mark.parametrize(
    "graph",
    [unit_chain(n, budget=b) for n in (2, 3, 4) for b in (3, 4, 5)]
    + [two_device_chain(3, b) for b in (3, 4)]
    + [kept_input_graph()],
    ids=lambda g: f"{g.name}-{g.activation_budgets.tolist()}",
)
def test_conflict_cuts_keep_the_reference_models_optimum(graph):
    expected = reference_optimum(graph)
    if graph.name == "kept input":
        assert expected == pytest.approx(3.0)
    assert lp_bound(graph) <= expected + 1e-6
    result = solve_xengine(graph, SolveOptions(time_limit_s=30, gap_rel=0.0, warm_start=False))
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(expected, abs=1e-6)


def assert_satisfies_cuts(graph, schedule) -> None:
    model = build_array_model(graph)
    timeline = simulate(graph, schedule)
    x = values_from_schedule(model, schedule, timeline)
    if x is None:  # the model cannot express it (a resident tensor recomputed)
        return
    for s, r in conflict_pairs(model):
        assert x[s] + x[r] <= 1.0 + 1e-9


def heuristic_schedules(graph):
    built = construct_best(graph)
    if built.schedule is not None:
        yield built.schedule
    baseline = best_baseline(graph)
    if baseline is not None:
        yield baseline[0]


@pytest.mark.parametrize(
    "graph", [unit_chain(n, budget=3) for n in (3, 4, 5)] + [two_device_chain(4, 3)]
)
def test_every_heuristic_schedule_of_a_tight_chain_satisfies_the_cuts(graph):
    assert conflict_pairs(build_array_model(graph)), "no cuts here: the test could not fail"
    schedules = list(heuristic_schedules(graph))
    assert schedules
    for schedule in schedules:
        assert_satisfies_cuts(graph, schedule)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_every_valid_schedule_satisfies_the_conflict_cuts(doc):
    graph = graph_from_dict(doc)
    for schedule in heuristic_schedules(graph):
        assert_satisfies_cuts(graph, schedule)
    result = solve_xengine(graph, SolveOptions(time_limit_s=20, gap_rel=0.0))
    if result.ok:  # the optimum of a model with the cuts must be the reference's
        assert result.objective == pytest.approx(reference_optimum(graph), abs=1e-6)
