"""The window's memory figures on a zero-cost operation (issue 22, "a wrong figure").

``a`` (100 B, cost 1) -> ``b`` (100 B, cost 0) -> ``c`` (1 B, cost 1) on one 1000 B device:
while ``b`` runs, ``a`` and ``b`` are resident, 200 B, for no time. The memory view used to
draw and title 101 B (the simulator's curve lost the zero-width step); the step cursor and the
binding sentences read the state at ``b``'s start time, which is ``c``'s.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.document import Document
from app.views.binding import binding_constraints
from app.views.memory import MemoryView
from app.views.tensor_bands import resident_text
from solver.document.graph_io import graph_from_dict
from solver.execution.simulate import simulate
from solver.optimize.baselines import checkpoint_all
from solver.optimize.methods import solve

ZERO_COST = {
    "format": "remat-graph",
    "version": 1,
    "name": "zero-cost",
    "devices": [{"name": "cpu", "memory": 1000}],
    "nodes": [
        {"id": "a", "memory": 100, "cost": {"cpu": 1}},
        {"id": "b", "memory": 100, "cost": {"cpu": 0}, "inputs": ["a"]},
        {"id": "c", "memory": 1, "cost": {"cpu": 1}, "inputs": ["b"]},
    ],
}


@pytest.fixture
def zero_document(qapp) -> Document:
    graph = graph_from_dict(ZERO_COST)
    doc = Document()
    doc.set_graph(graph)
    doc.set_result(solve(graph, "xengine"))
    return doc


def test_memory_view_titles_and_draws_the_zero_cost_peak(zero_document, show):
    view = show(MemoryView(zero_document), 900, 300)
    assert view.title("cpu").startswith("cpu activations: peak 200 B = 20% of the 1000 B")
    curve = view.curve("cpu")
    _, scale = view.unit("cpu")
    assert float(np.max(curve.yData)) * scale == 200
    # the step of b has no width: it is drawn as a vertical line at 1 ms, up to 200 B
    j = int(np.argmax(curve.yData))
    assert curve.xData[j] == curve.xData[j + 1] == 1.0


def test_step_cursor_and_binding_read_the_zero_cost_operation_itself(zero_document):
    graph, result = zero_document.graph, zero_document.result
    b = next(i for i, op in enumerate(result.timeline.ops) if op.node == "b")
    text = resident_text(graph, result.timeline, result.timeline.ops[b], b, None)
    assert "cpu holds a, b (200 B)" in text
    tight = graph.with_memory_limits({"cpu": 200})
    schedule = checkpoint_all(tight, "cpu")
    timeline = simulate(tight, schedule)
    found = binding_constraints(tight, schedule, timeline, 1)
    limit = "cpu is at its limit: 200 B of its 200 B activation budget (100%) while b runs"
    assert found == [limit]
