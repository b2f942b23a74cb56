"""Optimal objectives of the MIQP on graphs whose optimum is known independently."""

from __future__ import annotations

import threading
import time

import pytest
from checkmate_reference import checkmate_optimum
from handmade import fan_in_graph, two_node_graph

from solver.document.generators import unit_chain
from solver.document.graph import Device, Link
from solver.document.training import build_training_graph
from solver.execution.simulate import check_schedule
from solver.optimize.methods import solve
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.status import SolveStatus

OPTIONS = SolveOptions(time_limit_s=60)


def _cost(graph) -> float:
    result = solve_xengine(graph, OPTIONS)
    assert result.status is SolveStatus.OPTIMAL, result.message
    timeline = check_schedule(graph, result.schedule)  # replayed by the simulator
    assert timeline.total_ms == pytest.approx(result.objective, abs=1e-6)
    return timeline.total_ms


@pytest.mark.parametrize(("budget", "expected"), [(3, 15), (4, 11), (5, 10), (6, 9), (100, 9)])
def test_unit_chain_of_four_layers_matches_checkmate_paper(budget, expected):
    assert _cost(unit_chain(4, budget=budget)) == pytest.approx(expected)


@pytest.mark.parametrize("layers", [2, 3, 5, 6])
def test_unit_chain_closed_forms(layers):
    n = layers
    assert _cost(unit_chain(n, budget=3)) == pytest.approx((2 * n + 1) + n * (n - 1) / 2)
    assert _cost(unit_chain(n, budget=n + 2)) == pytest.approx(2 * n + 1)


def test_unit_chain_budget_two_is_infeasible_with_explanation():
    result = solve_xengine(unit_chain(4, budget=2), OPTIONS)
    assert result.status is SolveStatus.INFEASIBLE
    assert result.schedule is None
    assert "needs 3 B" in result.message and "raise a budget" in result.message


def test_switching_devices_pays_off_when_the_copy_is_cheap():
    # a on cpu (1) + copy (3) + b on gpu (1) = 5 beats 11 on either device alone.
    graph = two_node_graph(cpu_to_gpu_ms=3.0)
    assert _cost(graph) == pytest.approx(5.0)
    result = solve_xengine(graph, OPTIONS)
    ops = [(op.node, op.device, dict(op.inputs)) for _, op in result.schedule.operations]
    assert ops == [("a", "cpu", {}), ("b", "gpu", {"a": "cpu"})]


def test_switching_devices_does_not_pay_off_when_the_copy_is_dear():
    assert _cost(two_node_graph(cpu_to_gpu_ms=12.0)) == pytest.approx(11.0)


def test_no_link_means_no_transfer():
    assert _cost(two_node_graph(cpu_to_gpu_ms=None)) == pytest.approx(11.0)


def test_node_too_big_for_gpu_runs_on_cpu_with_copies():
    # a, b on gpu (1 + 1), copy both to the cpu (1 + 1), c on cpu (10) = 14.
    assert _cost(fan_in_graph(gpu_budget=2)) == pytest.approx(14.0)
    assert _cost(fan_in_graph(gpu_budget=3)) == pytest.approx(3.0)
    assert _cost(fan_in_graph(gpu_budget=2, link=False)) == pytest.approx(30.0)


def test_three_devices_each_run_their_cheapest_node():
    from solver.document.graph import Edge, Node, make_graph

    names = ["d0", "d1", "d2"]
    devices = [Device(x, "other", 100) for x in names]
    links = [Link(a, b, 1000.0, 0.0) for a in names for b in names if a != b]  # 1 byte: 1 ms
    nodes = [
        Node(f"n{j}", 1, {x: (1.0 if x == f"d{j}" else 10.0) for x in names}) for j in range(3)
    ]
    graph = make_graph("three", devices, nodes, [Edge("n0", "n1"), Edge("n1", "n2")], links)
    assert _cost(graph) == pytest.approx(5.0)  # 1 + copy 1 + 1 + copy 1 + 1


@pytest.mark.parametrize("budget", [3, 4, 5, 7])
def test_one_device_equals_independent_checkmate_milp(budget):
    forward = unit_chain(3, budget=budget)  # any DAG will do; a training graph of a diamond:
    from solver.document.graph import Edge, Node, make_graph

    diamond = make_graph(
        "diamond",
        forward.devices,
        [
            Node("a", 2, {"cpu": 1.0}),
            Node("b", 1, {"cpu": 3.0}),
            Node("c", 3, {"cpu": 2.0}),
            Node("d", 1, {"cpu": 1.0}),
        ],
        [Edge("a", "b"), Edge("a", "c"), Edge("b", "d"), Edge("c", "d")],
    )
    train = build_training_graph(diamond).with_memory_limits({"cpu": budget + 4})
    for graph in (unit_chain(3, budget=budget), train):
        expected = checkmate_optimum(graph, graph.devices[0].activation_budget)
        result = solve_xengine(graph, OPTIONS)
        if expected is None:
            assert result.status is SolveStatus.INFEASIBLE
        else:
            assert result.status is SolveStatus.OPTIMAL
            assert check_schedule(graph, result.schedule).total_ms == pytest.approx(expected)


def test_two_identical_devices_with_free_transfers_never_worse_than_one():
    one = unit_chain(5, budget=3)
    devices = [Device("g0", "gpu", 3), Device("g1", "gpu", 3)]
    links = [Link("g0", "g1", 1e15, 0.0), Link("g1", "g0", 1e15, 0.0)]
    two = unit_chain(5, devices=devices)
    from dataclasses import replace

    two = replace(two, links=tuple(links))
    single = _cost(one)
    assert single == pytest.approx(21.0)
    assert _cost(two) <= single + 1e-6


def test_checkmate_method_runs_each_device_alone_and_keeps_the_best():
    result = solve(fan_in_graph(gpu_budget=3), "checkmate", OPTIONS)
    assert result.method == "checkmate:gpu"
    assert result.timeline.total_ms == pytest.approx(3.0)
    assert {op.device for _, op in result.schedule.operations} == {"gpu"}


def test_cancel_returns_quickly_with_a_replayed_incumbent():
    graph = unit_chain(24, budget=10)  # Chen's greedy fits: the warm start is an incumbent
    cancel = threading.Event()
    seen_incumbent = threading.Event()

    def on_progress(progress):
        if progress.incumbent is not None:
            seen_incumbent.set()

    outcome = {}
    worker = threading.Thread(
        target=lambda: outcome.setdefault(
            "result", solve_xengine(graph, SolveOptions(time_limit_s=120), on_progress, cancel)
        )
    )
    worker.start()
    assert seen_incumbent.wait(60), "no incumbent within 60 s"
    stopped = time.perf_counter()
    cancel.set()
    worker.join(10)
    assert not worker.is_alive()
    assert time.perf_counter() - stopped < 2.0
    result = outcome["result"]
    if result.status is SolveStatus.OPTIMAL:  # a fast machine may finish first
        return
    assert result.status is SolveStatus.CANCELLED
    assert result.ok
    check_schedule(graph, result.schedule)
    assert not _cbc_children(), "a cbc process outlived the cancelled solve"


def _cbc_children() -> list[str]:
    import os
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and "cbc" in cmdline:
            found.append(cmdline)
    return found


def test_budget_exactly_at_the_lower_bound_is_not_lost_to_memory_scaling():
    # A 16 GiB host next to a tight GPU once coarsened the GPU's memory rows: XEngine then
    # found 9.02 ms where the GPU alone does 4.93 ms. Each device now has its own unit.
    from solver.document.examples import example_path
    from solver.document.graph_io import load_graph
    from solver.optimize.bounds import lower_bound

    graph = load_graph(example_path("chain"))
    graph = graph.with_memory_limits({"gpu": lower_bound(graph, "gpu")})
    alone = solve(graph, "checkmate:gpu", OPTIONS)
    both = solve(graph, "xengine", OPTIONS)
    assert alone.ok and both.ok
    assert both.timeline.total_ms <= alone.timeline.total_ms + 1e-9
