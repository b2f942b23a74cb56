"""Workspace memory (docs/spec-notes.md, "Workspace memory"): bytes a node needs only while it
runs. Hand-derived cases through the file format, the simulator, the bounds, the concurrent
layout, the explanations and both MIQPs (solved model and the paper's reference)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import small_graphs

import solver.optimize.miqp as miqp
from solver.document.graph import Device, Edge, Graph, Node, make_graph
from solver.document.graph_io import graph_from_dict, graph_to_dict, load_graph, save_graph
from solver.editing.edits import set_node_fields
from solver.errors import GraphFormatError
from solver.execution.concurrent import concurrent_layout
from solver.execution.explain import explain_op
from solver.execution.simulate import check_schedule, simulate
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.baselines import checkpoint_all
from solver.optimize.bounds import explain_infeasible, lower_bound, no_remat_peak
from solver.optimize.greedy import greedy_heterogeneous
from solver.optimize.methods import solve
from solver.optimize.miqp import build_array_model, memory_units
from solver.optimize.offload import build_offload_model
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.optimize.xengine import build_model
from solver.status import SolveStatus

EXACT = SolveOptions(time_limit_s=30, gap_rel=0.0, warm_start=False, improve=False)


def chain3(budget: int, workspace: int) -> Graph:
    """``a -> b -> c`` on one GPU, 1 byte each, ``b`` with a workspace."""
    nodes = [
        Node("a", 1, {"gpu": 1.0}),
        Node("b", 1, {"gpu": 1.0}, workspace=workspace),
        Node("c", 1, {"gpu": 1.0}),
    ]
    return make_graph("c3", [Device("gpu", "gpu", budget)], nodes, [Edge("a", "b"), Edge("b", "c")])


def skip4(budget: int, workspace: int) -> Graph:
    """``a -> b -> c -> d`` and ``a -> d`` on one GPU, 1 byte each; ``a`` costs 2 ms, the rest
    1 ms; ``c`` has a workspace."""
    nodes = [
        Node("a", 1, {"gpu": 2.0}),
        Node("b", 1, {"gpu": 1.0}),
        Node("c", 1, {"gpu": 1.0}, workspace=workspace),
        Node("d", 1, {"gpu": 1.0}),
    ]
    edges = [Edge("a", "b"), Edge("b", "c"), Edge("c", "d"), Edge("a", "d")]
    return make_graph("s4", [Device("gpu", "gpu", budget)], nodes, edges)


# ----- the file format ---------------------------------------------------------------------------
def _doc(workspace: object) -> dict:
    return {
        "format": "remat-graph",
        "devices": [{"name": "cpu", "memory": 100}],
        "nodes": [
            {"id": "a", "memory": 8, "cost": {"cpu": 1}},
            {"id": "b", "memory": 8, "workspace": workspace, "cost": {"cpu": 1}, "inputs": ["a"]},
        ],
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "g.graph.json: node 'b', field 'workspace': -1 is negative; sizes must be >= 0"),
        (
            1.5,
            "g.graph.json: node 'b', field 'workspace': 1.5 is not a whole number of bytes; "
            "sizes must be >= 0",
        ),
        (
            "abc",
            "g.graph.json: node 'b', field 'workspace': 'abc' is not a size; write bytes or a "
            "number with B, kB, MB, GB, KiB, MiB or GiB",
        ),
        (
            True,
            "g.graph.json: node 'b': field 'workspace' is bool; "
            "it must be a int or float or string",
        ),
    ],
)
def test_bad_workspace_values_get_one_line_naming_the_node_and_the_fix(value, message):
    with pytest.raises(GraphFormatError) as info:
        graph_from_dict(_doc(value), "g.graph.json")
    assert str(info.value) == message


def test_workspace_reads_units_like_memory_and_saves_only_when_not_zero():
    graph = graph_from_dict(_doc("1 KiB"))
    assert graph.node("b").workspace == 1024 and graph.workspace.tolist() == [0, 1024]
    saved = graph_to_dict(graph)["nodes"]
    assert "workspace" not in saved[0] and saved[1]["workspace"] == 1024
    assert list(saved[1])[:5] == ["id", "kind", "memory", "workspace", "cost"]


def test_a_node_built_in_code_with_a_bad_workspace_is_refused():
    with pytest.raises(GraphFormatError) as info:
        set_node_fields(chain3(9, 0), "b", workspace=2.5)
    assert str(info.value) == (
        "node 'b', field 'workspace': 2.5 is not a whole number of bytes; "
        "give bytes >= 0 as an integer or a size such as '4 MiB'"
    )
    with pytest.raises(GraphFormatError, match="field 'workspace': -3 is negative"):
        set_node_fields(chain3(9, 0), "b", workspace=-3)


def test_bundled_graphs_save_byte_identically(tmp_path):
    """A file without workspaces (every bundled graph but the two ATen imports) saves as it
    was; the ATen imports save their workspaces back as they are."""
    from solver.document.examples import bundled_graphs

    for name, path in bundled_graphs().items():
        out = tmp_path / f"{name}.graph.json"
        save_graph(load_graph(path), out)
        assert out.read_bytes() == path.read_bytes(), name
    encoder = json.loads(bundled_graphs()["encoder-aten"].read_text())
    assert not [n for n in encoder["nodes"] if n["id"].endswith(".workspace")]
    assert sum(n.get("workspace", 0) for n in encoder["nodes"]) == 72433664


# ----- simulator, bounds, concurrent layout ----------------------------------------------------
def test_the_workspace_counts_only_while_its_node_runs():
    # checkpoint-all: stage 1 runs b with a resident (1) + output (1) + workspace (6) = 8;
    # stage 2 runs c with b resident: 2. No tensor carries the 6 bytes after b.
    graph = chain3(8, 6)
    timeline = check_schedule(graph, checkpoint_all(graph, "gpu"))
    assert [(e.node, e.memory, e.workspace) for e in timeline.ops] == [
        ("a", 1, 0),
        ("b", 8, 6),
        ("c", 2, 0),
    ]
    assert timeline.peaks == {"gpu": 8}
    curve = timeline.memory["gpu"]
    # steps at t = 0 (a runs), 1 (b runs), 2 (c runs, b resident), 3 (end: nothing kept)
    assert curve.times.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert curve.bytes.tolist() == [1, 8, 2, 0]
    assert curve.workspace.tolist() == [0, 6, 0, 0]
    # bytes = the resident tensors' sizes + the running workspace, at every step
    sizes = {n.id: n.memory for n in graph.nodes}
    totals = [sum(sizes[x] for x in names) for names in curve.resident]
    assert (np.array(totals) + curve.workspace).tolist() == curve.bytes.tolist()
    assert explain_op(graph, checkpoint_all(graph, "gpu"), timeline, 1) == (
        "stage 1: compute b on gpu (1 ms), with a workspace of 6 B while it runs"
    )


def test_a_workspace_that_overflows_is_named_in_the_violation():
    graph = chain3(3, 2)
    violation = simulate(graph, checkpoint_all(graph, "gpu")).violation
    assert violation is not None and violation.rule == "memory"
    assert str(violation) == (
        "stage 1: b on gpu needs 4 bytes in memory (resident 1, output 1, copied inputs 0, "
        "workspace 2) but the budget is 3; without its workspace it would fit (2 bytes)"
    )
    assert violation.numbers == {"used": 4, "budget": 3, "workspace": 2}


def test_bounds_include_the_workspace():
    # b needs its output, its input and its workspace: 1 + 1 + 2 = 4 bytes
    graph = chain3(3, 2)
    assert lower_bound(graph) == 4 and lower_bound(chain3(3, 0)) == 2
    assert no_remat_peak(graph) == 4 and no_remat_peak(chain3(3, 0)) == 2
    assert explain_infeasible(chain3(3, 0)) is None
    assert explain_infeasible(graph) == (
        "no schedule can exist: node 'b' needs 4 B (4 bytes: its output and inputs, and a "
        "workspace of 2 B, without which it would fit) on one device, but the devices that "
        "can run it have gpu 3 B; raise a budget"
    )


def test_a_workspace_makes_a_feasible_budget_infeasible_and_the_solver_says_why():
    assert solve(chain3(3, 0), "xengine", EXACT).timeline.total_ms == 3.0
    result = solve(chain3(3, 2), "xengine", EXACT)
    assert result.status is SolveStatus.INFEASIBLE and result.schedule is None
    assert "a workspace of 2 B, without which it would fit" in result.message
    assert greedy_heterogeneous(chain3(3, 2)).reason == (
        "greedy: no device has room for b (3 bytes with its workspace, and inputs)"
    )


def test_the_concurrent_layout_holds_the_workspace_from_start_to_end():
    graph = chain3(8, 6)
    layout = concurrent_layout(graph, checkpoint_all(graph, "gpu"))
    assert layout.makespan_ms == 3.0  # one device: the serial cost
    assert [(e.node, e.memory, e.workspace) for e in layout.timeline.ops] == [
        ("a", 1, 0),
        ("b", 8, 6),
        ("c", 2, 0),
    ]
    curve = layout.timeline.memory["gpu"]
    assert int(curve.bytes.max()) == 8
    assert curve.workspace.tolist()[int(curve.bytes.argmax())] == 6
    assert int(curve.bytes[-1]) == 0 and int(curve.workspace[-1]) == 0


# ----- the MIQP --------------------------------------------------------------------------------
def test_a_workspace_forces_a_recomputation_at_the_hand_derived_optimum():
    """skip4 with budget 4. Without a workspace nothing is recomputed: the peak is 3 (a, b, c
    while c runs; a, c, d while d runs), cost 2 + 1 + 1 + 1 = 5 ms. With W_c = 2, keeping
    ``a`` through stage 2 needs a + b + c + W_c = 5 > 4 (b is c's input, and a recomputation of
    a in stage 2 runs before c), so a is dropped after b and recomputed in stage 3, before d:
    stage 2 holds b + c + W_c = 4, stage 3 c + a + d = 3; cost 5 + 2 (a again) = 7 ms. With a
    budget of 5, a can be kept again: 5 ms."""
    for budget, workspace, cost, peak, recomputed in [
        (4, 0, 5.0, None, 0),  # peak 3 or 4: a schedule may keep b longer for free
        (4, 2, 7.0, 4, 1),
        (5, 2, 5.0, 5, 0),
    ]:
        graph = skip4(budget, workspace)
        result = solve_xengine(graph, EXACT)
        assert result.status is SolveStatus.OPTIMAL, result.message
        assert result.objective == pytest.approx(cost)
        replay = check_schedule(graph, result.schedule)  # the simulator replays the solver
        assert replay.total_ms == pytest.approx(cost)
        assert replay.peaks["gpu"] <= budget
        if peak is not None:  # forced: c's workspace beside b and c (and a, when kept)
            assert replay.peaks == {"gpu": peak}
        assert replay.recomputations == recomputed
        if recomputed:
            assert [(e.stage, e.node) for e in replay.ops if e.recompute] == [(3, "a")]
            j = next(j for j, e in enumerate(replay.ops) if e.recompute)
            assert explain_op(graph, result.schedule, replay, j) == (
                "stage 3: recompute a on gpu (2 ms) — its output was freed on gpu after b used "
                "it in stage 1, to stay under 4 B; keeping it would need 5 B in stage 2, 2 B of "
                "it the workspace of c"
            )
        # the paper's formulation, line by line, agrees
        reference = run_backend(build_model(graph).prob, BackendOptions(time_limit_s=30))
        assert reference.objective == pytest.approx(cost)


def _triples(program) -> set[tuple[int, int, float]]:
    return set(
        zip(program.rows.tolist(), program.cols.tolist(), program.vals.tolist(), strict=True)
    )


def test_a_workspace_adds_w_times_r_to_its_own_budget_rows_and_nothing_else(monkeypatch):
    """Same graph with W_c = 0 and W_c = 2 (a multiple of the gcd, so units agree): the models
    have the same columns, bounds and rows; the only new coefficients are 2 * R[d,t,c] in the
    budget row of (d, t, c), the row that holds U[d,t,c] and the copies, never the
    recurrence's equality rows (the workspace is not carried to the next node). The conflict
    cuts (solver/optimize/cuts.py, tested there) are left out: a workspace adds some."""
    monkeypatch.setattr(miqp, "add_conflict_cuts", lambda model, builder: 0)
    for build in (build_array_model, build_offload_model):
        plain, working = build(skip4(4, 0)), build(skip4(4, 2))
        a, b = plain.program, working.program
        for name in ("cost", "col_lower", "col_upper", "integer", "row_lower", "row_upper"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        added = _triples(b) - _triples(a)
        assert _triples(a) <= _triples(b)
        c = working.graph.index["c"]
        expected_cols = {working.R[key] for key in working.U if key[2] == c}
        assert {col for _, col, _ in added} == expected_cols and len(added) == len(expected_cols)
        assert {val for _, _, val in added} == {2.0}
        for row, col, _ in added:
            key = next(k for k, r in working.R.items() if r == col)
            assert (row, working.U[key], 1.0) in _triples(b)
            assert b.row_lower[row] == -np.inf  # the budget row, not an equality row


def test_workspace_enters_the_units_gcd():
    # sizes 4 each: unit 4 without a workspace; a workspace of 6 makes the gcd 2
    nodes = [Node("a", 4, {"gpu": 1.0}), Node("b", 4, {"gpu": 1.0}, workspace=6)]
    graph = make_graph("g", [Device("gpu", "gpu", 12)], nodes, [Edge("a", "b")])
    units = memory_units(graph)
    assert units.unit.tolist() == [2.0] and units.all_exact
    assert units.sizes.tolist() == [[2.0, 2.0]] and units.workspace.tolist() == [[0.0, 3.0]]
    assert memory_units(set_node_fields(graph, "b", workspace=0)).unit.tolist() == [4.0]


@st.composite
def graphs_with_workspaces(draw):
    doc = draw(small_graphs())
    for node in doc["nodes"]:
        node["workspace"] = draw(st.integers(0, 4))
    return doc


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_with_workspaces())
def test_solved_model_and_reference_agree_with_workspaces(doc):
    graph = graph_from_dict(doc)
    reference = run_backend(build_model(graph).prob, BackendOptions(time_limit_s=30, gap_rel=0.0))
    result = solve_xengine(graph, EXACT)
    if reference.status is SolveStatus.INFEASIBLE:
        assert result.status is SolveStatus.INFEASIBLE
        return
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective == pytest.approx(reference.objective, abs=1e-6)
    replay = check_schedule(graph, result.schedule)
    assert replay.total_ms == pytest.approx(reference.objective, abs=1e-6)
