"""Small graphs whose optimal schedules are known by hand: for tests, teaching and benchmarks."""

from __future__ import annotations

from solver.document.graph import Device, Edge, Graph, Link, Node, make_graph

__all__ = ["unit_chain", "cpu_gpu_devices"]


def cpu_gpu_devices(cpu_memory: int, gpu_memory: int) -> tuple[list[Device], list[Link]]:
    """A CPU and a GPU joined both ways by a 12 GB/s link with 0.01 ms latency."""
    devices = [Device("cpu", "cpu", cpu_memory), Device("gpu", "gpu", gpu_memory)]
    links = [Link("cpu", "gpu", 12e9, 0.01), Link("gpu", "cpu", 12e9, 0.01)]
    return devices, links


def unit_chain(layers: int, budget: int = 10**6, devices: list[Device] | None = None) -> Graph:
    """Checkmate's unit chain: ``2n+1`` nodes of unit cost and memory, edges ``i -> i+1`` and
    ``i -> 2n-i`` (each backward node reads its forward node's output).

    Known optimum on one device (Checkmate, MLSys 2020): budget 2 is infeasible, budget 3 costs
    ``(2n+1) + n(n-1)/2``, a budget of at least ``n+2`` costs ``2n+1``.

    Examples
    --------
    >>> g = unit_chain(2)
    >>> g.n, g.edge_pairs
    (5, ((0, 1), (0, 4), (1, 2), (1, 3), (2, 3), (3, 4)))
    """
    size = 2 * layers + 1
    devices = devices or [Device("cpu", "cpu", budget)]
    cost = {d.name: 1.0 for d in devices}
    kinds = ["forward"] * layers + ["loss"] + ["backward"] * layers
    nodes = [Node(f"n{i}", 1, dict(cost), kind=kinds[i]) for i in range(size)]
    edges = [Edge(f"n{i}", f"n{i + 1}") for i in range(size - 1)]
    edges += [Edge(f"n{i}", f"n{size - 1 - i}") for i in range(layers)]
    return make_graph(f"unit chain ({layers} layers)", devices, nodes, edges)
