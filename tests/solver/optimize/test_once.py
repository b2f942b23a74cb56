"""Nodes computed once (``Node.recomputable`` False: random ops such as dropout masks).

The hand-made graph: ``a`` (4 B, 10 ms), ``r`` (4 B, 1 ms), ``h`` (7 B, 1 ms), ``g`` (1 B,
1 ms, reads ``h``) and ``out`` (1 B, 1 ms, reads ``a``, ``r`` and ``g``), budget 12 B, in
that order. Holding ``a`` and ``r`` while ``h`` runs needs 4 + 4 + 7 = 15 B, so one of them is
freed before stage 2 and computed again for ``out`` (stage 3 has no room for it: 4 + 7 + 1 =
12 B; stage 4 has: 4 + 1 + 4 + 1 = 10 B). Each node once costs 10 + 1 + 1 + 1 + 1 = 14 ms.

- ``r`` recomputable: free ``r`` and recompute it (1 ms): the optimum is **15 ms**.
- ``r`` computed once: ``r`` is held (4 + 7 = 11 B in stage 2, 4 + 7 + 1 = 12 B in stage 3)
  and ``a`` is recomputed instead (10 ms): the optimum is **24 ms**.
"""

from __future__ import annotations

import json

import pytest

from solver.document.graph import Device, Edge, Graph, Node, make_graph
from solver.document.graph_io import graph_from_dict, graph_to_dict
from solver.document.schedule import Operation, Schedule, Stage
from solver.errors import GraphFormatError
from solver.execution.simulate import check_schedule, simulate
from solver.optimize import intervals
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.baselines import chen_sqrtn, schedule_with_checkpoints
from solver.optimize.construct import construct_best
from solver.optimize.methods import solve
from solver.optimize.miqp import build_array_model
from solver.optimize.offload import build_offload_model
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.optimize.xengine import build_model
from solver.results.key import result_key
from solver.status import SolveStatus

EXACT = SolveOptions(time_limit_s=30, gap_rel=0.0, warm_start=False, improve=False)
FREE, ONCE = 15.0, 24.0


def pressure_graph(once: bool) -> Graph:
    """The graph of the module docstring; ``once``: ``r`` is computed once."""
    nodes = [
        Node("a", 4, {"cpu": 10.0}),
        Node("r", 4, {"cpu": 1.0}, op="dropout", recomputable=not once),
        Node("h", 7, {"cpu": 1.0}),
        Node("g", 1, {"cpu": 1.0}),
        Node("out", 1, {"cpu": 1.0}),
    ]
    edges = [Edge("a", "out"), Edge("r", "out"), Edge("h", "g"), Edge("g", "out")]
    return make_graph("pressure", [Device("cpu", memory_limit=12)], nodes, edges)


def _recomputed(graph: Graph, schedule: Schedule) -> list[str]:
    return [e.node for e in check_schedule(graph, schedule).ops if e.recompute]


@pytest.mark.parametrize(("once", "optimum", "remade"), [(False, FREE, "r"), (True, ONCE, "a")])
def test_once_changes_the_known_optimum(once: bool, optimum: float, remade: str) -> None:
    graph = pressure_graph(once)
    result = solve_xengine(graph, EXACT)
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective == pytest.approx(optimum)
    assert _recomputed(graph, result.schedule) == [remade]


@pytest.mark.parametrize(("once", "optimum"), [(False, FREE), (True, ONCE)])
def test_reference_model_agrees(once: bool, optimum: float) -> None:
    reference = run_backend(
        build_model(pressure_graph(once)).prob, BackendOptions(time_limit_s=30, gap_rel=0.0)
    )
    assert reference.objective == pytest.approx(optimum)


def test_single_device_checkmate_holds_the_random_node() -> None:
    graph = pressure_graph(True)
    result = solve(graph, "checkmate:cpu", EXACT)
    assert result.timeline.total_ms == pytest.approx(ONCE)
    assert _recomputed(graph, result.schedule) == ["a"]


def test_once_adds_one_row_per_node() -> None:
    for build in (build_array_model, build_offload_model):
        free, once = build(pressure_graph(False)), build(pressure_graph(True))
        assert once.num_constraints == free.num_constraints + 1


@pytest.mark.skipif(not intervals.available(), reason="ortools is not installed")
def test_interval_model_holds_the_random_node(no_exact_search) -> None:
    graph = pressure_graph(True)
    options = SolveOptions(backend="cpsat", time_limit_s=30, runs=3, warm_start=False)
    result = solve_xengine(graph, options)
    assert result.timeline.total_ms == pytest.approx(ONCE)
    assert _recomputed(graph, result.schedule) == ["a"]
    assert result.restricted is not None and result.restricted.proven
    model = intervals.build_interval_model(graph, runs=3)
    assert model.runs[0].tolist() == [3, 1, 3, 3, 3]
    assert model.restriction == "each node computed at most 3 times per device"


def test_construction_holds_the_random_node() -> None:
    graph = pressure_graph(True)
    found = construct_best(graph)
    assert found.timeline is not None and found.timeline.valid, found.reason
    assert "r" not in _recomputed(graph, found.schedule)
    free = construct_best(pressure_graph(False))
    assert _recomputed(pressure_graph(False), free.schedule) == ["r"]  # what it did before


def test_construction_never_plans_a_cascade_through_a_random_node() -> None:
    # x (reads r) cannot stay beside h (4 + 7 = 11 B > 10), nor can r (3 + 7 + 1 = 11 B in
    # stage 3), so recomputing x for out would recompute r: no schedule exists, and the
    # construction must say so itself (its backward search proves it) rather than hand the
    # simulator one that remakes r
    nodes = [
        Node("r", 3, {"cpu": 1.0}, recomputable=False),
        Node("x", 4, {"cpu": 1.0}),
        Node("h", 7, {"cpu": 1.0}),
        Node("g", 1, {"cpu": 1.0}),
        Node("out", 1, {"cpu": 1.0}),
    ]
    edges = [Edge("r", "x"), Edge("x", "out"), Edge("h", "g"), Edge("g", "out")]
    graph = make_graph("cascade", [Device("cpu", memory_limit=10)], nodes, edges)
    found = construct_best(graph)
    assert found.schedule is None and found.infeasible
    assert found.reason.startswith(
        "no schedule fits 10 B on cpu: a search of every order of computation and "
        "recomputation found none (it ran out after 2 states"
    )
    assert solve_xengine(graph, EXACT).status is SolveStatus.INFEASIBLE


def test_keep_rule_baselines_keep_a_random_node() -> None:
    for once, remade in ((False, ["h", "a", "r", "h", "g"]), (True, ["h", "a", "h", "g"])):
        roomy = pressure_graph(once).with_memory_limits({"cpu": 100})
        keep_nothing = schedule_with_checkpoints(roomy, "cpu", lambda i, t, r: False, "none")
        assert _recomputed(roomy, keep_nothing) == remade  # r is held, whatever keep says
        assert "r" not in _recomputed(roomy, chen_sqrtn(roomy, "cpu")) or not once


def _recomputing_schedule(graph: Graph) -> Schedule:
    """Free ``r`` after stage 1 and compute it again with ``out``: 15 ms, fits the budget."""
    ops = [Operation(node.id, "cpu") for node in graph.nodes]
    stages = (
        Stage((ops[0],), {"cpu": frozenset({"a"})}),
        Stage((ops[1],), {"cpu": frozenset({"a"})}),
        Stage((ops[2],), {"cpu": frozenset({"a", "h"})}),
        Stage((ops[3],), {"cpu": frozenset({"a", "g"})}),
        Stage((ops[1], ops[4]), {}),
    )
    return Schedule(graph.name, graph.memory_limits, stages)


def test_simulate_refuses_to_recompute_a_random_node() -> None:
    schedule = _recomputing_schedule(pressure_graph(True))
    assert simulate(pressure_graph(False), schedule).total_ms == FREE  # valid when it may
    replay = simulate(pressure_graph(True), schedule)
    violation = replay.violation
    assert violation is not None and violation.rule == "once"
    assert (violation.stage, violation.node, violation.device) == (4, "r", "cpu")
    assert str(violation) == (
        "stage 4: recomputes r (node 1), which is computed once, in its own stage (a random "
        "op: computed again it would draw other numbers); keep it from stage 1 until its "
        "last use instead"
    )


def test_recomputable_round_trips_and_keys_apart() -> None:
    graph = pressure_graph(True)
    doc = graph_to_dict(graph)
    assert [n.get("recomputable") for n in doc["nodes"]] == [None, False, None, None, None]
    loaded = graph_from_dict(json.loads(json.dumps(doc)))
    assert [n.recomputable for n in loaded.nodes] == [True, False, True, True, True]
    assert loaded.once == (1,) and graph_to_dict(loaded) == doc
    assert "recomputable" not in json.dumps(graph_to_dict(pressure_graph(False)))
    options = SolveOptions()
    assert result_key(graph, "xengine", options) != result_key(
        pressure_graph(False), "xengine", options
    )


def test_recomputable_must_be_a_boolean() -> None:
    doc = graph_to_dict(pressure_graph(False))
    doc["nodes"][1]["recomputable"] = "no"
    with pytest.raises(GraphFormatError, match="node 'r': field 'recomputable' is str"):
        graph_from_dict(doc, "p.graph.json")
    with pytest.raises(GraphFormatError, match="node 'r', field 'recomputable'"):
        make_graph(
            "x", [Device("cpu", memory_limit=9)], [Node("r", 1, {"cpu": 1.0}, recomputable=0)]
        )  # type: ignore[arg-type]


def test_a_saved_limit_below_the_random_nodes_is_explained() -> None:
    # m (3 B, computed once) is read by the backward: 3 bytes are saved whatever else is
    nodes = [
        Node("m", 3, {"cpu": 1.0}, kind="forward", recomputable=False),
        Node("f", 2, {"cpu": 1.0}, kind="forward"),
        Node("loss", 1, {"cpu": 1.0}, kind="loss"),
        Node("f.grad", 1, {"cpu": 1.0}, kind="backward"),
    ]
    edges = [Edge("m", "f"), Edge("f", "loss"), Edge("loss", "f.grad"), Edge("m", "f.grad")]
    graph = make_graph("masked", [Device("cpu", memory_limit=100)], nodes, edges)
    assert solve_xengine(graph.with_saved_limits({"cpu": 3}), EXACT).status is SolveStatus.OPTIMAL
    result = solve_xengine(graph.with_saved_limits({"cpu": 2}), EXACT)
    assert result.status is SolveStatus.INFEASIBLE
    assert result.message == (
        "no schedule can exist: 1 node computed once (random ops: m), read in the backward, "
        "hold 3 B (3 bytes) when it starts, more than the saved-bytes limits allow (2 "
        "bytes); raise the limit to at least 3 bytes"
    )
