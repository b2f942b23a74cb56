"""The simulator replays valid schedules exactly and names the first broken rule of bad ones."""

from __future__ import annotations

from dataclasses import replace

import pytest
from handmade import fan_in_graph, two_node_graph

from solver.document.generators import unit_chain
from solver.document.schedule import Operation, Schedule, Stage
from solver.errors import ScheduleViolation
from solver.execution.simulate import check_schedule, simulate


def _schedule(graph, stages) -> Schedule:
    built = []
    for ops, keep in stages:
        built.append(
            Stage(
                tuple(Operation(n, d, i) for n, d, i in ops),
                {d: frozenset(ids) for d, ids in keep.items()},
            )
        )
    return Schedule(graph.name, {}, tuple(built))


def _fan_in_plan():
    """a, b on gpu; both copied to cpu for c (the optimum of fan_in_graph(2))."""
    return [
        ([("a", "gpu", {})], {"gpu": ["a"]}),
        ([("b", "gpu", {})], {"gpu": ["a", "b"]}),
        ([("c", "cpu", {"a": "gpu", "b": "gpu"})], {}),
    ]


def test_replay_of_a_heterogeneous_schedule_has_exact_times_and_memory():
    graph = fan_in_graph(gpu_budget=2)
    timeline = check_schedule(graph, _schedule(graph, _fan_in_plan()))
    assert [(op.node, op.device, op.start, op.end) for op in timeline.ops] == [
        ("a", "gpu", 0.0, 1.0),
        ("b", "gpu", 1.0, 2.0),
        ("c", "cpu", 4.0, 14.0),
    ]
    assert [(t.tensor, t.source, t.target, t.start, t.end) for t in timeline.transfers] == [
        ("a", "gpu", "cpu", 2.0, 3.0),
        ("b", "gpu", "cpu", 3.0, 4.0),
    ]
    assert timeline.total_ms == 14.0 and timeline.transfer_ms == 2.0
    assert timeline.peaks == {"cpu": 3, "gpu": 2}
    gpu = timeline.memory["gpu"]
    assert gpu.at(1.5) == (2, ("a", "b"))
    assert gpu.at(20.0) == (0, ())  # freed after their last use, the copies
    assert timeline.ops[-1].memory == 3  # c's output plus the two copies


def test_recomputation_is_marked_and_counted():
    graph = unit_chain(2, budget=3)
    plan = [
        ([("n0", "cpu", {})], {"cpu": ["n0"]}),
        ([("n1", "cpu", {})], {"cpu": ["n1"]}),
        ([("n2", "cpu", {})], {"cpu": ["n1", "n2"]}),
        ([("n3", "cpu", {})], {"cpu": ["n3"]}),
        ([("n0", "cpu", {}), ("n4", "cpu", {})], {}),
    ]
    timeline = check_schedule(graph, _schedule(graph, plan))
    assert timeline.recomputations == 1
    assert [op.recompute for op in timeline.ops] == [False, False, False, False, True, False]
    assert timeline.total_ms == 6.0  # the optimum (2n+1) + n(n-1)/2 for n = 2, budget 3
    assert timeline.peaks == {"cpu": 3}


@pytest.mark.parametrize(
    ("plan_edit", "rule", "words"),
    [
        # missing input: c reads b from the gpu, where it was not kept
        (
            lambda p: p.__setitem__(1, ([("b", "gpu", {})], {"gpu": ["a"]})),
            "inputs",
            "needs b, which is not resident on gpu",
        ),
        # keep of a tensor that was neither resident nor computed
        (
            lambda p: p.__setitem__(0, ([("a", "gpu", {})], {"gpu": ["a"], "cpu": ["a"]})),
            "keep",
            "keeps a on cpu",
        ),
        # wrong stage order: b computed in stage 0, beyond the frontier
        (
            lambda p: p.__setitem__(0, ([("a", "gpu", {}), ("b", "gpu", {})], {"gpu": ["a"]})),
            "frontier",
            "beyond the frontier",
        ),
        # frontier node missing from its stage
        (lambda p: p.__setitem__(1, ([], {"gpu": ["a"]})), "frontier", "exactly once"),
        # a transfer of a tensor already resident on the consumer
        (
            lambda p: p.__setitem__(2, ([("c", "gpu", {"a": "cpu"})], {})),
            "inputs",
            "not resident on cpu",
        ),
    ],
)
def test_hand_broken_schedules_are_caught_with_the_rule_and_place(plan_edit, rule, words):
    graph = fan_in_graph(gpu_budget=10)
    plan = _fan_in_plan()
    plan_edit(plan)
    with pytest.raises(ScheduleViolation, match=words) as caught:
        check_schedule(graph, _schedule(graph, plan))
    assert caught.value.rule == rule
    assert caught.value.stage is not None


def test_over_budget_names_device_and_numbers():
    graph = fan_in_graph(gpu_budget=2)
    plan = _fan_in_plan()
    plan[2] = ([("c", "gpu", {})], {})
    with pytest.raises(ScheduleViolation, match="c on gpu needs 3 bytes") as caught:
        check_schedule(graph, _schedule(graph, plan))
    assert caught.value.rule == "memory"
    assert caught.value.numbers == {"used": 3, "budget": 2}
    assert (caught.value.stage, caught.value.node, caught.value.device) == (2, "c", "gpu")


def test_copy_of_a_resident_tensor_is_refused():
    graph = fan_in_graph(gpu_budget=10)
    plan = [
        ([("a", "gpu", {})], {"gpu": ["a"]}),
        ([("b", "gpu", {})], {"gpu": ["a", "b"]}),
        ([("a", "cpu", {}), ("c", "cpu", {"a": "gpu", "b": "gpu"})], {}),
    ]
    with pytest.raises(ScheduleViolation, match="already resident on cpu") as caught:
        check_schedule(graph, _schedule(graph, plan))
    assert caught.value.rule == "transfer"


def test_transfer_without_link_is_refused():
    graph = fan_in_graph(gpu_budget=10, link=False)
    with pytest.raises(ScheduleViolation, match="no link gpu -> cpu"):
        check_schedule(graph, _schedule(graph, _fan_in_plan()))


def test_operation_order_within_a_stage_is_checked():
    graph = unit_chain(2, budget=10)
    plan = [
        ([("n0", "cpu", {})], {}),
        ([("n1", "cpu", {}), ("n0", "cpu", {})], {}),
    ]
    with pytest.raises(ScheduleViolation, match="out of order"):
        check_schedule(graph, _schedule(graph, plan + [([], {})] * 3))


def test_wrong_number_of_stages_is_reported_not_raised_when_lenient():
    graph = two_node_graph()
    timeline = simulate(graph, Schedule(graph.name, {}, ()))
    assert not timeline.valid
    assert timeline.violation.rule == "stages"
    assert "0 stages but the graph has 2 nodes" in str(timeline.violation)


def test_fixed_memory_is_subtracted_from_the_budget():
    graph = fan_in_graph(gpu_budget=3)
    devices = tuple(replace(d, fixed_memory=1) if d.name == "gpu" else d for d in graph.devices)
    plan = _fan_in_plan()
    with pytest.raises(ScheduleViolation, match="budget is 2"):
        plan[2] = ([("c", "gpu", {})], {})
        check_schedule(replace(graph, devices=devices), _schedule(graph, plan))
