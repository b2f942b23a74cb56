"""Offloading (docs/spec-notes.md, "Offloading"): the simulator's end-of-stage copies, the
schedule format's keep entries, the concurrent layout, and the MIQP option."""

from __future__ import annotations

import pytest
from handmade import offload_chain, offloading_schedule
from hypothesis import HealthCheck, given, settings
from strategies import small_graphs

from solver.document.generators import unit_chain
from solver.document.graph import Graph, make_graph
from solver.document.graph_io import graph_from_dict
from solver.document.schedule import Schedule, Stage
from solver.document.schedule_io import schedule_from_dict, schedule_to_dict
from solver.errors import ScheduleFormatError
from solver.execution.concurrent import concurrent_layout
from solver.execution.simulate import check_schedule, simulate
from solver.optimize.offload import OFFLOAD_METHOD, build_offload_model
from solver.optimize.solve import SolveOptions, solve_offload, solve_xengine
from solver.status import SolveStatus


# ----- simulator -------------------------------------------------------------------------
def test_simulate_offloading_copies_are_charged_and_timed():
    timeline = check_schedule(offload_chain(1.0), offloading_schedule())
    assert timeline.total_ms == pytest.approx(15.0)  # 13 ms of compute, two 1 ms copies
    copies = [
        (tr.stage, tr.tensor, tr.source, tr.target, tr.start, tr.end, tr.offload)
        for tr in timeline.transfers
    ]
    assert copies == [
        (1, "a", "gpu", "cpu", 11.0, 12.0, True),
        (2, "a", "cpu", "gpu", 13.0, 14.0, True),
    ]
    assert timeline.peaks == {"cpu": 1, "gpu": 3}


def test_simulate_offloading_source_holds_the_tensor_until_the_copy():
    # During the copy at the end of stage 1 the GPU holds b (kept) and a (sent): 3 bytes;
    # after it a is gone (c runs beside b); the host holds a from the copy's start.
    timeline = check_schedule(offload_chain(1.0), offloading_schedule())
    gpu, cpu = timeline.memory["gpu"], timeline.memory["cpu"]
    assert gpu.at(11.5) == (3, ("a", "b"))
    assert gpu.at(12.0) == (3, ("b", "c"))
    assert cpu.at(11.0) == (1, ("a",))


def test_simulate_offloading_copy_back_counts_on_the_budget():
    graph = offload_chain(1.0).with_memory_limits({"gpu": 2})
    # b (2 bytes) is read by c, so stage 1 needs a + b = 3 bytes: already over the budget.
    timeline = simulate(graph, offloading_schedule())
    assert timeline.violation.rule == "memory"
    assert "stage 1: b on gpu needs 3 bytes" in str(timeline.violation)


@pytest.mark.parametrize(
    ("copies", "text"),
    [
        ({"cpu": {"b": "cpu"}}, "stage 1: copies b from cpu to itself; name another device"),
        (
            {"gpu": {"b": "cpu"}},
            "stage 1: copies b to gpu, where it is already resident or computed in this stage; "
            "keep it there without a copy",
        ),
        (
            {"cpu": {"c": "gpu"}},
            "stage 1: copies c from gpu to cpu, but c is not resident on gpu at the end of the "
            "stage; copy it from where it is",
        ),
    ],
)
def test_simulate_refuses_bad_offloading_copies(copies, text):
    stages = list(offloading_schedule().stages)
    stages[1] = Stage(stages[1].ops, {"gpu": frozenset({"b"})}, copies)
    timeline = simulate(offload_chain(1.0), Schedule("x", {}, tuple(stages)))
    assert timeline.violation.rule == "offload"
    assert str(timeline.violation) == text


def test_simulate_refuses_an_offloading_copy_without_a_link():
    graph = offload_chain(1.0)
    graph = make_graph(graph.name, graph.devices, graph.nodes, graph.edges, [])
    timeline = simulate(graph, offloading_schedule())
    assert str(timeline.violation) == (
        "stage 1: copies a from gpu to cpu, but there is no link gpu -> cpu; add a link to "
        "the graph"
    )


def test_simulate_plain_keep_elsewhere_says_how_to_offload():
    schedule = offloading_schedule()
    stages = list(schedule.stages)
    stages[1] = Stage(stages[1].ops, {"gpu": frozenset({"b"}), "cpu": frozenset({"a"})})
    timeline = simulate(offload_chain(1.0), Schedule("x", {}, tuple(stages)))
    assert timeline.violation.rule == "keep"
    assert str(timeline.violation).endswith(
        'to offload it there, write {"id": "a", "from": DEVICE}'
    )


# ----- format ----------------------------------------------------------------------------
def test_schedule_file_writes_offloaded_copies_as_keep_entries_and_reads_them_back():
    schedule = offloading_schedule()
    doc = schedule_to_dict(schedule)
    assert doc["stages"][1]["keep"] == {"cpu": [{"id": "a", "from": "gpu"}], "gpu": ["b"]}
    assert doc["stages"][2]["keep"] == {"gpu": ["c", {"id": "a", "from": "cpu"}]}
    assert schedule_from_dict(doc, offload_chain(1.0)) == schedule


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ({"id": "a"}, "an offloading entry needs both 'id' and 'from'"),
        ({"id": "a", "from": "gpu", "to": "cpu"}, "an offloading entry unknown key 'to'"),
        ({"id": "a", "from": "tpu"}, "unknown device 'tpu'"),
        ({"id": "zz", "from": "gpu"}, "unknown node 'zz'"),
    ],
)
def test_schedule_file_refuses_bad_offloading_entries(entry, text):
    doc = schedule_to_dict(offloading_schedule())
    doc["stages"][1]["keep"]["cpu"] = [entry]
    with pytest.raises(ScheduleFormatError, match=text):
        schedule_from_dict(doc, offload_chain(1.0), "s.json")


# ----- concurrent layout -----------------------------------------------------------------
def test_concurrent_layout_runs_offloading_copies_on_their_links():
    layout = concurrent_layout(offload_chain(1.0), offloading_schedule())
    # a's copy out needs only a (complete at 10): it runs beside b, 10-11. The copy back may
    # start once c has started (the GPU's order) but its byte fits only when c ends and b is
    # released (b + c = 3 = the budget): 12-13, then d 13-14.
    assert layout.serial_ms == pytest.approx(15.0)
    assert layout.makespan_ms == pytest.approx(14.0)
    offloads = [tr for tr in layout.timeline.transfers if tr.offload]
    assert [(tr.source, tr.target, tr.start, tr.end) for tr in offloads] == [
        ("gpu", "cpu", 10.0, 11.0),
        ("cpu", "gpu", 12.0, 13.0),
    ]


# ----- the MIQP option -------------------------------------------------------------------
def _solve(graph: Graph, offload: bool):
    return solve_xengine(graph, SolveOptions(time_limit_s=30, offload=offload))


def test_offloading_beats_recomputation_when_the_link_is_fast():
    result = _solve(offload_chain(1.0), offload=True)
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(15.0)
    assert result.method == OFFLOAD_METHOD
    assert check_schedule(offload_chain(1.0), result.schedule).total_ms == pytest.approx(15.0)
    assert sum(len(s.copies) for s in result.schedule.stages) >= 1
    assert not any(op.node == "a" for op in result.schedule.stages[3].ops)  # no recomputation


def test_without_offloading_the_chain_recomputes():
    result = _solve(offload_chain(1.0), offload=False)
    assert result.status is SolveStatus.OPTIMAL and result.objective == pytest.approx(23.0)
    assert [op.node for op in result.schedule.stages[3].ops] == ["a", "d"]


def test_offloading_loses_to_recomputation_when_the_link_is_slow():
    result = _solve(offload_chain(6.0), offload=True)  # 13 + 2 * 6 = 25 > 23
    assert result.status is SolveStatus.OPTIMAL and result.objective == pytest.approx(23.0)
    assert not any(stage.copies for stage in result.schedule.stages)


def test_offloading_to_a_host_that_can_compute_is_the_same_optimum():
    result = _solve(offload_chain(1.0, cpu_runs=True), offload=True)
    assert result.status is SolveStatus.OPTIMAL and result.objective == pytest.approx(15.0)


def test_offloading_is_off_by_default_and_off_is_the_papers_model():
    assert SolveOptions().offload is False
    for layers, budget, expected in ((3, 3, 10.0), (4, 4, 11.0), (4, 6, 9.0)):
        graph = unit_chain(layers, budget=budget)  # Checkmate's closed forms
        default = solve_xengine(graph, SolveOptions(time_limit_s=30))
        off = _solve(graph, offload=False)
        assert default.method == off.method == "xengine"
        assert default.schedule.stages == off.schedule.stages
        assert (default.objective, default.variables, default.constraints) == (
            off.objective,
            off.variables,
            off.constraints,
        )
        assert default.objective == pytest.approx(expected)
    chain = solve_xengine(offload_chain(1.0), SolveOptions(time_limit_s=30))
    assert chain.objective == pytest.approx(23.0)
    assert not any(stage.copies for stage in chain.schedule.stages)


def test_offloading_is_never_dearer_than_a_given_start():
    graph = offload_chain(6.0)  # offloading cannot help: the paper's optimum, 23 ms, stands
    paper = _solve(graph, offload=False)
    result = solve_offload(
        graph, SolveOptions(time_limit_s=30), start=(paper.schedule, paper.timeline)
    )
    assert result.status is SolveStatus.OPTIMAL and result.objective == pytest.approx(23.0)
    hurried = solve_offload(
        graph, SolveOptions(time_limit_s=0.01), start=(paper.schedule, paper.timeline)
    )
    assert hurried.objective == pytest.approx(23.0)  # the start itself, at the least


def test_offload_model_without_links_has_no_copies():
    graph = offload_chain(1.0)
    graph = make_graph(graph.name, graph.devices, graph.nodes, graph.edges, [])
    assert build_offload_model(graph).O == {}
    assert _solve(graph, offload=True).objective == pytest.approx(23.0)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_offloading_optimum_replays_and_never_loses_to_the_papers(doc):
    graph = graph_from_dict(doc)
    base, offload = _solve(graph, offload=False), _solve(graph, offload=True)
    if offload.ok:
        assert check_schedule(graph, offload.schedule).total_ms == pytest.approx(offload.objective)
    if base.status is SolveStatus.OPTIMAL:
        assert offload.status is SolveStatus.OPTIMAL
        assert offload.objective <= base.objective + 1e-6
    if offload.status is SolveStatus.INFEASIBLE:
        assert base.status is SolveStatus.INFEASIBLE
