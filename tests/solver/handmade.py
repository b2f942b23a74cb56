"""Small hand-checkable graphs for the core tests, built through the public API."""

from __future__ import annotations

from solver.document.graph import Device, Edge, Graph, Link, Node, make_graph


def two_node_graph(cpu_to_gpu_ms: float | None = 3.0, budget: int = 10**6) -> Graph:
    """``a -> b``; ``a`` is cheap on the CPU (1 vs 10 ms), ``b`` on the GPU (10 vs 1 ms)."""
    devices = [Device("cpu", "cpu", budget), Device("gpu", "gpu", budget)]
    overrides = {"cpu->gpu": cpu_to_gpu_ms, "gpu->cpu": 8.0} if cpu_to_gpu_ms is not None else {}
    nodes = [Node("a", 100, {"cpu": 1.0, "gpu": 10.0}), Node("b", 100, {"cpu": 10.0, "gpu": 1.0})]
    return make_graph("two", devices, nodes, [Edge("a", "b", overrides)])


def fan_in_graph(gpu_budget: int, link: bool = True) -> Graph:
    """``a`` and ``b`` feed ``c``; every node costs 10 ms on the CPU and 1 ms on the GPU; each
    tensor is 1 byte and every copy 1 ms. With a GPU budget of 2, ``c`` (3 bytes with its
    inputs) cannot run on the GPU."""
    devices = [Device("cpu", "cpu", 100), Device("gpu", "gpu", gpu_budget)]
    links = [Link("cpu", "gpu", 1000.0, 0.0), Link("gpu", "cpu", 1000.0, 0.0)] if link else []
    nodes = [Node(x, 1, {"cpu": 10.0, "gpu": 1.0}) for x in "abc"]
    return make_graph("fan-in", devices, nodes, [Edge("a", "c"), Edge("b", "c")], links)
