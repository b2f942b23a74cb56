"""The overlap search: hand-derived optima, never worse than its start, always a valid schedule."""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import small_graphs

from solver.cli import main
from solver.document.generators import unit_chain
from solver.document.graph import Device, Edge, Link, Node, make_graph
from solver.document.graph_io import graph_from_dict, save_graph
from solver.errors import XEngineError
from solver.execution.concurrent import concurrent_makespan
from solver.execution.simulate import check_schedule
from solver.optimize.baselines import checkpoint_all, chen_sqrtn
from solver.optimize.methods import parse_method, solve
from solver.optimize.overlap import optimize_overlap
from solver.optimize.solve import SolveOptions


def _side_branch():
    """``a -> c`` and an independent ``b``; 3 ms each on the CPU, ``b`` 1 ms on the GPU."""
    devices = [Device("cpu", "cpu", 9), Device("gpu", "gpu", 9)]
    links = [Link("cpu", "gpu", 1000.0), Link("gpu", "cpu", 1000.0)]
    nodes = [
        Node("a", 1, {"cpu": 3.0}),
        Node("b", 1, {"cpu": 3.0, "gpu": 1.0}),
        Node("c", 1, {"cpu": 3.0}),
    ]
    return make_graph("side", devices, nodes, [Edge("a", "c")], links)


def test_overlap_moves_an_independent_node_beside_the_critical_path():
    """Everything on the CPU: 9 ms serial and concurrent. ``c`` needs ``a`` and both only run on
    the CPU, so 3 + 3 = 6 ms is a lower bound on any makespan; moving ``b`` to the GPU ([0, 1],
    beside ``a`` on [0, 3]) reaches it."""
    graph = _side_branch()
    found = optimize_overlap(graph, checkpoint_all(graph, "cpu"))
    assert (found.start_makespan_ms, found.makespan_ms) == (9.0, 6.0)
    assert found.converged
    timeline = check_schedule(graph, found.schedule)
    assert {op.node: op.device for op in timeline.ops} == {"a": "cpu", "b": "gpu", "c": "cpu"}
    assert concurrent_makespan(graph, found.schedule) == 6.0


@pytest.mark.parametrize("layers", [3, 4, 6])
def test_overlap_drops_recomputations_that_memory_no_longer_needs(layers):
    """On one device nothing overlaps, so the makespan is the serial cost; with room for every
    tensor the least is Checkmate's ``2n + 1`` (no recomputation), which Chen's sqrt(n)
    schedule exceeds. Reusing the kept tensors instead of recomputing reaches it."""
    graph = unit_chain(layers, budget=100)
    start = chen_sqrtn(graph, "cpu")
    assert check_schedule(graph, start).recomputations > 0
    found = optimize_overlap(graph, start)
    assert found.makespan_ms == 2 * layers + 1
    assert check_schedule(graph, found.schedule).recomputations == 0


def test_overlap_cancelled_returns_the_start():
    graph = _side_branch()
    cancel = threading.Event()
    cancel.set()
    start = checkpoint_all(graph, "cpu")
    found = optimize_overlap(graph, start, cancel=cancel)
    assert found.schedule == start
    assert (found.makespan_ms, found.converged) == (9.0, False)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_overlap_on_random_graphs_is_valid_and_never_worse(doc):
    graph = graph_from_dict(doc)
    for method in ("greedy", "checkpoint-all"):
        result = solve(graph, method)
        if not result.ok:
            continue
        found = optimize_overlap(graph, result.schedule, time_limit_s=2.0, patience=3)
        check_schedule(graph, found.schedule)
        assert found.makespan_ms <= found.start_makespan_ms + 1e-9
        assert found.makespan_ms == pytest.approx(concurrent_makespan(graph, found.schedule))
        assert found.makespan_ms <= found.layout.serial_ms + 1e-9


def test_overlap_method_runs_through_solve_and_the_command_line(tmp_path, capsys):
    """XEngine's serial optimum of the side branch is a (CPU) + b (GPU) + c (CPU): 3 + 1 + 3 =
    7 ms serial, 6 ms concurrent, which is the lower bound: the method returns 6 ms."""
    graph = _side_branch()
    result = solve(graph, "overlap", SolveOptions(time_limit_s=10))
    assert result.ok and result.method == "overlap"
    assert result.timeline.total_ms == check_schedule(graph, result.schedule).total_ms
    assert concurrent_makespan(graph, result.schedule) == 6.0
    assert "concurrent makespan 6 ms" in result.message
    path = tmp_path / "side.graph.json"
    save_graph(graph, path)
    assert main(["solve", str(path), "--method", "overlap", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["concurrent_ms"] == 6.0
    with pytest.raises(XEngineError, match="overlap runs on all devices"):
        parse_method(graph, "overlap:gpu")
