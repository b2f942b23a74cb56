"""The best schedule of a running solve, whoever found it, always replayed (model.md §4).

A solve has several sources of schedules: the heuristic start, the backend's improving
solutions (HiGHS reports each one), neighbourhood searches, and the backend's final answer.
:class:`Incumbents` replays every one in the simulator, keeps the cheapest valid one, reports
it as a :class:`~solver.status.Progress` with its schedule (the GUI draws it as provisional),
and turns the backend's outcome into an honest :class:`SolveResult`: "optimal" only when the
backend proved it for the exact model and the schedule replays at the proven cost; otherwise
the best schedule in hand, with the status and the reason.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from solver.document.graph import Graph
from solver.document.schedule import Schedule, SolverInfo
from solver.document.units import format_size
from solver.execution.simulate import Timeline, simulate
from solver.optimize.bounds import no_remat_peak
from solver.status import Progress, SolveStatus

if TYPE_CHECKING:
    import numpy as np

    from solver.optimize.backends import BackendResult
    from solver.optimize.miqp import ArrayModel

__all__ = ["ProgressCallback", "Restricted", "SolveResult", "Incumbents"]

ProgressCallback = Callable[[Progress], None]
_REL_TOL = 1e-6


@dataclass(frozen=True)
class Restricted:
    """What a solve proved under a restriction of the problem (the interval model's ``C``
    runs per node and device): its bound holds for that restriction only, never shown as
    the problem's bound; ``proven`` says the restricted optimum was reached."""

    runs: int
    bound: float | None
    proven: bool

    @property
    def runs_word(self) -> str:
        return "run" if self.runs == 1 else "runs"

    def describe(self) -> str:
        what = f"at most {self.runs} {self.runs_word} of each node per device"
        if self.proven:
            return f"optimal among schedules with {what}"
        if self.bound is not None:
            return f"no schedule with {what} costs less than {self.bound:.6g} ms"
        return f"searched schedules with {what}"


MEETS_A_BOUND = "it meets a proven lower bound"
"""How a result's message says its schedule was proven by a bound found beside the backend
(the window shows that message with an optimal result)."""


@dataclass(frozen=True)
class SolveResult:
    """The outcome of one solve (model.md §4). ``schedule`` and ``timeline`` are set together,
    only for a schedule that replayed validly; ``message`` explains anything else."""

    method: str
    status: SolveStatus
    schedule: Schedule | None = None
    timeline: Timeline | None = None
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    build_seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    backend: str = ""
    message: str = ""
    log_tail: tuple[str, ...] = field(default=())
    formulation: str = ""
    """Which model was solved (e.g. the paper's stages, or retention intervals), for display."""
    advice: str = ""
    """When the result is weak (a gap left, the model too big for the time): one sentence on
    what would help, for the CLI and the window; empty otherwise."""
    restricted: Restricted | None = None
    """What was proven under a restriction (the interval model's runs per node), if any."""

    @property
    def ok(self) -> bool:
        """A valid schedule is available."""
        return self.schedule is not None and self.timeline is not None and self.timeline.valid


class Incumbents:
    """The cheapest valid schedule seen so far, and the progress reports that announce it."""

    def __init__(
        self,
        graph: Graph,
        method: str,
        backend: str,
        on_progress: ProgressCallback | None,
        gap_rel: float = _REL_TOL,
    ) -> None:
        self.graph, self.method, self.backend = graph, method, backend
        self.schedule: Schedule | None = None
        self.timeline: Timeline | None = None
        self.source = ""
        self.rejected: list[str] = []
        self.started = time.monotonic()
        self.lock = threading.RLock()
        """Held while the incumbent changes: a neighbourhood search runs beside the backend."""
        self.floor: float | None = None
        """A bound known without the backend (e.g. every node once on its cheapest device)."""
        self.floor_source = ""
        """What found :attr:`floor` ("" when it needs no name)."""
        self._on_progress = on_progress
        self._bound: float | None = None
        self.restricted: Restricted | None = None
        """What a search under a restriction proved (CP-SAT on the interval model)."""
        self.gap_rel = max(gap_rel, _REL_TOL)
        self.closed = threading.Event()
        """Set once the incumbent is within ``gap_rel`` of a bound found beside the backend
        (:meth:`raise_floor`): it is optimal, and the solve may stop every search. VGG16 on
        one GPU at 80 %: the relaxation proves the construction's schedule in 0.1 s, and CBC
        took 2 s more to prove it again."""
        self.outpaced = threading.Event()
        """Set by a search beside the backend whose bound leads the backend's so far that the
        backend's core is worth more to that search (:mod:`~solver.optimize.exact_beside`):
        the backend stops, and the search keeps the time left."""

    @property
    def cost(self) -> float | None:
        return self.timeline.total_ms if self.timeline is not None else None

    def offer(self, schedule: Schedule, timeline: Timeline, source: str) -> bool:
        """Keep ``schedule`` if it replayed validly and is cheaper; report it if kept."""
        if not timeline.valid:
            return False
        with self.lock:
            if self.cost is not None and timeline.total_ms >= self.cost - 1e-9:
                return False
            self.schedule, self.timeline, self.source = schedule, timeline, source
            self._check_closed()
            if self._on_progress is not None:
                bound = self._best_bound(self._bound)
                self._on_progress(
                    Progress(
                        self._elapsed(),
                        self.cost,
                        self._clamped(bound, self.cost),
                        _gap(self.cost, self._clamped(bound, self.cost)),
                        None,
                        schedule,
                    )
                )
        return True

    def offer_values(
        self, model: ArrayModel, values: np.ndarray, claimed: float | None = None
    ) -> bool:
        """Read, replay and offer a backend's solution; a claim it does not meet is refused.
        The model's formulation reads the values (the paper's, or with offloading copies)."""
        info = SolverInfo(self.method, self.backend, SolveStatus.FEASIBLE, objective=claimed)
        schedule = model.formulation.decode(model, values, info)
        return self.offer_decoded(schedule, claimed)

    def offer_decoded(
        self, schedule: Schedule, claimed: float | None = None, source: str | None = None
    ) -> bool:
        """Replay and offer a schedule a backend found (``source``: the solve's backend, by
        default); a claim it does not meet is refused."""
        timeline = simulate(self.graph, schedule)
        if not timeline.valid:
            self.rejected.append(f"the solver's schedule does not replay: {timeline.violation}")
            return False
        if claimed is not None and timeline.total_ms > claimed + _REL_TOL * max(1.0, claimed):
            self.rejected.append(
                f"the replay costs {timeline.total_ms:.6g} ms but the solver claimed "
                f"{claimed:.6g} ms"
            )
            return False
        return self.offer(schedule, timeline, source or self.backend)

    def note(self, line: str) -> None:
        """Report a line for the log with the current incumbent and bound: the phases before
        the backend prints anything (ResNet-50: 3 s of building and writing the model)."""
        if self._on_progress is None:
            return
        with self.lock:
            bound = self._clamped(self._best_bound(self._bound), self.cost)
            self._on_progress(
                Progress(self._elapsed(), self.cost, bound, _gap(self.cost, bound), line)
            )

    def merged_progress(self, on_progress: ProgressCallback | None) -> ProgressCallback:
        """The backend's reports with our incumbent folded in and time counted from the start
        (its bound is kept for :meth:`backend_bound` even when nobody listens)."""

        def report(progress: Progress) -> None:
            with self.lock:
                if progress.bound is not None:
                    self._bound = progress.bound
                if on_progress is None:
                    return
                incumbent = progress.incumbent
                if self.cost is not None and (incumbent is None or self.cost < incumbent):
                    incumbent = self.cost
                bound = self._clamped(self._best_bound(progress.bound), incumbent)
                on_progress(
                    replace(
                        progress,
                        elapsed_s=self._elapsed(),
                        incumbent=incumbent,
                        bound=bound,
                        gap=_gap(incumbent, bound),
                    )
                )

        return report

    def result(self, base: SolveResult, why: str) -> SolveResult:
        """The best schedule in hand after the backend could not run or finish (``why``)."""
        if self.timeline is None:
            return _without_schedule(self.graph, replace(base, message=why))
        status = SolveStatus.CANCELLED if base.status is SolveStatus.CANCELLED else None
        return self._with_schedule(base, status or SolveStatus.FEASIBLE, base.bound, why)

    def conclude(self, base: SolveResult, outcome: BackendResult, cutoff_used: bool) -> SolveResult:
        """Turn the backend's outcome (its solution already offered) into the final result."""
        bound = outcome.bound
        if (
            outcome.status is SolveStatus.OPTIMAL
            and self.timeline is not None
            and self.cost is not None
        ):
            proven = outcome.objective if outcome.objective is not None else bound
            if proven is not None and self.cost <= proven + _REL_TOL * max(1.0, abs(proven)):
                return self._with_schedule(base, SolveStatus.OPTIMAL, proven, outcome.message)
        if outcome.status is SolveStatus.INFEASIBLE and self.timeline is not None:
            if cutoff_used:  # nothing cheaper than the incumbent exists
                why = f"{self.backend} proved that no schedule is cheaper than this one"
                return self._with_schedule(base, SolveStatus.OPTIMAL, self.cost, why)
            why = (
                f"{self.backend} reported the model infeasible, yet this schedule "
                f"({self.source}) replays validly; please report this graph"
            )
            return self._with_schedule(base, SolveStatus.FEASIBLE, None, why)
        if self.timeline is None:
            message = "; ".join([*self.rejected, outcome.message]) if self.rejected else None
            base = replace(base, status=outcome.status, message=message or base.message)
            if self.rejected and outcome.status.has_solution_possible:
                base = replace(base, status=SolveStatus.ERROR)
            return _without_schedule(self.graph, base)
        status = SolveStatus.CANCELLED if outcome.status is SolveStatus.CANCELLED else None
        return self._with_schedule(
            base, status or SolveStatus.FEASIBLE, bound, self._why_stopped(outcome)
        )

    def _why_stopped(self, outcome: BackendResult) -> str:
        found = f"the best schedule found is {self.source}'s"
        if outcome.status is SolveStatus.ERROR:
            return f"{self.backend} failed ({outcome.message}); {found}"
        if outcome.status is SolveStatus.OPTIMAL:  # its own answer was refused
            return f"{'; '.join(self.rejected) or outcome.message}; {found}"
        return f"{outcome.message}; {found}" if outcome.message else found

    def _with_schedule(
        self, base: SolveResult, status: SolveStatus, bound: float | None, message: str
    ) -> SolveResult:
        assert self.schedule is not None, "only called with an incumbent"
        cost = self.cost
        bound = self._clamped(self._best_bound(bound), cost)
        gap = _gap(cost, bound)
        if status is SolveStatus.FEASIBLE and gap is not None and gap <= _REL_TOL:
            # The schedule costs what a proven lower bound says nothing beats (e.g. every node
            # once on its cheapest device): optimal, whoever stopped first.
            status = SolveStatus.OPTIMAL
            message = f"{message}; {MEETS_A_BOUND}"
        info = SolverInfo(
            method=self.method,
            backend=self.backend,
            status=status,
            objective=cost,
            bound=bound,
            gap=gap,
            seconds=base.seconds or self._elapsed(),
            variables=base.variables,
            constraints=base.constraints,
        )
        restricted = base.restricted or self.restricted
        if (
            restricted is not None
            and restricted.proven
            and status is not SolveStatus.OPTIMAL
            and restricted.describe() not in message
        ):
            message = f"{message}; {restricted.describe()}" if message else restricted.describe()
        return replace(
            base,
            status=status,
            restricted=restricted,
            schedule=replace(self.schedule, solver=info),
            timeline=self.timeline,
            objective=cost,
            bound=bound,
            gap=gap,
            seconds=base.seconds or self._elapsed(),
            message=message,
        )

    def elapsed(self) -> float:
        """Seconds since the solve started."""
        return time.monotonic() - self.started

    _elapsed = elapsed

    def backend_bound(self) -> float | None:
        """The backend's own bound as it last reported it (``None`` before its first)."""
        with self.lock:
            return self._bound

    def bound_besides(self, source: str) -> float | None:
        """The best bound known from anyone but ``source``: the backend's, or a floor another
        search raised (a floor ``source`` raised hides lower ones, which trail it anyway)."""
        with self.lock:
            floor = self.floor if self.floor_source != source else None
            known = [b for b in (self._bound, floor) if b is not None]
            return max(known) if known else None

    def floor_bound(self) -> float | None:
        """The best bound known without the backend, clamped to the incumbent."""
        with self.lock:
            return self._clamped(self._best_bound(None), self.cost)

    def raise_floor(self, bound: float, why: str, source: str = "") -> None:
        """A valid bound found beside the backend (``source``: the relaxation, say): keep it
        if it is higher, and say ``why`` in the log."""
        with self.lock:
            if self.floor is not None and bound <= self.floor:
                return
            self.floor = bound
            self.floor_source = source
            self._check_closed()
        if why:
            self.note(why)

    def _check_closed(self) -> None:
        cost, floor = self.cost, self.floor
        if cost is None or floor is None or not math.isfinite(cost):
            return  # an absurd cost (1e308 per node) sums to inf, which any gap "meets"
        gap = _gap(cost, floor)
        if gap is not None and gap <= self.gap_rel:
            self.closed.set()

    def closed_result(self, result: SolveResult) -> SolveResult:
        """``result`` once :attr:`closed` stopped the solve: the incumbent, optimal by the bound
        it meets. What the stopped searches said (they were cancelled) is dropped; any other
        message (the model too large, say) is kept."""
        by = f"by {self.floor_source} " if self.floor_source else ""
        why = (
            f"{MEETS_A_BOUND}: no schedule costs less than {self.floor:.6g} ms "
            f"(found {by}beside the backend; within {100 * self.gap_rel:.2g} %), so the solve "
            f"stopped there"
        )
        if result.status is not SolveStatus.CANCELLED and result.message:
            why = f"{result.message}; {why}"
        return self._with_schedule(result, SolveStatus.OPTIMAL, self.floor, why)

    def _best_bound(self, bound: float | None) -> float | None:
        if self.floor is None:
            return bound
        return self.floor if bound is None else max(bound, self.floor)

    @staticmethod
    def _clamped(bound: float | None, cost: float | None) -> float | None:
        if bound is None or cost is None:
            return bound
        return min(bound, cost)  # CBC's cutoff can push its bound past the incumbent


def _gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None:
        return None
    return max(0.0, objective - bound) / max(abs(objective), 1e-9)


def _without_schedule(graph: Graph, result: SolveResult) -> SolveResult:
    if result.status is SolveStatus.INFEASIBLE:
        peak = no_remat_peak(graph)
        budgets = ", ".join(f"{d.name} {format_size(d.activation_budget)}" for d in graph.devices)
        message = (
            "no schedule fits the budgets, although every node fits on some device alone; "
            f"budgets are {budgets}, the no-rematerialization peak is {format_size(peak)}: "
            "raise a budget towards it"
        )
        return replace(result, message=message)
    if result.status is SolveStatus.TIME_LIMIT:
        return replace(
            result,
            message="the time limit ran out before any schedule was found; "
            "raise the time limit or the memory limits",
        )
    return result
