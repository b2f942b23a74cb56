"""A greedy heterogeneous heuristic: each node on the device where it is cheapest *and fits*.

Spec/model.md §5 welcomes such heuristics, chiefly as warm starts: on real networks CBC's own
heuristics often find nothing better than a single-device baseline for minutes, and a
heterogeneous start gives it (and the user) a good schedule at once.
"""

from __future__ import annotations

import math

from solver.baselines import BaselineResult
from solver.graph import Graph
from solver.schedule import Operation, Schedule, SolverInfo, Stage
from solver.simulate import simulate

__all__ = ["greedy_heterogeneous"]


def greedy_heterogeneous(graph: Graph) -> BaselineResult:
    """Place node after node, never recomputing, on the device with the least compute plus
    transfer time among those with room for it; keep every tensor where it was computed
    until its last use.

    Examples
    --------
    >>> from solver.generators import unit_chain
    >>> greedy_heterogeneous(unit_chain(3, budget=100)).timeline.total_ms
    7.0
    """
    last_use = [max(users, default=-1) for users in graph.users]
    holders: dict[int, int] = {}  # tensor -> the device it lives on
    used = [0] * graph.num_devices
    stages = []
    for t in range(graph.n):
        choice = _cheapest_fitting(graph, t, holders, used)
        if choice is None:
            need = int(graph.memory[t])
            return BaselineResult(
                None,
                None,
                f"greedy: no device has room for {graph.nodes[t].id} ({need} bytes and inputs)",
            )
        d = choice
        inputs = {
            graph.nodes[i].id: graph.devices[holders[i]].name
            for i in graph.inputs[t]
            if holders[i] != d
        }
        holders[t] = d
        used[d] += int(graph.memory[t])
        for i in [i for i in holders if last_use[i] <= t]:
            used[holders.pop(i)] -= int(graph.memory[i])
        keep: dict[str, set[str]] = {}
        for i, dev in holders.items():
            keep.setdefault(graph.devices[dev].name, set()).add(graph.nodes[i].id)
        op = Operation(graph.nodes[t].id, graph.devices[d].name, inputs)
        stages.append(Stage((op,), {k: frozenset(v) for k, v in keep.items()}))
    budgets = {dev.name: dev.memory for dev in graph.devices}
    schedule = Schedule(graph.name, budgets, tuple(stages), SolverInfo(method="greedy"))
    timeline = simulate(graph, schedule)
    if not timeline.valid:
        return BaselineResult(None, None, f"greedy: {timeline.violation}")
    return BaselineResult(schedule, timeline)


def _cheapest_fitting(graph: Graph, t: int, holders: dict[int, int], used: list[int]):
    best, best_cost = None, math.inf
    for d, device in enumerate(graph.devices):
        cost = float(graph.cost[d, t])
        if math.isnan(cost):
            continue
        copies = 0
        for i in graph.inputs[t]:
            if holders[i] != d:
                cost += float(graph.transfer[graph.edge_number[i, t], holders[i], d])
                copies += int(graph.memory[i])
        if used[d] + int(graph.memory[t]) + copies <= device.budget and cost < best_cost:
            best, best_cost = d, cost
    return best
