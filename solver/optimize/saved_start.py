"""A schedule at once under a saved-bytes limit: keep a knapsack's choice across the boundary.

A saved-bytes limit (docs/solver.md, "Saved-bytes budget") bounds what a device holds when the
backward starts. None of the other starts looks at it: checkpoint-all saves everything, and the
construction and the baselines fit a peak. Without a start CBC searched alone, and on op-level
imports of 130-330 nodes it found no schedule in 15 s (MobileNet-v2 at torch's 0.1, BERT at
0.3: bench/README.md, "PyTorch's memory-budget partitioner").

This start is the simplest schedule that meets the limit whenever any schedule can, with no
peak limit: the forward keeps everything; at the boundary it keeps a set ``K`` of forward
tensors the backward reads (the nodes computed once first, then by cost per byte while ``K``
fits); each backward stage recomputes what it needs from ``K`` and keeps it until its last use.
The simulator replays it, as every schedule (a peak limit the graph also has may refuse it).
"""

from __future__ import annotations

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.execution.simulate import Timeline, simulate
from solver.optimize.baselines import schedule_with_checkpoints

__all__ = ["saved_limit_start"]


def saved_limit_start(graph: Graph) -> tuple[Schedule, Timeline] | None:
    """The cheapest valid replay of :func:`_keep_at_boundary`'s schedules on each device with a
    saved-bytes limit that can run every node; ``None`` without a limit or a valid one."""
    boundary = graph.boundary
    if boundary is None or not graph.saved_limits:
        return None
    best: tuple[Schedule, Timeline] | None = None
    for name, limit in graph.saved_limits.items():
        d = graph.device_index[name]
        if np.isnan(graph.cost[d]).any():
            continue
        for kept in _kept_sets(graph, d, boundary, limit):

            def keep(i: int, t: int, _recomputed: bool, kept: set[int] = kept) -> bool:
                return t != boundary - 1 or i in kept

            schedule = schedule_with_checkpoints(graph, name, keep, f"saved-limit start:{name}")
            timeline = simulate(graph, schedule)
            if timeline.valid and (best is None or timeline.total_ms < best[1].total_ms):
                best = (schedule, timeline)
    return best


def _kept_sets(graph: Graph, d: int, boundary: int, limit: int) -> list[set[int]]:
    """Candidate sets to hold across the boundary: what the nodes computed once force
    (:func:`_held_for_once`), then a greedy knapsack by value per byte, for two values: a
    node's own cost, and the cost of recomputing it with every ancestor outside the first set
    (a tensor deep in a chain saves its whole chain)."""
    sizes = graph.output_bytes
    cost = np.nan_to_num(graph.cost[d], nan=0.0, posinf=1e300)
    last_use = [max(users, default=-1) for users in graph.users]
    read_later = [i for i in range(boundary) if last_use[i] >= boundary]
    once = _held_for_once(graph, read_later, set(graph.once))
    room = limit - int(sum(int(sizes[i]) for i in once))
    if room < 0:
        return []
    first = _greedy(read_later, once, room, sizes, cost)
    chain = _chain_costs(graph, boundary, first, cost)
    second = _greedy(read_later, once, room, sizes, chain)
    return [first, second] if second != first else [first]


def _held_for_once(graph: Graph, read_later: list[int], once: set[int]) -> set[int]:
    """What must cross the boundary because of the nodes computed once: each such node the
    backward reads, and each tensor the backward reads that recomputing would need one for (a
    dropout mask made from its draw, which cannot be drawn again; the draw itself is freed
    after its last forward use, as the schedule builder frees every tensor)."""
    held: set[int] = {i for i in read_later if i in once}
    for i in read_later:  # ascending: a held tensor shields the ones computed from it
        if _needs_once(graph, i, once, held):
            held.add(i)
    return held


def _needs_once(graph: Graph, i: int, once: set[int], held: set[int]) -> bool:
    """Whether recomputing ``i`` from ``held`` would run a node computed once."""
    if i in held:
        return False
    seen, stack = {i}, [i]
    while stack:
        for j in graph.inputs[stack.pop()]:
            if j in held or j in seen:
                continue
            if j in once:
                return True
            seen.add(j)
            stack.append(j)
    return False


def _greedy(
    candidates: list[int], kept: set[int], room: int, sizes: np.ndarray, value: np.ndarray
) -> set[int]:
    chosen = set(kept)
    ranked = sorted(
        (i for i in candidates if i not in kept),
        key=lambda i: -float(value[i]) / max(int(sizes[i]), 1),
    )
    for i in ranked:
        size = int(sizes[i])
        if size <= room and value[i] > 0:
            chosen.add(i)
            room -= size
    return chosen


def _chain_costs(graph: Graph, boundary: int, kept: set[int], cost: np.ndarray) -> np.ndarray:
    """Per forward node, its cost plus that of every ancestor not in ``kept`` (what
    recomputing it from ``kept`` would run, shared ancestors counted for each)."""
    total = np.zeros(graph.n)
    for i in range(boundary):
        ancestors: set[int] = set()
        stack = [j for j in graph.inputs[i] if j not in kept]
        while stack:
            j = stack.pop()
            if j in ancestors:
                continue
            ancestors.add(j)
            stack.extend(k for k in graph.inputs[j] if k not in kept)
        total[i] = cost[i] + sum(float(cost[j]) for j in ancestors)
    return total
