"""Random layered DAGs like the ones remat solvers are benchmarked on (Moccasin, ICML 2023).

Moccasin's random graphs follow Appendix A of "Neural Topological Ordering for Computation
Graphs" (Gagrani et al., NeurIPS 2022): nodes in layers of varying width, each node reading a
few neighbours of the layer before, and a share of *skip connections* from a node to a much
later layer. The skip connections are what make them hard: a tensor read again many layers
later is either held all that time or recomputed. This module draws graphs of that shape with
our own generator (seeded, so a benchmark is reproducible); it copies no data.

Sizes are multiples of 10 bytes between 10 and 6,200, and costs whole milliseconds between 1
and 1,000, the ranges of Moccasin's published graphs; the source and the sink cost nothing.
Nodes are listed in a random topological order, as Moccasin's graphs come with one: budgets
are fractions of the peak of that order (the schedule order), and a layer-by-layer order would
already be close to the least memory any order needs.
"""

from __future__ import annotations

import math
import random

from solver.document.graph import Device, Edge, Graph, Node, make_graph

__all__ = ["random_layered"]


def random_layered(
    n: int,
    *,
    seed: int = 0,
    width: float | None = None,
    width_spread: float = 0.75,
    edge_density: float = 0.2,
    skip_density: float = 0.14,
    budget: int = 10**12,
    device: str = "cpu",
) -> Graph:
    """A random layered DAG of ``n`` nodes on one device with ``budget`` bytes.

    Parameters
    ----------
    n : int
        Number of nodes, at least 3 (a source, a sink and one layer between them).
    seed : int
        Seed of the random generator: the same arguments give the same graph.
    width : float, optional
        Mean layer width; default ``0.5 * sqrt(n)`` (5 at 100 nodes, 16 at 1,000).
    width_spread : float
        Each layer's width is drawn uniformly within ``width * (1 +- width_spread)``.
    edge_density : float
        Probability of each further edge from the layer before, beyond the one or two
        nearest neighbours every node reads.
    skip_density : float
        Share of nodes that also feed a node at least two layers later.
    budget : int
        The device's memory in bytes (scale it afterwards with ``Graph.with_memory_limits``).
    device : str
        The device's name.

    Examples
    --------
    >>> g = random_layered(100, seed=1)
    >>> g.n, len(g.edge_pairs) > g.n, g.nodes[0].id, g.nodes[-1].id
    (100, True, 'source', 'sink')
    >>> random_layered(100, seed=1).edge_pairs == g.edge_pairs
    True
    """
    if n < 3:
        raise ValueError(f"a layered graph needs at least 3 nodes; got {n}")
    rng = random.Random(seed)
    mean = width if width is not None else max(1.0, 0.5 * math.sqrt(n))
    inner = n - 2
    layers: list[int] = []
    while sum(layers) < inner:
        low, high = mean * (1 - width_spread), mean * (1 + width_spread)
        layers.append(max(1, round(rng.uniform(low, high))))
    layers[-1] -= sum(layers) - inner
    if layers[-1] <= 0:
        layers.pop()
        layers[-1] += inner - sum(layers)
    ids = [["source"]]
    count = 0
    for size in layers:
        ids.append([f"v{count + j}" for j in range(size)])
        count += size
    ids.append(["sink"])
    edges: set[tuple[str, str]] = set()
    read: set[str] = set()
    for level in range(1, len(ids)):
        before, here = ids[level - 1], ids[level]
        for j, node in enumerate(here):
            # The nearest one or two nodes of the layer before, by relative position.
            centre = (j + 0.5) / len(here) * len(before)
            near = sorted(range(len(before)), key=lambda p: abs(p + 0.5 - centre))
            chosen = near[: 1 + (rng.random() < 0.5)]
            chosen += [p for p in near[2:5] if rng.random() < edge_density]
            for p in chosen:
                edges.add((before[p], node))
                read.add(before[p])
        if level < len(ids) - 1:
            for node in before:  # every node is read by the layer after it
                if node not in read:
                    edges.add((node, here[rng.randrange(len(here))]))
    for level in range(1, len(ids) - 3):
        for node in ids[level]:
            if rng.random() < skip_density:
                target_level = rng.randrange(level + 2, len(ids) - 1)
                target = ids[target_level][rng.randrange(len(ids[target_level]))]
                edges.add((node, target))
    order = _random_topological_order(ids, edges, rng)
    nodes = []
    for node in order:
        end = node in ("source", "sink")
        cost = 0.0 if end else float(rng.randint(1, 1000))
        nodes.append(Node(node, 10 * rng.randint(1, 620), {device: cost}, op="random"))
    devices = [Device(device, "cpu", budget)]
    position = {node: k for k, node in enumerate(order)}
    ordered = sorted(edges, key=lambda e: (position[e[1]], position[e[0]]))
    edge_list = [Edge(a, b) for a, b in ordered]
    return make_graph(f"random layered n={n} seed={seed}", devices, nodes, edge_list)


def _random_topological_order(
    layers: list[list[str]], edges: set[tuple[str, str]], rng: random.Random
) -> list[str]:
    """Kahn's algorithm taking a random ready node each time (the source first, the sink last)."""
    waiting = {node: 0 for layer in layers for node in layer}
    users: dict[str, list[str]] = {node: [] for node in waiting}
    for a, b in sorted(edges):
        waiting[b] += 1
        users[a].append(b)
    ready = [node for node, count in waiting.items() if count == 0]
    order = []
    while ready:
        node = ready.pop(rng.randrange(len(ready)))
        order.append(node)
        for user in users[node]:
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.append(user)
    return order
