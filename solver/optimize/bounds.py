"""Memory landmarks of a graph and explanations of infeasible budgets (docs/model.md §4).

Two numbers frame every budget slider: below :func:`lower_bound` nothing can run at all, and
at or above :func:`no_remat_peak` nothing ever needs recomputing.
"""

from __future__ import annotations

import math

from solver.document.graph import Graph
from solver.document.units import format_size

__all__ = [
    "node_requirement",
    "lower_bound",
    "each_node_once",
    "devices_for",
    "no_remat_peak",
    "explain_infeasible",
]


def node_requirement(graph: Graph, k: int) -> int:
    """Bytes any device needs to run node ``k``: its output, all its inputs and its
    workspace (``M_k + sum M_i + W_k``, model.md §4 with docs/spec-notes.md's workspace)."""
    inputs = sum(int(graph.output_bytes[i]) for i in graph.inputs[k])
    return int(graph.output_bytes[k]) + inputs + int(graph.workspace[k])


def lower_bound(graph: Graph, device: str | None = None) -> int:
    """The smallest activation budget under which every node can still run.

    With ``device`` given: the largest requirement among the nodes that device can run (the
    budget below which that device cannot run all of them). Without: over all nodes.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> lower_bound(unit_chain(4))
    3
    """
    d = graph.device_index[device] if device is not None else None
    needs = [
        node_requirement(graph, k)
        for k in range(graph.n)
        if d is None or not math.isnan(graph.cost[d, k])
    ]
    return max(needs, default=0)


def each_node_once(graph: Graph) -> float | None:
    """A lower bound on every schedule's cost: each node computed once, on the cheapest
    device that can run it with its inputs (every stage computes its own node), no transfer.

    It needs no model, so a solve has a bound from its first moment at every size (an op-level
    import's relaxation may not be in before the time limit). ``None`` when some node fits on
    no device (:func:`explain_infeasible` says which).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> each_node_once(unit_chain(4, budget=3))  # 4 forward, 1 loss, 4 backward nodes
    9.0
    """
    total = 0.0
    for k in range(graph.n):
        able = devices_for(graph, k)
        if not able:
            return None
        total += min(able)[0]
    return total


def devices_for(graph: Graph, k: int) -> list[tuple[float, int]]:
    """``(cost, device)`` for each device that can run node ``k`` and hold it with its
    inputs: the devices any schedule may compute it on."""
    need = node_requirement(graph, k)
    return [
        (float(graph.cost[d, k]), d)
        for d, device in enumerate(graph.devices)
        if not math.isnan(graph.cost[d, k]) and need <= device.activation_budget
    ]


def no_remat_peak(graph: Graph) -> int:
    """Peak activation memory when every tensor is kept until its last use, on one device.

    This is the memory of the checkpoint-all schedule (no recomputation, no transfers; each
    node's workspace counted while it runs); a budget at or above it never needs
    rematerialization. Budgets given as a percentage refer
    to it.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> no_remat_peak(unit_chain(4))
    6
    """
    size = [int(m) for m in graph.output_bytes]
    work = [int(w) for w in graph.workspace]
    # the bytes held as node k starts, kept as a running sum: summing the live set at every
    # node took 1.7 s at 5,107 operations (about 900 tensors live at a time), this 0.03 s
    expiring: list[list[int]] = [[] for _ in range(graph.n)]  # by the node that reads last
    held = 0
    peak = 0
    for k, users in enumerate(graph.users):
        peak = max(peak, held + size[k] + work[k])
        last = max(users, default=-1)
        if last > k:
            held += size[k]
            expiring[last].append(k)
        for i in expiring[k]:
            held -= size[i]
    return peak


def explain_infeasible(graph: Graph) -> str | None:
    """Say why the budgets admit no schedule, when a cheap necessary condition shows it.

    Node ``k`` runs on some device with its output, all its inputs and its workspace in
    memory, so at least one device that can run it needs a budget of ``M_k + sum(M_i) + W_k``
    (model.md §4; docs/spec-notes.md, "Workspace memory"). Returns ``None`` when every node
    fits somewhere.
    """
    problems = []
    for k in range(graph.n):
        need = node_requirement(graph, k)
        able = [d for j, d in enumerate(graph.devices) if not math.isnan(graph.cost[j, k])]
        if all(d.activation_budget < need for d in able):
            have = ", ".join(_short_of(d.name, d.activation_budget, need) for d in able)
            workspace = int(graph.workspace[k])
            parts = "its output and inputs"
            if workspace:
                parts = f"its output and inputs, and a workspace of {format_size(workspace)}"
                if any(d.activation_budget >= need - workspace for d in able):
                    parts += ", without which it would fit"
            problems.append(
                f"node '{graph.nodes[k].id}' needs {format_size(need)} ({need} bytes: {parts}) "
                f"on one device, but the devices that can run it have {have}"
            )
    if not problems:
        return None
    shown = problems[:5] + ([f"... and {len(problems) - 5} more"] if len(problems) > 5 else [])
    return "no schedule can exist: " + "; ".join(shown) + "; raise a budget"


def _short_of(device: str, budget: int, need: int) -> str:
    """``gpu 572 MiB``; in bytes too when the budget rounds to the need's text (a budget 48
    bytes short read "needs 648 KiB ... have cpu 648 KiB")."""
    text = format_size(budget)
    return f"{device} {text} ({budget} bytes)" if text == format_size(need) else f"{device} {text}"
