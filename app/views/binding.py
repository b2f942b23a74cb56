"""What binds at one step of a schedule: which device is at its memory limit, which tensor had
to be recomputed or copied, in words for the step-through panel.

Everything comes from the replayed timeline (and ``solver.execution.explain.recompute_reason`` for a
recomputation), so the sentence agrees with the Gantt chart and the memory curves.
"""

from __future__ import annotations

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.document.units import format_size
from solver.execution.explain import recompute_reason
from solver.execution.simulate import Timeline

__all__ = ["AT_LIMIT", "binding_constraints"]

AT_LIMIT = 0.95
"""A device whose activations fill this share of its budget counts as at its limit."""


def binding_constraints(
    graph: Graph, schedule: Schedule, timeline: Timeline, index: int
) -> list[str]:
    """Sentences naming what constrains operation ``index``; empty when nothing binds.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.optimize.baselines import checkpoint_all
    >>> from solver.execution.simulate import simulate
    >>> g = unit_chain(1, budget=3)
    >>> s = checkpoint_all(g, "cpu")
    >>> binding_constraints(g, s, simulate(g, s), 2)
    ['cpu is at its limit: 3 B of its 3 B activation budget (100%) while n2 runs']
    """
    op = timeline.ops[index]
    found = []
    for device, curve in timeline.memory.items():
        used, _ = curve.during(op)  # exact for a zero-cost op too (its step has no width)
        budget = timeline.activation_budgets.get(device, 0)
        if budget and used >= AT_LIMIT * budget:
            found.append(
                f"{device} is at its limit: {format_size(used)} of its {format_size(budget)} "
                f"activation budget ({used / budget:.0%}) while {op.node} runs"
            )
    if op.recompute:
        reason = recompute_reason(graph, schedule, timeline, index)
        found.append(f"{op.node} is recomputed: {reason}" if reason else f"{op.node} is recomputed")
    for tr in timeline.transfers:
        if tr.stage == op.stage and tr.consumer == op.node and tr.target == op.device:
            found.append(
                f"{tr.tensor} is copied from {tr.source}: {op.node} needs it on {op.device}, "
                f"where it is not resident"
            )
    return found
