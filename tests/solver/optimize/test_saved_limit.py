"""The saved-bytes limit: at most ``L_d`` bytes resident when the backward starts.

On Checkmate's unit chain with ``n`` layers (unit sizes and costs) and the peak unbounded, every
forward node and the loss is read in the backward, so each of the ``n + 1`` tensors not held
across the boundary is computed once more: the optimum is ``(2n + 1) + (n + 1 - L)``.
"""

from __future__ import annotations

import json

import pytest

from solver.document.generators import unit_chain
from solver.document.graph import Device, Node, make_graph
from solver.document.graph_io import graph_from_dict, graph_to_dict
from solver.errors import GraphFormatError
from solver.execution.simulate import simulate
from solver.optimize.baselines import checkpoint_all
from solver.optimize.methods import solve
from solver.optimize.miqp import build_array_model
from solver.optimize.solve import SolveOptions
from solver.results.key import result_key

LAYERS = 4


@pytest.mark.parametrize("limit", [0, 2, 5])
def test_saved_limit_forces_the_known_optimum(limit: int) -> None:
    graph = unit_chain(LAYERS, budget=100).with_saved_limits({"cpu": limit})
    result = solve(graph, "checkmate:cpu", SolveOptions(time_limit_s=30))
    assert result.status.value == "optimal"
    expected = (2 * LAYERS + 1) + max(LAYERS + 1 - limit, 0)
    assert result.timeline.total_ms == pytest.approx(expected)
    replay = simulate(graph, result.schedule)
    assert replay.valid
    assert replay.saved_bytes == {"cpu": min(limit, LAYERS + 1)}


def test_saved_limit_with_a_peak_budget_holds_both() -> None:
    graph = unit_chain(LAYERS, budget=4).with_saved_limits({"cpu": 1})
    result = solve(graph, "checkmate:cpu", SolveOptions(time_limit_s=30))
    replay = simulate(graph, result.schedule)
    assert replay.valid
    assert replay.saved_bytes["cpu"] <= 1 and replay.peaks["cpu"] <= 4
    alone = solve(unit_chain(LAYERS, budget=4), "checkmate:cpu", SolveOptions(time_limit_s=30))
    assert result.timeline.total_ms > alone.timeline.total_ms  # the limit binds


def test_simulate_refuses_a_schedule_over_the_saved_limit() -> None:
    graph = unit_chain(LAYERS, budget=100).with_saved_limits({"cpu": 2})
    replay = simulate(graph, checkpoint_all(graph, "cpu"))
    assert replay.violation is not None and replay.violation.rule == "saved"
    assert replay.violation.stage == graph.boundary == LAYERS + 1
    assert "holds 5 B when the backward starts" in str(replay.violation)
    assert replay.summary()["saved_bytes"] == {"cpu": 5}


def test_saved_row_is_one_row_at_the_boundary() -> None:
    graph = unit_chain(LAYERS, budget=100)
    rows = build_array_model(graph).num_constraints
    limited = build_array_model(graph.with_saved_limits({"cpu": 3}))
    assert limited.num_constraints == rows + 1


def test_saved_limit_round_trips_and_keys_apart() -> None:
    graph = unit_chain(LAYERS, budget=100)
    limited = graph.with_saved_limits({"cpu": 3})
    loaded = graph_from_dict(json.loads(json.dumps(graph_to_dict(limited))))
    assert loaded.device("cpu").saved_limit == 3
    options = SolveOptions()
    assert result_key(graph, "checkmate:cpu", options) != result_key(
        limited, "checkmate:cpu", options
    )


def test_saved_limit_needs_a_backward_node() -> None:
    with pytest.raises(GraphFormatError, match="unknown device 'gpu'"):
        unit_chain(LAYERS, budget=100).with_saved_limits({"gpu": 1})
    plain = make_graph("a", [Device("cpu", memory_limit=9)], [Node("a", 1, {"cpu": 1.0})])
    with pytest.raises(GraphFormatError, match="needs a backward node"):
        plain.with_saved_limits({"cpu": 1})


def test_cli_saved_limit_reaches_the_solve(tmp_path, capsys) -> None:
    from solver.cli import main
    from solver.document.graph_io import save_graph

    path = tmp_path / "chain.graph.json"
    save_graph(unit_chain(LAYERS, budget=100), path)
    assert main(["solve", str(path), "--saved", "cpu=2", "--json", "--no-store"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["saved_bytes"] == {"cpu": 2}
    assert report["summary"]["total_ms"] == pytest.approx(2 * LAYERS + 1 + LAYERS + 1 - 2)


def test_cli_says_what_is_saved_against_the_limit(tmp_path, capsys) -> None:
    from solver.cli import main
    from solver.document.graph_io import save_graph

    path = tmp_path / "chain.graph.json"
    save_graph(unit_chain(LAYERS, budget=100), path)
    assert main(["solve", str(path), "--saved", "cpu=2", "--no-store"]) == 0
    assert "saved      cpu: 2 B held when the backward starts, of 2 B" in capsys.readouterr().out
