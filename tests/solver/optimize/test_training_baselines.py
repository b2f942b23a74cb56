"""Training graphs (model.md §6), baselines (§5) and memory landmarks, on hand-checked graphs."""

from __future__ import annotations

import pytest

from solver.document.generators import unit_chain
from solver.document.graph import Device, Edge, Node, make_graph
from solver.document.training import build_training_graph
from solver.document.units import format_size
from solver.editing.edits import set_node_fields
from solver.execution.simulate import check_schedule
from solver.optimize.baselines import checkpoint_all, chen_candidates, chen_greedy, chen_sqrtn
from solver.optimize.bounds import (
    explain_infeasible,
    lower_bound,
    no_remat_peak,
    node_requirement,
)
from solver.optimize.methods import compare, solve


def _chain(layers: int, budget: int = 100):
    nodes = [Node(f"f{i}", 1, {"cpu": 1.0}) for i in range(layers)]
    edges = [Edge(f"f{i}", f"f{i + 1}") for i in range(layers - 1)]
    return make_graph("chain", [Device("cpu", memory_limit=budget)], nodes, edges)


def test_training_graph_of_a_chain_is_checkmates_unit_chain():
    # Checkmate's unit chain = a chain whose backward reads its own output, not its input.
    train = build_training_graph(
        _chain(4), saves_input=lambda n: False, saves_output=lambda n: True
    )
    reference = unit_chain(4)
    assert train.n == reference.n == 9
    assert train.edge_pairs == reference.edge_pairs
    assert [n.kind for n in train.nodes] == ["forward"] * 4 + ["loss"] + ["backward"] * 4


def test_training_graph_default_rules_and_costs():
    forward = make_graph(
        "diamond",
        [Device("cpu", memory_limit=100)],
        [Node("a", 2, {"cpu": 1.0}), Node("b", 3, {"cpu": 2.0}), Node("c", 5, {"cpu": 4.0})],
        [Edge("a", "b"), Edge("a", "c"), Edge("b", "c")],
    )
    train = build_training_graph(forward, backward_memory={"c": 7})
    ids = [n.id for n in train.nodes]
    assert ids == ["a", "b", "c", "loss", "c.grad", "b.grad", "a.grad"]
    pairs = {(train.nodes[i].id, train.nodes[k].id) for i, k in train.edge_pairs}
    assert {
        ("c", "loss"),
        ("loss", "c.grad"),
        ("c.grad", "b.grad"),
        ("c.grad", "a.grad"),
        ("b.grad", "a.grad"),
        ("a", "b.grad"),
        ("a", "c.grad"),
        ("b", "c.grad"),
    } <= pairs
    assert train.node("b.grad").cost == {"cpu": 4.0}  # 2x forward
    assert train.node("c.grad").memory == 7 and train.node("b.grad").memory == 3
    assert train.node("a.grad").of == "a"


def test_landmarks_of_the_unit_chain():
    graph = unit_chain(5)
    assert lower_bound(graph) == 3
    assert no_remat_peak(graph) == 5 + 2  # n + 2: the Checkmate threshold for no recomputation
    assert explain_infeasible(graph.with_memory_limits({"cpu": 2})).count("needs 3 B") >= 1
    assert explain_infeasible(graph.with_memory_limits({"cpu": 3})) is None


def test_checkpoint_all_needs_exactly_the_no_remat_peak():
    graph = unit_chain(6)
    timeline = check_schedule(graph, checkpoint_all(graph, "cpu"))
    assert timeline.peaks["cpu"] == no_remat_peak(graph)
    assert timeline.recomputations == 0 and timeline.total_ms == graph.n


def test_chen_sqrtn_uses_less_memory_than_checkpoint_all_and_recomputes_each_segment_once():
    graph = unit_chain(16)
    timeline = check_schedule(graph, chen_sqrtn(graph, "cpu"))
    assert timeline.peaks["cpu"] < no_remat_peak(graph)
    assert chen_candidates(graph) == list(range(1, 16))  # cut vertices of the path, and its end
    # every forward node is recomputed at most once (segments are kept once recomputed)
    recomputed = [op.node for op in timeline.ops if op.recompute]
    assert len(recomputed) == len(set(recomputed)) > 0


def test_chen_greedy_fits_a_tight_budget_and_is_never_better_than_the_optimum():
    graph = unit_chain(10, budget=7)
    greedy = chen_greedy(graph, "cpu")
    assert greedy.timeline.valid and greedy.timeline.peaks["cpu"] <= 7
    optimum = solve(graph, "xengine")
    assert optimum.timeline.total_ms <= greedy.timeline.total_ms


def test_infeasible_baseline_says_why():
    result = solve(unit_chain(4, budget=4), "checkpoint-all")
    assert not result.ok
    assert "needs 7 bytes" in result.message or "needs" in result.message


def test_comparison_speedup_over_best_single_device():
    from handmade import fan_in_graph

    comparison = compare(fan_in_graph(gpu_budget=2))
    best = comparison.best_single_device
    assert best.method == "checkmate:cpu" and best.timeline.total_ms == pytest.approx(30.0)
    xengine = comparison.results[-1]
    assert xengine.method == "xengine"
    assert comparison.speedup(xengine) == pytest.approx(30.0 / 14.0)
    infeasible = [r for r in comparison.results if not r.ok]
    assert infeasible and all("needs 3 B" in r.message for r in infeasible)


def test_greedy_heterogeneous_moves_a_node_that_does_not_fit_and_copies_its_inputs():
    from handmade import fan_in_graph

    result = solve(fan_in_graph(gpu_budget=2), "greedy")
    assert result.ok and result.timeline.total_ms == pytest.approx(14.0)  # here it is optimal
    ops = [(op.node, op.device, dict(op.inputs)) for _, op in result.schedule.operations]
    assert ops == [("a", "gpu", {}), ("b", "gpu", {}), ("c", "cpu", {"a": "gpu", "b": "gpu"})]


def test_chen_heterogeneous_beats_the_cpu_when_the_gpu_cannot_hold_every_node():
    from handmade import fan_in_graph

    from solver.optimize.greedy import cheapest_placement, chen_heterogeneous

    graph = fan_in_graph(gpu_budget=2)  # c needs 3 bytes with its inputs: only the CPU has room
    assert cheapest_placement(graph) == ["gpu", "gpu", "cpu"]
    timeline = check_schedule(graph, chen_heterogeneous(graph).schedule)
    assert timeline.total_ms == pytest.approx(14.0)  # the optimum; the CPU alone takes 30
    assert solve(graph, "greedy").timeline.total_ms == pytest.approx(14.0)


def test_chen_heterogeneous_repairs_its_placement_until_a_candidate_fits():
    from solver.document.examples import example_path
    from solver.document.graph_io import load_graph
    from solver.optimize.greedy import chen_heterogeneous

    graph = load_graph(example_path("chain"))  # over the cheapest placement nothing fits
    found = chen_heterogeneous(graph)
    timeline = check_schedule(graph, found.schedule)
    optimum = solve(graph, "xengine").timeline.total_ms  # 9.02 ms
    cpu_only = solve(graph, "checkmate:cpu").timeline.total_ms  # 35 ms
    assert optimum - 1e-9 <= timeline.total_ms < cpu_only / 2
    assert {op.device for _, op in found.schedule.operations} == {"cpu", "gpu"}
    assert not chen_heterogeneous(graph, repairs=0).schedule  # without repairs: no fit


def test_infeasibility_shows_bytes_when_the_rounded_sizes_read_the_same():
    """A budget 48 bytes short read "needs 648 KiB (663600 bytes ...) ... have cpu 648 KiB"."""
    graph = set_node_fields(unit_chain(2), "n1", memory=663_000)
    need = max(node_requirement(graph, k) for k in range(graph.n))
    short = graph.with_memory_limits({"cpu": need - 48})
    message = explain_infeasible(short)
    assert f"have cpu {format_size(need - 48)} ({need - 48} bytes)" in message
    assert format_size(need - 48) == format_size(need)
    roomy = explain_infeasible(graph.with_memory_limits({"cpu": need // 2}))
    assert f"have cpu {format_size(need // 2)}; raise a budget" in roomy  # no bytes needed
