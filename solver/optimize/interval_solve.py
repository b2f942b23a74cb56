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
from dataclasses import dataclass, replace

import numpy as np

from solver.document.schedule import SolverInfo
from solver.optimize.backends._common import AnyOf, Cancel
from solver.optimize.backends.cpsat import run_cpsat
from solver.optimize.backends.registry import BACKENDS
from solver.optimize.covering import covering_runs, serve_pairs
from solver.optimize.incumbents import ProgressCallback, Restricted, SolveResult
from solver.optimize.intervals import (
    DEFAULT_RUNS,
    MAX_RUNS,
    BuildStopped,
    IntervalModel,
    able_devices,
    build_interval_model,
    schedule_from_solution,
)
from solver.status import Progress, SolveStatus

__all__ = [
    "COVERING_PAIRS",
    "INTERVALS_LABEL",
    "IntervalSearch",
    "prove_covering",
    "prove_or_deepen",
    "search_intervals",
    "solve_intervals",
]

INTERVALS_LABEL = "retention intervals"


def solve_intervals(
    start,
    options,
    on_progress: ProgressCallback | None = None,
    cancel: Cancel | None = None,
    runs: int = DEFAULT_RUNS,
    after: threading.Event | None = None,
) -> SolveResult:
    """Build the interval model hinted with the incumbent, run CP-SAT until the deadline,
    and conclude (module docstring). ``start`` is a :class:`~solver.optimize.solve.SolveStart`
    and ``options`` its :class:`~solver.optimize.solve.SolveOptions`; ``after``: see
    :func:`search_intervals`."""
    best, started, deadline = start.best, start.started, start.deadline
    base = replace(start.base, formulation=f"{INTERVALS_LABEL} (C={runs})")
    search = search_intervals(
        best,
        deadline,
        cancel,
        None,
        runs,
        threads=options.threads or 2,
        on_progress=on_progress,
        after=after,
    )
    base = replace(
        base,
        build_seconds=search.build_seconds,
        variables=search.variables,
        constraints=search.constraints,
        seconds=time.monotonic() - started,
        log_tail=search.log_tail,
        restricted=search.restricted,
    )
    status = search.status
    if status is None:  # the model was not built or CP-SAT never started
        why = search.message or "stopped"
        stopped = SolveStatus.CANCELLED if cancel is not None and cancel.is_set() else None
        return best.result(replace(base, status=stopped or SolveStatus.TIME_LIMIT), why)
    if status is SolveStatus.INFEASIBLE and best.timeline is None:
        why = (
            f"CP-SAT proved that no schedule fits when each node runs at most {runs} times "
            "per device; more runs per node may fit"
        )
        return replace(base, status=SolveStatus.TIME_LIMIT, message=why)
    if best.timeline is None:
        failed = status if status is not SolveStatus.FEASIBLE else SolveStatus.ERROR
        return best.result(replace(base, status=failed), "CP-SAT found no schedule")
    restricted = search.restricted
    if restricted is not None and restricted.proven and time.monotonic() < deadline - 0.5:
        # The restricted optimum is in: prove it for every schedule in the time left, or
        # look with more runs per node. A bound that meets the incumbent sets best.closed:
        # _solve then says "optimal".
        prove_or_deepen(best, deadline, cancel, None, threads=options.threads or 2)
        with best.lock:
            restricted = best.restricted  # with more runs, when they were searched
        base = replace(
            base,
            seconds=time.monotonic() - started,
            restricted=restricted,
            formulation=f"{INTERVALS_LABEL} (C={restricted.runs if restricted else runs})",
        )
        if cancel is not None and cancel.is_set():
            status = SolveStatus.CANCELLED
    if restricted is not None and restricted.proven:
        why = restricted.describe() + " (CP-SAT's proof)"
    elif status is SolveStatus.CANCELLED:
        why = "cancelled"
    elif status in (SolveStatus.INFEASIBLE, SolveStatus.ERROR):
        why = (
            f"CP-SAT reported the interval model {status.value}, yet this schedule "
            f"({best.source}) replays validly; please report this graph"
        )
    else:
        why = f"the time limit ran out; the best schedule found is {best.source}'s"
    final = SolveStatus.CANCELLED if status is SolveStatus.CANCELLED else SolveStatus.FEASIBLE
    return best.result(replace(base, status=final), why)


@dataclass
class IntervalSearch:
    """What one CP-SAT run on the interval model did: its status (``None`` if it never ran),
    the model's size, what it proved under its restriction, and its log's tail."""

    status: SolveStatus | None = None
    build_seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    restricted: Restricted | None = None
    message: str = ""
    log_tail: tuple[str, ...] = ()


def search_intervals(
    best,
    deadline: float,
    cancel: Cancel | None,
    stop: Cancel | None,
    runs: int = DEFAULT_RUNS,
    threads: int = 1,
    on_progress: ProgressCallback | None = None,
    after: threading.Event | None = None,
) -> IntervalSearch:
    """Run CP-SAT on the interval model of ``best.graph``, hinted with ``best``'s incumbent,
    until ``deadline``, ``cancel`` or ``stop``; every solution is replayed and offered to
    ``best`` (an :class:`~solver.optimize.incumbents.Incumbents`), whose ``restricted``
    records what was proven. Used alone (``--solver cpsat``, or a graph too large for the
    paper's model) and beside CBC on the paper's model, in place of the neighbourhood search.
    With ``after``, the model is built only once that is set (another Python build that
    shares the interpreter: the relaxation's), the deadline or a stop.
    """
    stopper = AnyOf(cancel, stop)
    if after is not None:  # another build shares the interpreter: let it finish first
        while not after.wait(0.1) and time.monotonic() < deadline and not stopper.is_set():
            pass
    began = time.monotonic()
    with best.lock:
        hint = (best.schedule, best.timeline) if best.schedule is not None else None
    label = f"{INTERVALS_LABEL} (C={runs})"
    try:
        model = build_interval_model(best.graph, runs, hint, deadline=deadline, cancel=stopper)
    except BuildStopped as exc:
        why = "cancelled" if exc.reason == "cancel" else "the time limit ran out"
        return IntervalSearch(message=f"{why} while the interval model was built")
    built = time.monotonic() - began
    best.note(
        f"{label}: model built in {built:.1f} s: {model.num_variables:,} variables, "
        f"{model.num_constraints:,} constraints"
    )
    search = IntervalSearch(
        build_seconds=built, variables=model.num_variables, constraints=model.num_constraints
    )
    remaining = deadline - time.monotonic()
    if remaining <= 0.05 or stopper.is_set():
        search.message = "stopped before CP-SAT started"
        return search
    found = _Solutions(model, best, on_progress)
    outcome = run_cpsat(
        model.model,
        remaining,
        threads=threads,
        cancel=stopper,
        on_solution=found.offer,
        on_log=found.log if on_progress is not None else None,
    )
    bound = None if outcome.bound is None else outcome.bound / model.scale
    search.restricted = Restricted(runs, bound, outcome.status is SolveStatus.OPTIMAL)
    search.status = outcome.status
    if stop is not None and stop.is_set() and outcome.status is SolveStatus.CANCELLED:
        search.status = SolveStatus.FEASIBLE  # stopped because the other solver finished
    search.log_tail = outcome.log_tail
    with best.lock:
        best.restricted = search.restricted
    if search.restricted.proven:
        best.note(f"CP-SAT: {search.restricted.describe()}")
    return search


class _Solutions:
    """Reads each CP-SAT solution as a schedule, replays it, offers it, reports progress."""

    def __init__(self, model: IntervalModel, best, on_progress: ProgressCallback | None):
        self.model, self.best, self.on_progress = model, best, on_progress

    def offer(self, values, objective: float) -> None:
        """Replay and offer a solution that can be cheaper than the incumbent. Not the hint
        (an incumbent already), nor one whose objective is at least the incumbent's cost:
        costs are rounded down, so its real cost is at least that too."""
        if self.model.hint is not None:
            variables, hinted = self.model.hint
            if np.array_equal(values[variables], hinted):
                return
        with self.best.lock:
            cost = self.best.cost
        if cost is not None and objective / self.model.scale >= cost:
            return
        info = SolverInfo(self.best.method, self.best.backend, SolveStatus.FEASIBLE)
        schedule = schedule_from_solution(self.model, lambda var: values[var.index], info)
        self.best.offer_decoded(schedule, source=BACKENDS["cpsat"].label)

    def log(self, line: str) -> None:
        if self.on_progress is None or not line.strip():
            return
        with self.best.lock:
            bound = self.best.floor_bound()
            self.on_progress(
                Progress(self.best.elapsed(), self.best.cost, bound, None, line.rstrip())
            )


COVERING_PAIRS = 10_000
"""The largest covering model :func:`prove_covering` builds, in producer-to-consumer literals
(:func:`~solver.optimize.covering.serve_pairs`). On the 100-node random graphs at 0.8 and 0.9
of their peak CP-SAT proves those of 412 to 2,110 pairs optimal in 0.1-16 s and none of
13,836 or more in 60 s; VGG16 on CPU+GPU at 60 % needs 56,766 (cheap layers may run often
within the cost) and only took the core the neighbourhood search uses (docs/solver.md,
"Covering runs")."""


def prove_covering(
    best,
    deadline: float,
    cancel: Cancel | None,
    stop: Cancel | None,
    threads: int = 1,
) -> bool:
    """Run CP-SAT on the interval model with :func:`~solver.optimize.covering.covering_runs`
    for the incumbent's cost, until ``deadline``, ``cancel`` or ``stop``. Its bound, capped at
    that cost, is a bound of the problem (no restriction): each better one raises ``best``'s
    floor, which closes the solve as optimal when it meets the incumbent. Its schedules are
    offered like any other. ``False`` when there is no incumbent or the model would exceed
    :data:`COVERING_PAIRS` (the caller then keeps its core for something else)."""
    graph = best.graph
    with best.lock:
        if best.schedule is None or best.cost is None:
            return False
        upper = float(best.cost)
        hint = (best.schedule, best.timeline)
    counts = covering_runs(graph, upper, able_devices(graph))
    if counts is None:
        return False
    pairs = serve_pairs(graph, counts)
    if pairs > COVERING_PAIRS:
        best.note(
            f"covering runs for {upper:.6g} ms: {pairs:,} serving pairs, more than "
            f"{COVERING_PAIRS:,}; not built"
        )
        return False
    stopper = AnyOf(cancel, stop)
    began = time.monotonic()
    try:
        model = build_interval_model(
            graph, counts, hint, deadline=deadline, cancel=stopper, covers=upper
        )
    except BuildStopped:
        return True
    best.note(
        f"covering runs ({model.restriction}): up to {int(counts.max())} runs per node, "
        f"{model.num_variables:,} variables, built in {time.monotonic() - began:.1f} s"
    )
    remaining = deadline - time.monotonic()
    if remaining <= 0.05 or stopper.is_set():
        return True

    def bound_found(scaled: float) -> None:
        bound = min(scaled / model.scale, upper)
        best.raise_floor(
            bound,
            f"CP-SAT on covering runs: no schedule costs less than {bound:.6g} ms",
            "CP-SAT on covering runs",
        )

    found = _Solutions(model, best, None)
    outcome = run_cpsat(
        model.model,
        remaining,
        threads=threads,
        cancel=stopper,
        on_solution=found.offer,
        on_bound=bound_found,
    )
    if outcome.bound is not None and outcome.status is not SolveStatus.CANCELLED:
        bound_found(outcome.bound)
    return True


def prove_or_deepen(
    best,
    deadline: float,
    cancel: Cancel | None,
    stop: Cancel | None,
    threads: int = 1,
) -> bool:
    """Once CP-SAT has proven its restricted optimum (``best.restricted``): prove it for
    every schedule with :func:`prove_covering`; where that model is too large, search again
    with one more run per node (hinted with the incumbent), and so on while each is proven,
    until ``deadline``, ``cancel`` or ``stop``. ``False`` when nothing ran (the caller then
    keeps its core for something else).

    A restricted optimum is often not the problem's: on a 100-node random layered graph at
    0.8 of its peak the best schedule with at most 2 runs per node costs 50,725, with 3,
    49,812 (docs/solver.md, "More runs when C is proven"), and its covering model, 21,042
    serving pairs, is beyond CP-SAT. A record proven for fewer runs is kept when the search
    with more neither proves its own nor finds a cheaper schedule.
    """
    ran = False
    while not _stopped(deadline, cancel, stop):
        if prove_covering(best, deadline, cancel, stop, threads=threads):
            return True
        with best.lock:
            proven = best.restricted
        if proven is None or not proven.proven or proven.runs >= MAX_RUNS:
            return ran
        ran = True
        search = search_intervals(best, deadline, cancel, stop, proven.runs + 1, threads)
        if search.restricted is None or not search.restricted.proven:
            with best.lock:
                if best.cost is not None and proven.bound is not None:
                    if best.cost >= proven.bound - 1e-6 * max(1.0, abs(proven.bound)):
                        best.restricted = proven  # nothing cheaper: the proof still stands
            return True
    return ran


def _stopped(deadline: float, *events: Cancel | None) -> bool:
    return time.monotonic() > deadline - 0.5 or any(e is not None and e.is_set() for e in events)
