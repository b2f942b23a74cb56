"""The overlap search with offloading copies (issue 12): copies are instances it keeps, moves
and drops correctly, and it can add one (reuse an earlier instance through a copy instead of
recomputing). Every candidate is replayed; hand-derived values from
tests/solver/optimize/test_offload.py."""

from __future__ import annotations

import pytest
from handmade import offload_chain, offloading_schedule
from hypothesis import HealthCheck, given, settings
from strategies import small_graphs

from solver.cli import main
from solver.document.graph_io import graph_from_dict, save_graph
from solver.execution.concurrent import concurrent_makespan
from solver.execution.simulate import check_schedule, simulate
from solver.optimize.methods import solve
from solver.optimize.overlap import _instances, _moves, optimize_overlap
from solver.optimize.solve import SolveOptions


def test_copies_are_instances_read_and_kept_on_their_target():
    graph = offload_chain(1.0)
    found = _instances(graph, offloading_schedule())
    # a (stage 0), b, the copy of a to the host (stage 1), c, its copy back (stage 2), d
    assert [(x.stage, x.tensor, x.device, x.copied_from) for x in found] == [
        (0, "a", "gpu", ""),
        (1, "b", "gpu", ""),
        (1, "a", "cpu", "gpu"),
        (2, "c", "gpu", ""),
        (2, "a", "gpu", "cpu"),
        (3, "d", "gpu", ""),
    ]
    first, _, host, _, back, _ = found
    assert (first.readers, first.kept, first.sent) == ([(1, 0)], [0], [(1, "cpu")])
    assert (host.kept, host.sent) == ([1], [(2, "gpu")])
    assert (back.readers, back.kept) == ([(3, 0)], [2])  # d reads the copy back


def test_every_move_from_an_offloading_schedule_replays_or_is_refused():
    graph = offload_chain(1.0)
    candidates = [move() for move in _moves(graph, offloading_schedule())]
    replays = [simulate(graph, c) for c in candidates if c is not None]
    valid = [r for r in replays if r.valid]
    # dropping the copy back (the host's copy is then read by d over the link) is one of them:
    # 13 ms of compute, the copy out and d's transfer, 15 ms as before
    assert any(
        r.total_ms == 15.0 and [tr.offload for tr in r.transfers] == [True, False] for r in valid
    )


def test_overlap_from_an_offloading_schedule_keeps_it_valid():
    graph = offload_chain(1.0)
    start = offloading_schedule()
    found = optimize_overlap(graph, start, time_limit_s=5)
    timeline = check_schedule(graph, found.schedule)
    assert found.makespan_ms <= found.start_makespan_ms == concurrent_makespan(graph, start)
    # d needs a, which the GPU cannot hold through c: a copy is still there, and no recompute
    assert timeline.recomputations == 0 and any(tr.offload for tr in timeline.transfers)


def test_overlap_adds_a_copy_instead_of_a_recomputation():
    """The paper's optimum recomputes a (23 ms serial, nothing overlaps on one GPU that runs
    everything). The host cannot compute, so without offloading no move helps; reusing a
    through a copy to the host (kept there, read back by d) is 15 ms serial."""
    graph = offload_chain(1.0)
    paper = solve(graph, "xengine", SolveOptions(time_limit_s=20))
    assert paper.timeline.total_ms == 23.0
    found = optimize_overlap(graph, paper.schedule, time_limit_s=5)
    timeline = check_schedule(graph, found.schedule)
    assert found.start_makespan_ms == 23.0 and found.makespan_ms <= 15.0
    assert timeline.total_ms == 15.0 and timeline.recomputations == 0
    assert [tr.offload for tr in timeline.transfers].count(True) == 1


def test_overlap_method_with_offload_through_the_command_line(tmp_path, capsys):
    path = tmp_path / "offload_chain.graph.json"
    save_graph(offload_chain(1.0), path)
    result = solve(offload_chain(1.0), "overlap", SolveOptions(time_limit_s=10, offload=True))
    assert result.ok and result.method == "overlap+offload"
    assert concurrent_makespan(offload_chain(1.0), result.schedule) <= 14.0
    assert main(["solve", str(path), "--method", "overlap", "--offload", "--time-limit", "10"]) == 0
    assert "overlap+offload" in capsys.readouterr().out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_overlap_from_offloading_optima_is_valid_and_never_worse(doc):
    graph = graph_from_dict(doc)
    result = solve(graph, "xengine", SolveOptions(time_limit_s=10, offload=True, improve=False))
    if not result.ok:
        return
    found = optimize_overlap(graph, result.schedule, time_limit_s=1.0, patience=2)
    check_schedule(graph, found.schedule)
    assert found.makespan_ms <= found.start_makespan_ms + 1e-9
    assert found.makespan_ms == pytest.approx(concurrent_makespan(graph, found.schedule))
