"""The saved-limit start: a valid schedule at once under a saved-bytes limit.

On Checkmate's unit chain with ``n`` layers and the peak unbounded the optimum under a limit of
``L`` bytes is ``(2n + 1) + (n + 1 - L)`` (tests/solver/optimize/test_saved_limit.py): each
tensor the backward reads and the boundary does not hold is computed once more. The start
holds ``L`` unit tensors and recomputes each other one once, so it is that optimum.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.document.generators import unit_chain
from solver.document.graph import Device, Edge, Graph, Node, make_graph
from solver.execution.simulate import simulate
from solver.optimize.methods import solve
from solver.optimize.saved_start import saved_limit_start
from solver.optimize.solve import SolveOptions


@pytest.mark.parametrize(("layers", "limit"), [(4, 0), (4, 2), (4, 5), (9, 3)])
def test_the_start_is_the_known_optimum_on_the_unit_chain(layers: int, limit: int) -> None:
    graph = unit_chain(layers, budget=1000).with_saved_limits({"cpu": limit})
    schedule, timeline = saved_limit_start(graph)
    assert timeline.total_ms == pytest.approx((2 * layers + 1) + max(layers + 1 - limit, 0))
    replay = simulate(graph, schedule)
    assert replay.valid and replay.saved_bytes["cpu"] == min(limit, layers + 1)


def test_no_start_without_a_limit_or_below_the_nodes_computed_once() -> None:
    plain = unit_chain(4, budget=1000)
    assert saved_limit_start(plain) is None
    once = replace(plain, nodes=tuple(replace(n, recomputable=n.id != "n0") for n in plain.nodes))
    assert saved_limit_start(once.with_saved_limits({"cpu": 0})) is None
    schedule, timeline = saved_limit_start(once.with_saved_limits({"cpu": 1}))
    assert "n0" in schedule.stages[once.boundary - 1].kept_on("cpu")
    assert timeline.recomputations == 4  # n1, n2, n3 and the loss, not n0


def test_a_solve_without_time_for_the_model_still_returns_the_start() -> None:
    graph = unit_chain(40, budget=10**6).with_saved_limits({"cpu": 7})
    result = solve(graph, "checkmate:cpu", SolveOptions(time_limit_s=0.01))
    assert result.schedule is not None
    replay = simulate(graph, result.schedule)
    assert replay.valid and replay.saved_bytes["cpu"] <= 7
    assert result.timeline.total_ms <= 81 + 41 - 7


def dropout_graph() -> Graph:
    """``x`` (1 B, 5 ms) -> ``draw`` (a random op, 4 B) -> ``mask`` (1 B) -> ``y`` -> ``loss``,
    and a backward ``grad`` that reads ``x``, ``mask`` and the loss: the draw is read in the
    forward only, but recomputing the mask in the backward would draw again. Each node once
    costs 10 ms. At a limit of 3 B the boundary holds ``x``, ``mask`` and the loss: 10 ms. At
    2 B one of them is recomputed, never the mask: the loss (with ``y``, 2 ms) for 12 ms, not
    ``x`` (5 ms). At 1 B both would be, and the mask alone stays: 5 + 2 more, 17 ms."""
    nodes = [
        Node("x", 1, {"cpu": 5.0}),
        Node("draw", 4, {"cpu": 1.0}, op="dropout", recomputable=False),
        Node("mask", 1, {"cpu": 1.0}),
        Node("y", 1, {"cpu": 1.0}),
        Node("loss", 1, {"cpu": 1.0}, kind="loss"),
        Node("grad", 1, {"cpu": 1.0}, kind="backward"),
    ]
    edges = [
        Edge("x", "draw"),
        Edge("draw", "mask"),
        Edge("x", "y"),
        Edge("mask", "y"),
        Edge("y", "loss"),
        Edge("loss", "grad"),
        Edge("x", "grad"),
        Edge("mask", "grad"),
    ]
    return make_graph("dropout", [Device("cpu", memory_limit=100)], nodes, edges)


@pytest.mark.parametrize(("limit", "optimum"), [(3, 10.0), (2, 12.0), (1, 17.0)])
def test_a_tensor_made_from_a_random_draw_is_held_not_recomputed(
    limit: int, optimum: float
) -> None:
    graph = dropout_graph().with_saved_limits({"cpu": limit})
    schedule, timeline = saved_limit_start(graph)
    assert timeline.valid and timeline.total_ms == pytest.approx(optimum)
    assert "mask" in schedule.stages[graph.boundary - 1].kept_on("cpu")
    assert simulate(graph, schedule).saved_bytes["cpu"] == limit
    exact = solve(graph, "checkmate:cpu", SolveOptions(time_limit_s=30, gap_rel=0.0))
    assert exact.timeline.total_ms == pytest.approx(optimum)


def test_no_start_when_the_masks_do_not_fit() -> None:
    assert saved_limit_start(dropout_graph().with_saved_limits({"cpu": 0})) is None
