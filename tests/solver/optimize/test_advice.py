"""advise(): one sentence on what would help a weak result, and nothing for a strong one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.document.generators import unit_chain
from solver.optimize.advice import advise, idle_devices
from solver.optimize.backends import registry
from solver.optimize.bounds import no_remat_peak
from solver.optimize.incumbents import Restricted
from solver.optimize.methods import solve
from solver.status import SolveStatus

needs_cpsat = pytest.mark.skipif(
    not registry.BACKENDS["cpsat"].available(), reason="needs the cpsat extra"
)


@pytest.fixture(scope="module")
def chain():
    graph = unit_chain(60, budget=1000)  # 121 nodes: a "large" graph for the advice
    return graph, solve(graph, "checkpoint-all")


def weak(result, **changes):
    base = {"status": SolveStatus.FEASIBLE, "gap": 0.05, "bound": 1.0}
    return replace(result, **{**base, **changes})


def test_a_proven_or_impossible_result_needs_no_advice(chain):
    graph, result = chain
    for status in (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE):
        assert advise(replace(result, status=status), graph, 60, "cbc") == ""


@needs_cpsat
def test_a_gap_suggests_time_and_cpsat_only_when_cpsat_has_not_run(chain):
    graph, result = chain
    before = advise(weak(result), graph, 60, "cbc")
    assert before.startswith("the gap is 5.0%: try a longer time limit than 60 s")
    assert "CP-SAT solver (--solver cpsat)" in before
    searched = weak(result, restricted=Restricted(2, None, False))  # CP-SAT ran beside CBC
    after = advise(searched, graph, 60, "cbc")
    assert "a longer time limit than 60 s" in after and "cpsat" not in after


@needs_cpsat
def test_cpsat_is_not_suggested_where_it_was_the_plan(chain):
    # a graph too large for the paper's model is solved by CP-SAT on the interval model; at
    # 30 s a 5,107-operation tower ran out while that model was built: only time helps
    graph, result = chain
    planned = weak(result, formulation="retention intervals (C=2)")
    assert advise(planned, graph, 30, "cbc") == (
        "the gap is 5.0%: try a longer time limit than 30 s"
    )


@needs_cpsat
def test_a_stalled_cbc_is_named_with_cpsat_from_the_start(chain):
    # CP-SAT ran (after the handover), yet the tip stands: from the start it has both cores
    graph, result = chain
    message = "CBC had not solved its root LP 15 s after it started; CP-SAT took both cores"
    stalled = weak(result, restricted=Restricted(2, None, False), message=message)
    text = advise(stalled, graph, 60, "cbc")
    assert text == (
        "the gap is 5.0%: try a longer time limit than 60 s or the CP-SAT solver (--solver "
        "cpsat) on both cores from the start; CBC did not solve its model's root LP in time, so "
        "CP-SAT took over late"
    )


def test_a_restricted_optimum_names_its_restriction_and_the_wider_search(chain):
    graph, result = chain
    proven = weak(result, restricted=Restricted(2, 40.0, True))
    text = advise(proven, graph, 60, "cbc")
    assert "at most 2 runs of each node per device" in text and "--runs 3" in text


def test_no_schedule_says_what_to_try(chain):
    graph, result = chain
    empty = replace(result, status=SolveStatus.TIME_LIMIT, schedule=None, timeline=None)
    text = advise(empty, graph, 30, "cbc")
    assert text.startswith("no schedule yet: try a longer time limit than 30 s, a larger budget")


def test_a_budget_that_holds_everything_is_never_called_idle():
    """Room left on a device whose budget holds the whole no-rematerialization peak says
    nothing about the solve; room left on a tight one does (the solve was cut short)."""
    graph = unit_chain(10, budget=5)  # far below the no-remat peak of 12: it recomputes
    result = solve(graph, "checkmate")
    assert result.timeline.recomputations > 0
    (device,) = result.timeline.activation_budgets
    peak = no_remat_peak(graph)

    def cut_short(budget: int):
        timeline = replace(result.timeline, activation_budgets={device: budget})
        return weak(result, gap=0.0, timeline=timeline)

    roomy, tight = cut_short(100 * peak), cut_short(peak - 1)
    assert idle_devices(roomy, peak) == [] and "cut short" not in advise(roomy, graph, 60, "cbc")
    assert idle_devices(tight, peak) == [device]
    assert f"while {device} still used less than 50%" in advise(tight, graph, 60, "cbc")
