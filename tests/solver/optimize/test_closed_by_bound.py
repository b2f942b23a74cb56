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
from solver.document.generators import unit_chain
from solver.document.graph_io import load_graph
from solver.execution.simulate import simulate
from solver.optimize.backends import BackendOptions, run_backend
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
