"""What budget would do: when a solve ends without a schedule, the memory limits at which the
construction finds one.

"Try a larger budget" leaves a user guessing how much larger. Some budgets are feasible yet
no method we have finds a schedule at them (narrow random layered graphs, docs/solver.md);
a little more memory often makes the construction succeed at once. So a solve that ends with
no schedule bisects between the user's limits and the no-rematerialization peak, raising
every limited device by the same share of its way there, and names the least limits at
which :func:`~solver.optimize.construct.construct_best` returned a valid schedule. That is a
statement about the construction only: a schedule may exist below it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from solver.document.graph import Graph
from solver.document.units import format_size
from solver.optimize.backends._common import Cancel
from solver.optimize.bounds import no_remat_peak
from solver.optimize.construct import construct_best

__all__ = ["Roomier", "roomier_limits"]

PROBES = 7
"""Bisection steps at most: the share is known within 1/128 of the way to the peak."""
PROBE_SECONDS = 3.0
"""The time the search may take in all (it runs after the solve's own limit)."""


@dataclass(frozen=True)
class Roomier:
    """Memory limits (bytes per device name) at which the construction found a schedule, and
    each one's budget as a percentage of the no-rematerialization peak (``--budget``'s %)."""

    limits: dict[str, int]
    percents: dict[str, float]

    def describe(self) -> str:
        parts = [
            f"{name} at {format_size(limit)} ({limit:,} B, {self.percents[name]:.1f} % of the peak "
            "without recomputation)"
            for name, limit in self.limits.items()
        ]
        return "the construction finds a schedule with " + " and ".join(parts)


def roomier_limits(
    graph: Graph, seconds: float = PROBE_SECONDS, cancel: Cancel | None = None
) -> Roomier | None:
    """The least limits found (see the module docstring) within ``seconds``, or ``None``
    (no limited device, the peak itself too little, or out of time)."""
    peak = no_remat_peak(graph)
    raised = {
        d.name: max(d.fixed_memory + peak - d.memory_limit, 0)
        for d in graph.devices
        if d.memory_limit < d.fixed_memory + peak
    }
    if not raised or peak <= 0:
        return None
    deadline = time.monotonic() + seconds

    def limits_at(share: float) -> dict[str, int]:
        return {
            name: graph.device(name).memory_limit + math.ceil(share * room)
            for name, room in raised.items()
        }

    def fits(share: float, probes_left: int) -> bool:
        # each probe its share of the time left: a stuck construction restarts until its
        # deadline, and would take the whole of it at the first budget too small
        now = time.monotonic()
        until = now + max(deadline - now, 0.0) / (probes_left + 1)
        probe = graph.with_memory_limits(limits_at(share))
        return construct_best(probe, deadline=until, cancel=cancel).timeline is not None

    low, high = 0.0, 1.0
    if not fits(high, PROBES):
        return None
    for step in range(PROBES):
        if time.monotonic() > deadline or (cancel is not None and cancel.is_set()):
            break
        middle = (low + high) / 2
        if fits(middle, PROBES - step - 1):
            high = middle
        else:
            low = middle
    limits = limits_at(high)
    percents = {
        name: math.ceil(1000 * (limit - graph.device(name).fixed_memory) / peak) / 10
        for name, limit in limits.items()
    }
    return Roomier(limits, percents)
