"""The solved formulation (solver.optimize.miqp) against the spec's reference model, in exact bytes,
and the solve pipeline around it: fallbacks, limits, live incumbents."""

from __future__ import annotations

import stat
import threading
from dataclasses import replace
from pathlib import Path

import pulp
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import small_graphs

from solver.document.generators import unit_chain
from solver.document.graph import Device, Edge, Node, make_graph
from solver.document.graph_io import graph_from_dict
from solver.document.training import build_training_graph
from solver.execution.simulate import check_schedule, simulate
from solver.optimize import intervals
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.baselines import checkpoint_all
from solver.optimize.bounds import no_remat_peak
from solver.optimize.miqp import ModelTooLarge, build_array_model, memory_units
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.optimize.xengine import build_model
from solver.status import SolveStatus

EXACT = SolveOptions(time_limit_s=30, gap_rel=0.0)


def reference_optimum(graph) -> float | None:
    """The spec's formulation line by line (solver.optimize.xengine, PuLP), solved by CBC."""
    model = build_model(graph)
    result = run_backend(model.prob, BackendOptions(time_limit_s=30, gap_rel=0.0))
    if result.status is SolveStatus.INFEASIBLE:
        return None
    assert result.status is SolveStatus.OPTIMAL
    return result.objective


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_solved_formulation_has_the_reference_models_optimum(doc):
    graph = graph_from_dict(doc)
    expected = reference_optimum(graph)
    result = solve_xengine(graph, SolveOptions(time_limit_s=30, gap_rel=0.0, warm_start=False))
    if expected is None:
        assert result.status is SolveStatus.INFEASIBLE
        return
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective == pytest.approx(expected, abs=1e-6)
    assert check_schedule(graph, result.schedule).total_ms == pytest.approx(expected, abs=1e-6)


def awkward_training_graph(scale: int = 1_000_000_007):
    """Six forward layers with sizes of 1-9 GB that share no common divisor."""
    sizes = [3 * scale + 11, 7 * scale + 3, 2 * scale + 5, 9 * scale + 1, 4 * scale + 17, scale]
    nodes = [Node(f"f{k}", m, {"gpu": 1.0 + k % 3}) for k, m in enumerate(sizes)]
    edges = [Edge(f"f{k}", f"f{k + 1}") for k in range(len(sizes) - 1)]
    forward = make_graph("awkward", [Device("gpu", "gpu", 10**12)], nodes, edges)
    return build_training_graph(forward)


def test_budget_exactly_at_the_peak_in_large_bytes_recomputes_nothing():
    graph = awkward_training_graph()
    peak = no_remat_peak(graph)
    assert memory_units(graph.with_memory_limits({"gpu": peak})).unit[0] > 1  # a fractional unit
    everything = simulate(graph, checkpoint_all(graph, "gpu"))
    assert everything.valid

    result = solve_xengine(graph.with_memory_limits({"gpu": peak}), EXACT)

    assert result.status is SolveStatus.OPTIMAL
    assert not any(op.recompute for op in result.timeline.ops)
    assert result.timeline.total_ms == pytest.approx(everything.total_ms)


@pytest.mark.parametrize("cutoff", [False, True])
def test_one_byte_below_the_peak_is_repaired_in_bytes_and_honest_about_its_bound(
    cutoff, no_exact_search
):
    # Solvers cannot tell 1 byte in 27 GB apart: the relaxed model (sizes rounded down) keeps
    # everything resident, which overruns by a byte; the safe model (sizes up) repairs it.
    # By hand: every op costs >= 1, so one recomputation on top of checkpoint-all is optimal,
    # but the only bound valid in bytes is the relaxed one, checkpoint-all's cost.
    graph = awkward_training_graph()
    tight = graph.with_memory_limits({"gpu": no_remat_peak(graph) - 1})
    everything = simulate(graph, checkpoint_all(graph, "gpu"))
    assert not simulate(tight, checkpoint_all(tight, "gpu")).valid

    # With the incumbent as cutoff, the safe model's "nothing cheaper" is no proof either: it
    # leaves out schedules that fit in bytes. (The paper's model alone: CP-SAT beside it would
    # prove the optimum in bytes, see the test below.)
    result = solve_xengine(tight, replace(EXACT, cutoff=cutoff, improve=False))

    assert result.status is SolveStatus.FEASIBLE
    assert "memory rows rounded" in result.message
    assert result.timeline.recomputations == 1
    assert result.objective == pytest.approx(everything.total_ms + 1.0)
    assert result.bound == pytest.approx(everything.total_ms)
    assert max(check_schedule(tight, result.schedule).peaks.values()) < no_remat_peak(graph)


@pytest.mark.skipif(not intervals.available(), reason="ortools is not installed")
def test_one_byte_below_the_peak_is_proven_in_bytes_by_the_covering_runs():
    # The interval model is exact in bytes, and its covering runs hold every schedule up to
    # the incumbent's cost: the optimum found above (one recomputation) is proven there.
    graph = awkward_training_graph()
    tight = graph.with_memory_limits({"gpu": no_remat_peak(graph) - 1})
    everything = simulate(graph, checkpoint_all(graph, "gpu"))
    result = solve_xengine(tight, EXACT)
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(everything.total_ms + 1.0)
    assert result.bound == pytest.approx(result.objective, rel=1e-6)
    assert "proven lower bound" in result.message
    assert check_schedule(tight, result.schedule).valid


def fake_cbc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    script = tmp_path / "cbc"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(pulp.PULP_CBC_CMD, "pulp_cbc_path", str(script))


def test_a_crashed_cbc_still_returns_the_heuristic_schedule(tmp_path, monkeypatch, no_exact_search):
    fake_cbc(tmp_path, monkeypatch, "echo 'Segmentation fault'\nkill -SEGV $$\n")
    graph = unit_chain(6, budget=5)

    # CBC alone: CP-SAT beside it would prove this chain's optimum by itself.
    result = solve_xengine(graph, SolveOptions(time_limit_s=10, improve=False))

    assert result.status is SolveStatus.FEASIBLE
    assert result.ok
    assert "CBC failed" in result.message and "Segmentation fault" in result.message
    assert check_schedule(graph, result.schedule).total_ms == result.objective


def test_time_limit_while_building_returns_the_heuristic_schedule(monkeypatch):
    # Without the relaxation beside it: its bound meets this chain's heuristic within 0.5 s,
    # which would (rightly) make the answer optimal, however short the limit.
    monkeypatch.setattr("solver.optimize.solve.relaxation_bound", lambda *_: None)
    graph = unit_chain(30, budget=12)

    result = solve_xengine(graph, SolveOptions(time_limit_s=1e-6))

    assert result.status is SolveStatus.FEASIBLE
    assert result.ok and "while building the model" in result.message
    check_schedule(graph, result.schedule)


def test_cancel_while_building_is_cancelled_with_the_heuristic_schedule():
    cancel = threading.Event()
    cancel.set()

    result = solve_xengine(unit_chain(10, budget=6), SolveOptions(), cancel=cancel)

    assert result.status is SolveStatus.CANCELLED
    assert result.ok


def test_a_model_too_large_is_refused_with_its_size_and_advice():
    with pytest.raises(ModelTooLarge, match=r"about [\d,]+ variables .* coarsen the graph"):
        build_array_model(unit_chain(50), max_build_bytes=10**6)


def test_a_model_too_large_still_returns_the_heuristic(monkeypatch):
    monkeypatch.setattr("solver.optimize.miqp.default_max_build_bytes", lambda: 10**5)
    graph = unit_chain(20, budget=12)
    result = solve_xengine(graph, SolveOptions(time_limit_s=10))
    # The relaxation beside the solve meets this chain's optimum and stops it, often before
    # the model is built (tests/solver/optimize/test_closed_by_bound.py); "optimal" is then
    # the true optimum. Without it, the model is refused with its advice.
    assert result.ok and result.status is SolveStatus.OPTIMAL, result.message
    assert "proven lower bound" in result.message
    assert result.objective == pytest.approx(reference_optimum(graph))
    monkeypatch.setattr("solver.optimize.solve.relaxation_bound", lambda *_: None)
    result = solve_xengine(graph, SolveOptions(time_limit_s=10))
    assert result.ok and "coarsen" in result.message
    assert result.status is SolveStatus.FEASIBLE


def test_cutoff_proves_an_optimal_heuristic_optimal():
    graph = unit_chain(4, budget=100)  # checkpoint-all fits: 9 ops, the optimum

    result = solve_xengine(graph, SolveOptions(time_limit_s=20, cutoff=True))

    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(9.0)
    assert result.bound == pytest.approx(9.0)


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_every_reported_incumbent_schedule_replays_at_its_cost(backend):
    graph = unit_chain(8, budget=5)
    expected = reference_optimum(graph)
    reports = []

    result = solve_xengine(graph, SolveOptions(backend=backend, time_limit_s=30), reports.append)

    with_schedule = [p for p in reports if p.schedule is not None]
    assert with_schedule, "the heuristic start is reported at once"
    for progress in with_schedule:
        assert simulate(graph, progress.schedule).total_ms == pytest.approx(progress.incumbent)
    costs = [p.incumbent for p in with_schedule]
    assert costs == sorted(costs, reverse=True)
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(expected)
    assert costs[-1] == pytest.approx(expected)


@pytest.mark.parametrize("warm_start", [True, False])
def test_an_absurd_cost_on_one_device_leaves_the_optimum_of_the_other(warm_start):
    """Costs of 1e308 once made CBC call a feasible model infeasible (without a start) or
    stall at the start (gap 68%). The CPU's runs are absurd, so the answer is the unit
    chain's known optimum on the GPU alone: (2n+1) + n(n-1)/2 = 10 for n = 3 at budget 3,
    proven."""
    from dataclasses import replace

    from solver.document.graph import Link

    devices = [Device("cpu", "cpu", 10**6), Device("gpu", "gpu", 3)]
    graph = unit_chain(3, devices=devices)
    nodes = tuple(replace(n, cost={"cpu": 1e308, "gpu": 1.0}) for n in graph.nodes)
    links = (Link("cpu", "gpu", 1000.0, 0.0), Link("gpu", "cpu", 1000.0, 0.0))
    graph = replace(graph, nodes=nodes, links=links)
    result = solve_xengine(graph, SolveOptions(time_limit_s=30, warm_start=warm_start))
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.timeline.total_ms == pytest.approx(10.0)
    assert result.bound == pytest.approx(10.0)
    assert check_schedule(graph, result.schedule).valid


def test_a_schedule_that_needs_absurd_costs_is_found_and_bounded_honestly():
    """At GPU budget 2 the three backward nodes (output and two inputs) must run on the
    CPU at 1e300 each: the model caps those costs, so its objective is not the schedule's;
    the answer is still the replayed schedule, with a bound at most its cost (here the
    cheapest-device bound, 3e300, meets it)."""
    from dataclasses import replace

    from solver.document.graph import Link

    devices = [Device("cpu", "cpu", 10**6), Device("gpu", "gpu", 2)]  # budget 2: GPU alone fails
    graph = unit_chain(3, devices=devices)
    nodes = tuple(replace(n, cost={"cpu": 1e300, "gpu": 1.0}) for n in graph.nodes)
    links = (Link("cpu", "gpu", 1000.0, 0.0), Link("gpu", "cpu", 1000.0, 0.0))
    graph = replace(graph, nodes=nodes, links=links)
    result = solve_xengine(graph, SolveOptions(time_limit_s=30))
    assert result.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL), result.message
    assert result.timeline.total_ms == pytest.approx(3e300)
    assert result.bound is not None and result.bound <= result.timeline.total_ms
    assert check_schedule(graph, result.schedule).valid


def test_a_heuristic_that_meets_the_cheapest_once_bound_is_optimal_even_if_cbc_crashes(
    tmp_path, monkeypatch
):
    """Budget n + 2 on the unit chain: checkpointing all costs 2n + 1, every node once, the
    proven lower bound; so the answer is optimal without any backend (resnet50 at 100% was
    reported "feasible" with a 0.0% gap)."""
    fake_cbc(tmp_path, monkeypatch, "kill -SEGV $$\n")
    graph = unit_chain(6, budget=8)

    result = solve_xengine(graph, SolveOptions(time_limit_s=10, improve=False))

    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective == pytest.approx(13.0) and result.bound == pytest.approx(13.0)
    assert "meets a proven lower bound" in result.message
