"""The solved offloading model (solver.optimize.offload) against the reference: the spec's
formulation in PuLP (solver.optimize.xengine) with offloading written from docs/spec-notes.md,
"Offloading", without the solved model's reductions (Z kept, S and F on every device, memory
as the expanded sum). Equal optima on random graphs; the hand-derived chain in both."""

from __future__ import annotations

import pytest
from handmade import offload_chain
from hypothesis import HealthCheck, given, settings
from strategies import small_graphs

from solver.document.graph_io import graph_from_dict
from solver.execution.simulate import check_schedule
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.solve import SolveOptions, solve_offload
from solver.optimize.xengine import build_model
from solver.status import SolveStatus

EXACT = SolveOptions(time_limit_s=30, gap_rel=0.0, warm_start=False, improve=False)


def reference_optimum(graph, offload: bool) -> float | None:
    result = run_backend(
        build_model(graph, offload=offload).prob, BackendOptions(time_limit_s=30, gap_rel=0.0)
    )
    if result.status is SolveStatus.INFEASIBLE:
        return None
    assert result.status is SolveStatus.OPTIMAL
    return result.objective


@pytest.mark.parametrize(("link_ms", "expected"), [(1.0, 15.0), (2.0, 17.0), (100.0, 23.0)])
def test_reference_has_the_hand_derived_offloading_optimum(link_ms, expected):
    # recompute a: 23 ms; offload it and read it back: 13 + 2 link_ms (see offload_chain)
    graph = offload_chain(link_ms)
    assert reference_optimum(graph, offload=True) == pytest.approx(expected)
    assert reference_optimum(graph, offload=False) == pytest.approx(23.0)
    assert build_model(graph).O == {}  # off: the paper's model, no copy variables


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_solved_offloading_model_has_the_reference_optimum(doc):
    graph = graph_from_dict(doc)
    expected = reference_optimum(graph, offload=True)
    result = solve_offload(graph, EXACT, start=None)
    if expected is None:
        assert result.status is SolveStatus.INFEASIBLE
        return
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective == pytest.approx(expected, abs=1e-6)
    assert check_schedule(graph, result.schedule).total_ms == pytest.approx(expected, abs=1e-6)
