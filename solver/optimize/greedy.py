"""Greedy heterogeneous heuristics: each node on a device where it is cheap *and fits*.

docs/model.md §5 welcomes such heuristics, chiefly as warm starts: on real networks CBC's own
heuristics often find nothing better than a single-device baseline for minutes, and a
heterogeneous start gives it (and the user) a good schedule at once.
"""

from __future__ import annotations

import math

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.execution.simulate import simulate
from solver.optimize.baselines import (
    BaselineResult,
    best_fitting,
    chen_greedy_candidates,
    schedule_with_checkpoints,
)
from solver.optimize.bounds import node_requirement

__all__ = [
    "greedy_heterogeneous",
    "cheapest_placement",
    "chen_heterogeneous",
    "best_heterogeneous",
]


def greedy_heterogeneous(graph: Graph) -> BaselineResult:
    """Place node after node, never recomputing, on the device with the least compute plus
    transfer time among those with room for it; keep every tensor where it was computed
    until its last use.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
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
            need = int(graph.output_bytes[t]) + int(graph.workspace[t])
            what = (
                "bytes with its workspace, and inputs" if graph.workspace[t] else "bytes and inputs"
            )
            return BaselineResult(
                None,
                None,
                f"greedy: no device has room for {graph.nodes[t].id} ({need} {what})",
            )
        d = choice
        inputs = {
            graph.nodes[i].id: graph.devices[holders[i]].name
            for i in graph.inputs[t]
            if holders[i] != d
        }
        holders[t] = d
        used[d] += int(graph.output_bytes[t])
        for i in [i for i in holders if last_use[i] <= t]:
            used[holders.pop(i)] -= int(graph.output_bytes[i])
        keep: dict[str, set[str]] = {}
        for i, dev in holders.items():
            keep.setdefault(graph.devices[dev].name, set()).add(graph.nodes[i].id)
        op = Operation(graph.nodes[t].id, graph.devices[d].name, inputs)
        stages.append(Stage((op,), {k: frozenset(v) for k, v in keep.items()}))
    schedule = Schedule(graph.name, graph.memory_limits, tuple(stages), SolverInfo(method="greedy"))
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
                cost += graph.edge_transfer_ms(graph.edge_number[i, t], holders[i], d)
                copies += int(graph.output_bytes[i])
        running = int(graph.output_bytes[t]) + int(graph.workspace[t]) + copies
        if used[d] + running <= device.activation_budget and cost < best_cost:
            best, best_cost = d, cost
    return best


def cheapest_placement(graph: Graph) -> list[str] | None:
    """Each node on its cheapest device among those that can hold it with all its inputs."""
    placement = []
    for k in range(graph.n):
        need = node_requirement(graph, k)
        able = [
            (float(graph.cost[d, k]), device.name)
            for d, device in enumerate(graph.devices)
            if not math.isnan(graph.cost[d, k]) and need <= device.activation_budget
        ]
        if not able:
            return None
        placement.append(min(able)[1])
    return placement


def chen_heterogeneous(graph: Graph, repairs: int = 24) -> BaselineResult:
    """Chen's checkpointing over the cheapest placement: most nodes on the fast device with
    segments recomputed there, nodes too big for it on another device, inputs copied.

    When no candidate fits, the node where the candidate that got furthest ran out of memory
    moves to its next cheapest device with room, up to ``repairs`` times.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> chen_heterogeneous(unit_chain(3, budget=100)).timeline.total_ms
    7.0
    """
    placement = cheapest_placement(graph)
    if placement is None:
        return BaselineResult(None, None, "chen-heterogeneous: some node fits on no device")
    method = "chen-heterogeneous"
    for _ in range(repairs + 1):
        keep_all = schedule_with_checkpoints(graph, placement, lambda i, t, r: True, method)
        tries = _affordable_tries(keep_all)
        found = best_fitting(
            graph, [keep_all, *chen_greedy_candidates(graph, placement, tries, method)]
        )
        if found.schedule is not None or not _move_off(graph, placement, found.violations):
            return found
    return found


MAX_KEPT_ENTRIES = 40_000_000
"""Kept-tensor entries (a tensor kept on a device into a stage) that the candidates of
:func:`chen_heterogeneous` may hold at once, about 1 GB: they are all built before they are
replayed, and on a 10,000-node graph with long edges each held 25 million (the 25 of them
ran out of 10 GiB)."""


def _affordable_tries(keep_all: Schedule) -> int:
    """Chen's 24 segment sizes, or fewer when that many schedules like ``keep_all`` (the
    largest: it keeps everything) would not fit in :data:`MAX_KEPT_ENTRIES`."""
    entries = sum(len(ids) for stage in keep_all.stages for ids in stage.keep.values())
    return max(1, min(24, MAX_KEPT_ENTRIES // max(entries, 1) - 1))


def _move_off(graph: Graph, placement: list[str], violations) -> bool:
    """Move the node of the latest memory violation to its next cheapest device with room."""
    memory = [v for v in violations if v.rule == "memory" and v.node is not None]
    if not memory:
        return False
    worst = max(memory, key=lambda v: v.stage)
    k = graph.index[worst.node]
    need = node_requirement(graph, k)
    others = [
        (float(graph.cost[d, k]), device.name)
        for d, device in enumerate(graph.devices)
        if device.name != worst.device
        and not math.isnan(graph.cost[d, k])
        and need <= device.activation_budget
    ]
    if not others or placement[k] != worst.device:
        return False
    placement[k] = min(others)[1]
    return True


def best_heterogeneous(graph: Graph) -> BaselineResult:
    """The faster of :func:`greedy_heterogeneous` and :func:`chen_heterogeneous`.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> best_heterogeneous(unit_chain(3, budget=100)).timeline.total_ms
    7.0
    """
    results = [greedy_heterogeneous(graph), chen_heterogeneous(graph)]
    valid = [
        (r.timeline.total_ms, i)
        for i, r in enumerate(results)
        if r.schedule is not None and r.timeline is not None
    ]
    if not valid:
        return BaselineResult(None, None, "; ".join(r.reason for r in results))
    return results[min(valid)[1]]
