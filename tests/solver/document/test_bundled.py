"""Every bundled graph loads, validates and runs with checkpoint-all at its stated budgets."""

from __future__ import annotations

import pytest

from solver.document.examples import bundled_graphs
from solver.document.graph_io import load_graph
from solver.execution.simulate import check_schedule
from solver.optimize.bounds import lower_bound, no_remat_peak
from solver.optimize.methods import solve


@pytest.mark.parametrize("name", sorted(bundled_graphs()))
def test_bundled_graph_runs_checkpoint_all_at_the_no_remat_peak(name):
    graph = load_graph(bundled_graphs()[name])
    peak = no_remat_peak(graph)
    device = graph.devices[0].name
    full = graph.with_memory_limits({device: graph.device(device).fixed_memory + peak})
    result = solve(full, f"checkpoint-all:{device}")
    assert result.ok, result.message
    timeline = check_schedule(full, result.schedule)
    assert timeline.peaks[device] == peak
    assert timeline.recomputations == 0
    assert 0 < lower_bound(graph) <= peak
