"""Solving the retention-interval model with CP-SAT, as honestly as the paper's model.

The interval model (:mod:`solver.optimize.intervals`) restricts every node to ``C`` runs per
device, so CP-SAT's proof is a proof for that restriction only. A result here is therefore
"optimal" only when its schedule meets a bound that is valid without the restriction (every
node once on its cheapest device, or the relaxation of :mod:`solver.optimize.relaxation`);
otherwise it is "feasible" with that valid bound, and :class:`Restricted` records what CP-SAT
proved: "optimal among schedules that compute each node at most C times per device".
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from solver.document.schedule import SolverInfo
from solver.optimize.backends.cpsat import run_cpsat
from solver.optimize.incumbents import ProgressCallback, Restricted, SolveResult
from solver.optimize.intervals import (
    DEFAULT_RUNS,
    BuildStopped,
    IntervalModel,
    build_interval_model,
    schedule_from_solution,
)
from solver.status import Progress, SolveStatus

__all__ = ["INTERVALS_LABEL", "solve_intervals"]

INTERVALS_LABEL = "retention intervals"


def solve_intervals(
    start,
    options,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    runs: int = DEFAULT_RUNS,
) -> SolveResult:
    """Build the interval model hinted with the incumbent, run CP-SAT until the deadline,
    and conclude (module docstring). ``start`` is a :class:`~solver.optimize.solve.SolveStart`
    and ``options`` its :class:`~solver.optimize.solve.SolveOptions`."""
    best, started, deadline = start.best, start.started, start.deadline
    graph = best.graph
    label = f"{INTERVALS_LABEL} (C={runs})"
    base = replace(start.base, formulation=label)
    with best.lock:
        hint = (best.schedule, best.timeline) if best.schedule is not None else None
    try:
        model = build_interval_model(graph, runs, hint, deadline=deadline, cancel=cancel)
    except BuildStopped as exc:
        status = SolveStatus.CANCELLED if exc.reason == "cancel" else SolveStatus.TIME_LIMIT
        why = "cancelled" if exc.reason == "cancel" else "the time limit ran out"
        return best.result(replace(base, status=status), f"{why} while building the model")
    base = replace(
        base,
        build_seconds=time.monotonic() - started,
        variables=model.num_variables,
        constraints=model.num_constraints,
    )
    best.note(
        f"{label}: model built in {base.build_seconds:.1f} s: {model.num_variables:,} "
        f"variables, {model.num_constraints:,} constraints"
    )
    remaining = deadline - time.monotonic()
    if remaining <= 0.05 or (cancel is not None and cancel.is_set()):
        stopped = SolveStatus.CANCELLED if cancel is not None and cancel.is_set() else None
        return best.result(replace(base, status=stopped or SolveStatus.TIME_LIMIT), "stopped")
    found = _Solutions(model, best, on_progress)
    outcome = run_cpsat(
        model.model,
        remaining,
        threads=options.threads or 1,
        cancel=cancel,
        on_solution=found.offer,
        on_log=found.log if on_progress is not None else None,
    )
    restricted_bound = None if outcome.bound is None else outcome.bound / model.scale
    proven = outcome.status is SolveStatus.OPTIMAL
    restricted = Restricted(runs=runs, bound=restricted_bound, proven=proven)
    base = replace(
        base,
        seconds=time.monotonic() - started,
        log_tail=outcome.log_tail,
        restricted=restricted,
    )
    if outcome.status is SolveStatus.INFEASIBLE and best.timeline is None:
        why = (
            f"CP-SAT proved that no schedule fits when each node runs at most {runs} times "
            "per device; more runs per node may fit"
        )
        return replace(base, status=SolveStatus.TIME_LIMIT, message=why)
    if best.timeline is None:
        status = outcome.status if outcome.status is not SolveStatus.FEASIBLE else SolveStatus.ERROR
        return best.result(replace(base, status=status), "CP-SAT found no schedule")
    if proven and restricted_bound is not None and best.cost is not None:
        why = (
            f"optimal among schedules that compute each node at most {runs} times per device "
            f"(CP-SAT proved no such schedule costs less than {restricted_bound:.6g} ms)"
        )
    elif outcome.status is SolveStatus.CANCELLED:
        why = "cancelled"
    elif outcome.status in (SolveStatus.INFEASIBLE, SolveStatus.ERROR):
        why = (
            f"CP-SAT reported the interval model {outcome.status.value}, yet this schedule "
            f"({best.source}) replays validly; please report this graph"
        )
    else:
        why = f"the time limit ran out; the best schedule found is {best.source}'s"
    cancelled = outcome.status is SolveStatus.CANCELLED
    final = SolveStatus.CANCELLED if cancelled else SolveStatus.FEASIBLE
    return best.result(replace(base, status=final), why)


class _Solutions:
    """Reads each CP-SAT solution as a schedule, replays it, offers it, reports progress."""

    def __init__(self, model: IntervalModel, best, on_progress: ProgressCallback | None):
        self.model, self.best, self.on_progress = model, best, on_progress

    def offer(self, values, objective: float) -> None:
        info = SolverInfo(self.best.method, self.best.backend, SolveStatus.FEASIBLE)
        schedule = schedule_from_solution(self.model, lambda var: values[var.index], info)
        self.best.offer_decoded(schedule)

    def log(self, line: str) -> None:
        if self.on_progress is None or not line.strip():
            return
        with self.best.lock:
            bound = self.best.floor_bound()
            self.on_progress(
                Progress(self.best.elapsed(), self.best.cost, bound, None, line.rstrip())
            )
