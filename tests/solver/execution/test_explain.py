"""Step-through explanations on a schedule checked by hand (tests/data/handbuilt.*.json).

The hand-built schedule, on a CPU (16 MiB) and a GPU (3 MiB) joined by a 1 MiB/ms link:

    stage 0: a on gpu                      keep gpu {a}
    stage 1: b on gpu (reads a)            keep gpu {b}   -> a freed after b
    stage 2: c on gpu (reads b)            keep gpu {c}   -> gpu holds b + c = 3 MiB
    stage 3: a on gpu again (recompute),
             d on cpu copying a and c from gpu (1 ms each)

Keeping ``a`` through stage 2 would have needed 4 MiB on the GPU, over its 3 MiB budget.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.document.graph_io import load_graph
from solver.document.schedule import Operation, Schedule, Stage
from solver.document.schedule_io import load_schedule
from solver.execution.explain import (
    COMPUTING,
    FREED,
    RESIDENT,
    TRANSFERRED,
    explain_op,
    recompute_reason,
    stage_matrices,
    state_at,
)
from solver.execution.simulate import simulate

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture
def handbuilt():
    graph = load_graph(DATA / "handbuilt.graph.json")
    schedule = load_schedule(DATA / "handbuilt.schedule.json", graph)
    timeline = simulate(graph, schedule, strict=True)
    return graph, schedule, timeline


def test_state_at_first_computation_names_node_device_and_time(handbuilt):
    state = state_at(*handbuilt, 1)
    assert state.explanation == "stage 1: compute b on gpu (2 ms)"
    assert (state.op.node, state.op.device, state.op.stage) == ("b", "gpu", 1)


def test_state_at_recomputation_says_it_was_freed_to_fit_the_budget(handbuilt):
    state = state_at(*handbuilt, 3)
    assert state.explanation == (
        "stage 3: recompute a on gpu (1 ms) — its output was freed on gpu after b used it in "
        "stage 1, to stay under 3.0 MiB; keeping it would need 4.0 MiB in stage 2"
    )


def test_state_at_transfer_names_the_copies_and_their_source(handbuilt):
    assert state_at(*handbuilt, 4).explanation == (
        "stage 3: compute d on cpu (4 ms), copying a and c from gpu (2 ms)"
    )


def test_state_at_residency_has_every_status(handbuilt):
    residency = state_at(*handbuilt, 4).residency
    assert residency == {
        "a": {"gpu": RESIDENT, "cpu": TRANSFERRED},
        "b": {"gpu": FREED},
        "c": {"gpu": RESIDENT, "cpu": TRANSFERRED},
        "d": {"cpu": COMPUTING},
    }


def test_state_at_start_lists_uncomputed_nodes_as_empty(handbuilt):
    residency = state_at(*handbuilt, 0).residency
    assert residency == {"a": {"gpu": COMPUTING}, "b": {}, "c": {}, "d": {}}


def test_state_at_end_of_stage_frees_what_is_not_kept(handbuilt):
    # a is dropped after b (its last use) in stage 1: freed while c runs in stage 2
    residency = state_at(*handbuilt, 2).residency
    assert residency["a"] == {"gpu": FREED}
    assert residency["b"] == {"gpu": RESIDENT}


def test_explain_op_equals_state_explanation(handbuilt):
    for index in range(len(handbuilt[2].ops)):
        assert explain_op(*handbuilt, index) == state_at(*handbuilt, index).explanation


def test_recompute_reason_is_empty_for_a_first_computation(handbuilt):
    assert recompute_reason(*handbuilt, 0) == ""
    assert recompute_reason(*handbuilt, 3).startswith("its output was freed on gpu after b")


def test_recompute_reason_when_the_tensor_lives_on_another_device(handbuilt):
    graph, _, _ = handbuilt
    cpu_keeps_a = {"cpu": frozenset({"a"})}
    schedule = Schedule(
        "handbuilt",
        {},
        (
            Stage((Operation("a", "cpu"),), cpu_keeps_a),
            Stage((Operation("b", "gpu", {"a": "cpu"}),), {**cpu_keeps_a, "gpu": frozenset({"b"})}),
            Stage((Operation("c", "gpu"),), {**cpu_keeps_a, "gpu": frozenset({"c"})}),
            Stage((Operation("a", "gpu"), Operation("d", "gpu"))),
        ),
    )
    timeline = simulate(graph, schedule, strict=True)
    assert recompute_reason(graph, schedule, timeline, 3) == (
        "its output is on cpu; recomputing it here takes 1 ms, copying it would take 1 ms"
    )


def test_recompute_reason_without_memory_pressure_says_only_not_kept(handbuilt):
    graph, schedule, _ = handbuilt
    roomy = graph.with_memory_limits({"gpu": 64 * 2**20})
    timeline = simulate(roomy, schedule, strict=True)
    assert recompute_reason(roomy, schedule, timeline, 3) == (
        "its output was freed on gpu after b used it in stage 1"
    )


def test_state_at_rejects_an_index_out_of_range(handbuilt):
    with pytest.raises(IndexError, match="operation 5 is out of range; the timeline has 5"):
        state_at(*handbuilt, 5)


def test_stage_matrices_match_the_hand_built_schedule(handbuilt):
    matrices = stage_matrices(*handbuilt)
    gpu, cpu = matrices["gpu"], matrices["cpu"]
    assert sorted(zip(*gpu.R.nonzero(), strict=True)) == [(0, 0), (1, 1), (2, 2), (3, 0)]
    assert sorted(zip(*cpu.R.nonzero(), strict=True)) == [(3, 3)]
    assert sorted(zip(*gpu.S.nonzero(), strict=True)) == [(1, 0), (2, 1), (3, 2)]
    assert not cpu.S.any()
