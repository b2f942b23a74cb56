"""Hypothesis strategies shared by the core tests: small random graph documents."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def small_graphs(draw):
    """A graph document of 2-6 nodes over a CPU and a GPU, some nodes runnable on one only,
    with memory limits from 0 to 12 bytes (often infeasible: the solvers must say why)."""
    n = draw(st.integers(2, 6))
    nodes = []
    for k in range(n):
        inputs = draw(st.lists(st.integers(0, k - 1), max_size=2, unique=True)) if k else []
        cost = {"cpu": draw(st.integers(1, 9)), "gpu": draw(st.integers(1, 9))}
        if draw(st.booleans()):
            del cost[draw(st.sampled_from(["cpu", "gpu"]))]
        nodes.append(
            {
                "id": f"v{k}",
                "memory": draw(st.integers(0, 4)),
                "cost": cost,
                "inputs": [f"v{i}" for i in inputs],
            }
        )
    devices = [
        {"name": "cpu", "memory": draw(st.integers(0, 12))},
        {"name": "gpu", "memory": draw(st.integers(0, 12))},
    ]
    links = [
        {"from": "cpu", "to": "gpu", "bandwidth": 1000},
        {"from": "gpu", "to": "cpu", "bandwidth": 500, "latency_ms": 0.5},
    ]
    return {
        "format": "remat-graph",
        "version": 1,
        "name": "random",
        "devices": devices,
        "links": links,
        "nodes": nodes,
    }
