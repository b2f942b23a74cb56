"""When a result is weak, say why and what would help, in one sentence a user can act on.

A gap left at the time limit, a schedule only proven optimal under the interval model's
restriction, a budget half unused by a solve that was cut short, no schedule at all: each
has a cause the solve knows (the model's size, the formulation, whether CP-SAT is
installed) and a remedy. The CLI prints the sentence, ``--json`` and the window show it.
"""

from __future__ import annotations

import re

from solver.document.graph import Graph
from solver.optimize.backends import registry
from solver.optimize.bounds import no_remat_peak
from solver.optimize.handover import STALLED
from solver.optimize.incumbents import SolveResult
from solver.optimize.interval_solve import INTERVALS_LABEL
from solver.optimize.roomier import Roomier
from solver.status import SolveStatus

__all__ = ["IDLE_SHARE", "WEAK_GAP", "advise", "for_the_window", "idle_devices"]

WEAK_GAP = 0.01
"""A gap above this (1 %) is worth a word on what would narrow it."""
IDLE_SHARE = 0.5
"""A device whose peak stays below this share of its budget in a schedule that still
recomputes is named: the solve was cut short before it could use that memory."""


WINDOW_NAMES = (
    (re.compile(r"--runs (\d+)"), r"Runs per node at \1"),
    (re.compile(r"--solver cpsat"), "Solver: CP-SAT"),
)
"""The options :func:`advise` names by their command-line flags, as the window names them
(the solver panel's "Runs per node" box and "Solver" list)."""


def for_the_window(advice: str) -> str:
    """``advice`` naming the window's controls instead of the command line's flags.

    >>> for_the_window("... restriction (--runs 3 starts there)")
    '... restriction (Runs per node at 3 starts there)'
    """
    for flag, control in WINDOW_NAMES:
        advice = flag.sub(control, advice)
    return advice


def idle_devices(result: SolveResult, no_remat_peak: int | None = None) -> list[str]:
    """Devices a cut-short schedule leaves mostly unused while it still recomputes.

    With the graph's ``no_remat_peak``, a budget at or above it is never named: keeping every
    tensor fits there, so the room left over says nothing about the solve (a 64 GiB host
    next to a GPU always looked half unused, and the advice sent the user after it).
    """
    t = result.timeline
    if t is None or result.status is SolveStatus.OPTIMAL or t.recomputations == 0:
        return []
    idle = []
    for device, peak in t.peaks.items():
        budget = t.activation_budgets.get(device, 0)
        if no_remat_peak is not None and budget >= no_remat_peak:
            continue
        if budget and peak < IDLE_SHARE * budget:
            idle.append(device)
    return idle


def advise(
    result: SolveResult,
    graph: Graph,
    time_limit_s: float,
    backend: str,
    roomier: Roomier | None = None,
) -> str:
    """One sentence on what would help ``result``, or "" when nothing needs saying;
    ``roomier``: limits at which the construction found a schedule, for a result without one
    (out of time, or proven infeasible)."""
    if result.status is SolveStatus.INFEASIBLE:
        # proven: neither time nor a backend helps, only memory; how much, where it is known
        return roomier.describe() if roomier is not None else ""
    if result.status in (SolveStatus.OPTIMAL, SolveStatus.ERROR):
        return ""
    have_cpsat = registry.BACKENDS["cpsat"].available()
    longer = f"a longer time limit than {time_limit_s:g} s"
    if result.schedule is None:
        if result.status is SolveStatus.CANCELLED:
            return ""
        tips = [longer, "a larger budget"]
        if not have_cpsat:
            tips.append("CP-SAT (pip install -e '.[cpsat]'), which finds schedules sooner")
        found = f"; {roomier.describe()}" if roomier is not None else ""
        return "no schedule yet: try " + ", ".join(tips) + found
    parts: list[str] = []
    gap = result.gap
    restricted = result.restricted
    if restricted is not None and restricted.proven and gap is not None and gap > 1e-6:
        parts.append(
            f"CP-SAT proved this the best schedule with at most {restricted.runs} "
            f"{restricted.runs_word} of each node per device; the {gap:.1%} gap is to a bound "
            "that holds without that restriction (with more time it searches with more runs "
            f"per node itself; --runs {restricted.runs + 1} starts there)"
        )
    elif gap is not None and gap > WEAK_GAP:
        why = f"the gap is {gap:.1%}"
        if result.variables > 200_000:
            why += f" with a model of {result.variables:,} variables"
        tips = [longer]
        if not have_cpsat and graph.n > 100:
            tips.append("CP-SAT (pip install -e '.[cpsat]') for large graphs")
        stalled = STALLED in result.message
        if stalled:
            tips.append("the CP-SAT solver (--solver cpsat) on both cores from the start")
        elif (
            backend != "cpsat"
            and have_cpsat
            and graph.n > 100
            and result.restricted is None  # it has not run yet
            and not result.formulation.startswith(INTERVALS_LABEL)  # nor was it the plan
        ):
            tips.append("the CP-SAT solver (--solver cpsat)")
        parts.append(f"{why}: try " + " or ".join(tips))
        if stalled:
            label = registry.backend(backend).label
            parts.append(
                f"{label} did not solve its model's root LP in time, so CP-SAT took over late"
            )
    idle = idle_devices(result, no_remat_peak(graph))
    if idle:
        parts.append(
            f"the solve was cut short while {', '.join(idle)} still used less than "
            f"{IDLE_SHARE:.0%} of its budget; more time may trade recomputation for memory"
        )
    return "; ".join(parts)
