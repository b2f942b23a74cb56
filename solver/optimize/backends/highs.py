"""Run HiGHS in process on a :class:`LinearProgram`, with callbacks and a keeping cancel.

The arrays go to ``highspy`` directly (``passModel``): no PuLP objects, no files. HiGHS only
fires its logging callbacks with ``output_flag`` on, so it stays on with ``log_to_console``
off. Every improving solution is handed to ``on_solution`` as well,
so the caller can replay it and show it while the search goes on. ``highspy`` is optional;
without it :data:`highspy` is ``None``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from solver.optimize.backends._common import (
    POLL_S,
    BackendResult,
    Cancel,
    Tracker,
    error_result,
    finish_result,
)
from solver.optimize.backends.lp import LinearProgram
from solver.status import SolveStatus

try:
    import highspy
except ImportError:  # HiGHS is optional: CBC ships with PuLP 3.x
    highspy = None  # type: ignore[assignment]  # every run checks available_backends first

if TYPE_CHECKING:
    from solver.optimize.backends import BackendOptions

__all__ = ["highspy", "run_highs"]

SolutionCallback = Callable[[np.ndarray], object]


class _HighsRun:
    """One HiGHS solve: the model, its callbacks, and a cancel safe from any thread."""

    def __init__(
        self,
        program: LinearProgram,
        options: BackendOptions,
        tracker: Tracker,
        on_solution: SolutionCallback | None,
    ) -> None:
        self.program = program
        self.tracker = tracker
        self.on_solution = on_solution
        self.callback_error: BaseException | None = None
        self.cancel_requested = False
        h = highspy.Highs()
        h.setOptionValue("output_flag", True)
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("time_limit", float(options.time_limit_s))
        h.setOptionValue("mip_rel_gap", float(options.gap_rel))
        if options.threads is not None:
            h.setOptionValue("threads", int(options.threads))
        if options.cutoff is not None:
            h.setOptionValue("objective_bound", float(options.cutoff - program.offset))
        h.passModel(_highs_lp(program))
        h.HandleUserInterrupt = True
        h.cbLogging.subscribe(self._guard(self._on_log))
        h.cbMipImprovingSolution.subscribe(self._guard(self._on_incumbent))
        h.cbMipLogging.subscribe(self._guard(self._on_mip_log))
        self.highs = h

    def request_cancel(self) -> None:
        self.cancel_requested = True
        self.highs.cancelSolve()

    def _guard(self, handler: Callable[[Any], None]) -> Callable[[Any], None]:
        """Keep callback exceptions out of HiGHS's C++ loop: remember, cancel, re-raise later."""

        def guarded(event: object) -> None:
            if self.callback_error is not None:
                return
            try:
                handler(event)
            except Exception as exc:  # noqa: BLE001 - must not unwind through C++; run_highs re-raises it
                self.callback_error = exc
                self.request_cancel()

        return guarded

    def _on_log(self, event: highspy.HighsCallbackEvent) -> None:
        for text in str(event.message).splitlines():
            self.tracker.line(text)

    def _on_incumbent(self, event: highspy.HighsCallbackEvent) -> None:
        self.tracker.see(incumbent=event.data_out.objective_function_value)
        if self.on_solution is not None:
            self.on_solution(np.array(event.data_out.mip_solution, dtype=float))
        self.tracker.report()

    def _on_mip_log(self, event: highspy.HighsCallbackEvent) -> None:
        out = event.data_out  # the log line that follows reports these
        self.tracker.see(out.objective_function_value, out.mip_dual_bound)


def run_highs(
    program: LinearProgram,
    options: BackendOptions,
    tracker: Tracker,
    cancel: Cancel | None,
    start: np.ndarray | None = None,
    on_solution: SolutionCallback | None = None,
) -> BackendResult:
    """Solve on a fresh thread while this one watches the cancel Event.

    HiGHS keeps one task scheduler per calling thread, sized by the first solve's
    ``threads``; a later solve on that thread with another count fails ("scheduler has
    already been initialized"). A new thread per solve gets a new scheduler, and the waiting
    caller doubles as the watcher that forwards ``cancel`` to ``cancelSolve()``.
    """
    run = _HighsRun(program, options, tracker, on_solution)
    if start is not None:
        run.highs.setSolution(
            program.num_cols, np.arange(program.num_cols, dtype=np.int32), start.astype(float)
        )
    failure: list[BaseException] = []

    def solve() -> None:
        try:
            run.highs.run()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            failure.append(exc)

    worker = threading.Thread(target=solve, name="highs-solve", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            if cancel is not None and cancel.is_set():
                run.request_cancel()
    finally:
        if worker.is_alive():  # we are unwinding (e.g. KeyboardInterrupt): stop HiGHS first
            run.request_cancel()
            worker.join()
    if failure or run.callback_error is not None:
        raise (failure or [run.callback_error])[0]  # type: ignore[list-item]  # one is set
    h = run.highs
    model_status = h.getModelStatus()
    info = h.getInfo()
    feasible = int(highspy.SolutionStatus.kSolutionStatusFeasible)
    found = int(info.primal_solution_status) == feasible
    status = _highs_status(model_status, found)
    if status is SolveStatus.ERROR and not found:
        return error_result(tracker, f"HiGHS stopped: {h.modelStatusToString(model_status)}")
    values = None
    if found and status.has_solution_possible:
        values = np.array(h.getSolution().col_value, dtype=float)
    tracker.see(bound=info.mip_dual_bound)
    message = h.modelStatusToString(model_status)
    return finish_result(program, tracker, status, values, message, options.gap_rel)


def _highs_lp(program: LinearProgram) -> highspy.HighsLp:
    lp = highspy.HighsLp()
    lp.num_col_ = program.num_cols
    lp.num_row_ = program.num_rows
    lp.col_cost_ = program.cost.astype(float)
    lp.col_lower_ = program.col_lower.astype(float)
    lp.col_upper_ = program.col_upper.astype(float)
    lp.row_lower_ = program.row_lower.astype(float)
    lp.row_upper_ = program.row_upper.astype(float)
    lp.offset_ = float(program.offset)
    start, index, value = program.csc()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = program.num_cols
    lp.a_matrix_.num_row_ = program.num_rows
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    kinds = [
        highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous
        for flag in program.integer.tolist()
    ]
    lp.integrality_ = kinds
    return lp


def _highs_status(model_status: object, solved: bool) -> SolveStatus:
    """Map a ``HighsModelStatus`` onto ours; limits keep or lack an incumbent."""
    kind = highspy.HighsModelStatus
    if model_status == kind.kOptimal:
        return SolveStatus.OPTIMAL
    if model_status in (kind.kInfeasible, kind.kUnboundedOrInfeasible):
        return SolveStatus.INFEASIBLE
    if model_status == kind.kInterrupt:
        return SolveStatus.CANCELLED
    limits = (kind.kTimeLimit, kind.kIterationLimit, kind.kSolutionLimit, kind.kObjectiveBound)
    if model_status in limits:
        return SolveStatus.FEASIBLE if solved else SolveStatus.TIME_LIMIT
    return SolveStatus.ERROR
