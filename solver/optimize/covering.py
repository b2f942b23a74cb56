"""Run counts that cover every schedule worth having: the interval model without its ``C``.

The interval model (:mod:`solver.optimize.intervals`) allows each node a fixed number of runs
per device, so what CP-SAT proves there holds under that restriction only. Yet a schedule that
costs no more than an incumbent ``U`` cannot run a node often: every run costs time, and
every run beyond the first must feed a later run of a consumer (one that feeds nothing can be
dropped, which frees memory and costs nothing). :func:`covering_runs` turns both facts into
per-(device, node) counts that hold *every* schedule costing at most ``U`` in a reduced form
(with no run that feeds nothing, which is never dearer). An interval model built with these
counts therefore has the problem's own optimum whenever that optimum is at most ``U``, and
CP-SAT's bound on it, capped at ``U``, is a bound of the problem: no restriction remains.

The counts, for node ``v`` on device ``d`` (``c`` its compute time there, ``c_min`` its
cheapest, ``base`` the sum over all nodes of ``c_min``):

- **cost**: every node runs at least once, so ``k * c + (base - c_min) <= U``;
- **stages**: at most one run per stage, in stages ``v .. n-1``: ``k <= n - v``;
- **consumers**: runs of ``v`` beyond its frontier run each feed a run of a consumer:
  ``k <= 1 + sum over consumers w and devices d' of k[d', w]``, filled in reverse
  topological order; a node nothing reads runs once.

Nodes computed once keep one run; a device that cannot run a node gets none.
"""

from __future__ import annotations

import math

import numpy as np

from solver.document.graph import Graph

__all__ = ["covering_runs", "serve_pairs"]


def covering_runs(graph: Graph, upper_bound: float, able: list[list[bool]]) -> np.ndarray | None:
    """Per (device, node) run counts that hold every reduced schedule costing at most
    ``upper_bound`` (module docstring); ``None`` when the costs give no finite count (an
    infinite bound or a node no device can run).

    ``able[d][v]`` says whether device ``d`` can run node ``v`` at all.

    >>> from solver.document.generators import unit_chain
    >>> g = unit_chain(2)
    >>> covering_runs(g, float(sum(g.cost[0])) + 1.0, [[True] * g.n]).tolist()
    [[2, 2, 2, 2, 1]]
    """
    n, num_d = graph.n, graph.num_devices
    cost = np.where(np.array(able, dtype=bool), graph.cost, np.nan)
    if not math.isfinite(upper_bound) or np.any(np.all(np.isnan(cost), axis=0)):
        return None
    cheapest = np.nanmin(cost, axis=0)
    base = float(cheapest.sum())
    if not math.isfinite(base):
        return None
    slack = max(0.0, upper_bound - base)
    once = set(graph.once)
    counts = np.zeros((num_d, n), dtype=np.int64)
    for v in reversed(range(n)):
        users = graph.users[v]
        fed = 1 + int(counts[:, list(users)].sum()) if users else 1
        limit = 1 if v in once else min(n - v, fed)
        for d in range(num_d):
            c = float(cost[d, v])
            if math.isnan(c):
                continue
            k = limit
            if c > 0:
                k = min(k, int(math.floor((slack + float(cheapest[v])) / c * (1 + 1e-12))))
            counts[d, v] = max(k, 0)
    return counts


def serve_pairs(graph: Graph, counts: np.ndarray) -> int:
    """How many producer-to-consumer literals the interval model with ``counts`` has: its
    size, which grows with the product of the counts along each edge."""
    per_node = counts.sum(axis=0)
    return int(sum(int(per_node[u]) * int(per_node[v]) for u, v in graph.edge_pairs))
