"""A solve stops once a bound found beside the backend proves its incumbent.

The relaxation (solver/optimize/relaxation.py) runs beside every solve of the paper's model.
When its bound meets the incumbent within the gap asked for, nothing can be cheaper: the
solve returns that schedule as optimal at once instead of letting CBC prove it again (VGG16 on
its GPU at 80 %: 0.1 s instead of 2.3 s; bench/vs_checkmate.py). The optima are checked
against the spec's formulation line by line (solver.optimize.xengine) solved by CBC alone,
and the stop by the log: CBC never finished.
"""

from __future__ import annotations

import threading

import pytest

from solver.cli import parse_budget
from solver.document.examples import bundled_graphs
from solver.document.generators import cpu_gpu_devices, unit_chain
from solver.document.graph import Edge, Node, make_graph
from solver.document.graph_io import load_graph
from solver.execution.simulate import simulate
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.bounds import each_node_once
from solver.optimize.solve import SolveOptions, solve_xengine
from solver.optimize.xengine import build_model
from solver.status import SolveStatus


def _reference(graph) -> float:
    outcome = run_backend(build_model(graph).prob, BackendOptions(time_limit_s=120, gap_rel=0))
    assert outcome.status is SolveStatus.OPTIMAL
    return outcome.objective


def _vgg16_on_its_gpu(percent: int):
    graph = load_graph(bundled_graphs()["vgg16"]).with_devices(["gpu"])
    _, budget = parse_budget(graph, f"gpu={percent}%")
    return graph.with_memory_limits({"gpu": budget})


@pytest.mark.parametrize(
    "graph", [unit_chain(20, budget=12), _vgg16_on_its_gpu(80)], ids=["chain20", "vgg16-80"]
)
def test_an_incumbent_the_relaxation_meets_is_returned_optimal_without_cbc(graph) -> None:
    log: list[str] = []
    result = solve_xengine(
        graph, SolveOptions(time_limit_s=60), lambda p: p.log_line and log.append(p.log_line)
    )
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert "meets a proven lower bound" in result.message
    assert result.objective == pytest.approx(_reference(graph), rel=1e-6)
    assert result.bound == pytest.approx(result.objective, rel=1e-4)
    assert simulate(graph, result.schedule).total_ms == pytest.approx(result.objective)
    # CBC may have started (under load the relaxation can end after CP-SAT's first phase),
    # but it did not finish: the bound stopped the solve.
    assert "so the solve stopped there" in result.message
    assert not any("Result - Optimal solution found" in line for line in log)


def test_a_user_cancel_during_the_search_is_still_a_cancel() -> None:
    """Cancelled as the plan starts, while the relaxation that would prove the incumbent
    still runs: the answer says cancelled, not optimal."""
    cancel = threading.Event()

    def on_progress(progress) -> None:
        if progress.log_line and progress.log_line.startswith("plan:"):
            cancel.set()

    result = solve_xengine(unit_chain(20, budget=12), SolveOptions(), on_progress, cancel)
    assert result.status is SolveStatus.CANCELLED and result.ok


def _b_too_big_for_the_gpu():
    """a -> b -> c, 1 ms each on the GPU and 4 on the CPU; b's 10 B with a's or c's byte is
    more than the GPU's 5 B, so b and c run on the CPU only: each node once costs 1 + 4 + 4.
    The optimum is 9.01 ms (a on the GPU, its byte copied over in 0.01 ms), not 9."""
    devices, links = cpu_gpu_devices(100, 5)
    cost = {"cpu": 4.0, "gpu": 1.0}
    nodes = [Node("a", 1, cost), Node("b", 10, cost), Node("c", 1, cost)]
    return make_graph(
        "b too big for the gpu", devices, nodes, [Edge("a", "b"), Edge("b", "c")], links
    )


def test_each_node_once_counts_every_node_on_the_cheapest_device_that_holds_it() -> None:
    graph = _b_too_big_for_the_gpu()
    assert each_node_once(graph) == pytest.approx(9.0)
    assert each_node_once(graph.with_memory_limits({"gpu": 11})) == pytest.approx(3.0)
    assert each_node_once(graph.with_memory_limits({"gpu": 11, "cpu": 10})) == pytest.approx(3.0)
    assert each_node_once(graph.with_memory_limits({"gpu": 10, "cpu": 10})) is None


def test_a_solve_has_a_bound_with_its_first_schedule() -> None:
    # An op-level import may have no relaxation bound before its time limit (a 5,107-operation
    # tower at 30 s had none): the bound that needs no model is there from the start.
    graph = _b_too_big_for_the_gpu()
    reports = []
    result = solve_xengine(graph, SolveOptions(time_limit_s=20), reports.append)
    first = next(report for report in reports if report.schedule is not None)
    assert first.bound == pytest.approx(9.0)
    assert result.status is SolveStatus.OPTIMAL and result.objective == pytest.approx(9.01)
