"""Run HiGHS in process through PuLP, with its callbacks on and a cancel that keeps the incumbent.

PuLP's HiGHS bridge reports a time-limited or interrupted run as "Optimal" and shows no
progress, so :class:`_CancellableHiGHS` subscribes to HiGHS's logging and MIP callbacks, maps
the model status itself, and forwards a cancel Event to ``cancelSolve()`` (notes: qt-stack.md
section 2.4). ``highspy`` is optional; without it :data:`highspy` is ``None``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pulp

from solver.backends._common import (
    POLL_S,
    BackendResult,
    Tracker,
    error_result,
    finish_result,
    pulp_codes,
)
from solver.status import SolveStatus

try:
    import highspy
except ImportError:  # HiGHS is optional: CBC ships with PuLP 3.x
    highspy = None

if TYPE_CHECKING:
    from solver.backends import BackendOptions

__all__ = ["highspy", "run_highs"]


class _CancellableHiGHS(pulp.HiGHS):
    """PuLP's in-process HiGHS with progress callbacks, a MIP start and a cancel hook.

    ``output_flag`` stays on because HiGHS only fires its logging callbacks then;
    ``log_to_console`` off keeps stdout quiet (qt-stack.md section 2.4).
    """

    def __init__(self, options: BackendOptions, tracker: Tracker) -> None:
        super().__init__(
            msg=True,
            timeLimit=options.time_limit_s,
            gapRel=options.gap_rel,
            threads=options.threads,
            log_to_console=False,
        )
        self._options = options
        self._tracker = tracker
        self._highs = None
        self._cancel_requested = False
        self.callback_error: BaseException | None = None
        self.outcome: tuple[SolveStatus, bool, float | None, str] | None = None

    def request_cancel(self) -> None:
        """Ask HiGHS to stop; safe from any thread, also before the model exists."""
        self._cancel_requested = True
        if self._highs is not None:
            self._highs.cancelSolve()

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        super().createAndConfigureSolver(lp)
        h = lp.solverModel
        h.HandleUserInterrupt = True
        h.cbLogging.subscribe(self._guard(self._on_log))
        h.cbMipImprovingSolution.subscribe(self._guard(self._on_incumbent))
        h.cbMipLogging.subscribe(self._guard(self._on_mip_log))
        self._highs = h
        if self._cancel_requested:  # a cancel that came while we were building
            h.cancelSolve()

    def callSolver(self, lp: pulp.LpProblem) -> None:
        if self._options.warm_start:
            _set_highs_start(lp)
        super().callSolver(lp)

    def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
        """Read status, bound and (only if there is one) the solution; PuLP's maps both
        time limit and interrupt to "Optimal" and indexes an empty solution when infeasible."""
        h = lp.solverModel
        model_status = h.getModelStatus()
        info = h.getInfo()
        feasible = int(highspy.SolutionStatus.kSolutionStatusFeasible)
        found = int(info.primal_solution_status) == feasible
        status = _highs_status(model_status, found)
        solved = found and status.has_solution_possible
        if solved:
            values = h.getSolution().col_value
            for var in lp.variables():
                var.varValue = values[var.index]
        message = h.modelStatusToString(model_status)
        self.outcome = (status, solved, info.mip_dual_bound, message)
        return pulp_codes(status, solved)

    def _guard(self, handler: Callable[[object], None]) -> Callable[[object], None]:
        """Keep callback exceptions out of HiGHS's C++ loop: remember, cancel, re-raise later."""

        def guarded(event: object) -> None:
            if self.callback_error is not None:
                return
            try:
                handler(event)
            except Exception as exc:  # must not unwind through C++; run_highs re-raises it
                self.callback_error = exc
                self.request_cancel()

        return guarded

    def _on_log(self, event: highspy.HighsCallbackEvent) -> None:
        for text in str(event.message).splitlines():
            self._tracker.line(text)

    def _on_incumbent(self, event: highspy.HighsCallbackEvent) -> None:
        self._tracker.see(incumbent=event.data_out.objective_function_value)
        self._tracker.report()

    def _on_mip_log(self, event: highspy.HighsCallbackEvent) -> None:
        out = event.data_out  # the log line that follows reports these
        self._tracker.see(out.objective_function_value, out.mip_dual_bound)


def run_highs(
    prob: pulp.LpProblem,
    options: BackendOptions,
    tracker: Tracker,
    cancel: threading.Event | None,
) -> BackendResult:
    """Solve on a fresh thread while this one watches the cancel Event.

    HiGHS keeps one task scheduler per calling thread, sized by the first solve's
    ``threads``; a later solve on that thread with another count fails ("scheduler has
    already been initialized"). A new thread per solve gets a new scheduler, and the waiting
    caller doubles as the watcher that forwards ``cancel`` to ``cancelSolve()``.
    """
    solver = _CancellableHiGHS(options, tracker)
    failure: list[BaseException] = []

    def solve() -> None:
        try:
            prob.solve(solver)
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)
        finally:  # drop HiGHS's model copy and our callbacks, which hold on_progress
            prob.solverModel = None
            prob.solver = None

    worker = threading.Thread(target=solve, name="highs-solve", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            if cancel is not None and cancel.is_set():
                solver.request_cancel()
    finally:
        if worker.is_alive():  # we are unwinding (e.g. KeyboardInterrupt): stop HiGHS first
            solver.request_cancel()
            worker.join()
    if failure or solver.callback_error is not None:
        raise (failure or [solver.callback_error])[0]
    if solver.outcome is None:
        return error_result(tracker, "HiGHS returned without a status")
    status, solved, bound, message = solver.outcome
    tracker.see(bound=bound)
    return finish_result(prob, tracker, status, solved, message, options.gap_rel)


def _set_highs_start(lp: pulp.LpProblem) -> None:
    """Hand the variables' current values to HiGHS as a (possibly partial) MIP start."""
    known = [(var.index, var.varValue) for var in lp.variables() if var.varValue is not None]
    if known:
        index = np.array([i for i, _ in known], dtype=np.int32)
        value = np.array([v for _, v in known], dtype=np.float64)
        lp.solverModel.setSolution(len(known), index, value)


def _highs_status(model_status: object, solved: bool) -> SolveStatus:
    """Map a ``HighsModelStatus`` onto ours; limits keep or lack an incumbent."""
    kind = highspy.HighsModelStatus
    if model_status == kind.kOptimal:
        return SolveStatus.OPTIMAL
    if model_status in (kind.kInfeasible, kind.kUnboundedOrInfeasible):
        return SolveStatus.INFEASIBLE
    if model_status == kind.kInterrupt:
        return SolveStatus.CANCELLED
    limits = (kind.kTimeLimit, kind.kIterationLimit, kind.kSolutionLimit)
    if model_status in limits:
        return SolveStatus.FEASIBLE if solved else SolveStatus.TIME_LIMIT
    return SolveStatus.ERROR
