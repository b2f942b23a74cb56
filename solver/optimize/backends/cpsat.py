"""Run OR-Tools CP-SAT on a CP model with live progress, a deadline and a cancel that keeps.

CP-SAT runs in process. Its solution callback hands every improving solution over as the
response's array of values (one per model variable, read in one call), its bound callback
every better bound, its log callback every log line; :func:`run_cpsat` forwards them and
stops the search (keeping the incumbent) when the cancel Event is set. CP-SAT is an optional
backend (``pip install -e '.[cpsat]'``); :mod:`solver.optimize.intervals` says whether it is
installed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from solver.optimize.backends._common import POLL_S, Cancel
from solver.optimize.intervals import cp_model
from solver.status import SolveStatus

__all__ = [
    "PRESOLVE_ONCE_VARIABLES",
    "PROBING_VARIABLES",
    "CpOutcome",
    "presolve_iterations",
    "probing_level",
    "run_cpsat",
]

PROBING_VARIABLES = 10_000
"""Above this many variables CP-SAT's presolve skips probing (``cp_model_probing_level = 0``).
Probing is where its presolve spends its time on large interval models, and the wall time
grows much faster than its deterministic time limit admits: 19 s on DenseNet-121 at layer
level (35,722 variables), 29 s on its op-level import (54,242), 39 s on a 2,557-op tower
(115,166), which then never searched within a 60 s solve. Without probing those presolves take
3.7, 6.7 and 8.6 s, and the schedules found in the same time were as good or better
(docs/solver.md, "CP-SAT's presolve on large models"). Small models keep it: on a 100-node
random graph (1,504 variables) it costs 0.3 s and raised CP-SAT's bound 52,234 against 51,381.
"""


def probing_level(num_variables: int) -> int | None:
    """The ``cp_model_probing_level`` for a model of ``num_variables``, or ``None`` to keep
    CP-SAT's default (:data:`PROBING_VARIABLES`).

    >>> probing_level(1_504), probing_level(54_242)
    (None, 0)
    """
    return 0 if num_variables > PROBING_VARIABLES else None


PRESOLVE_ONCE_VARIABLES = 100_000
"""Above this many variables CP-SAT's presolve makes one pass (``max_presolve_iterations =
1``, default 3). On a 5,107-op tower's interval model (230,066 variables) the three passes
took 20-23 s of a solve's last 30 s and found little the first had not; with one pass (7 s)
CP-SAT improved the construction's schedule 2.5 s into its search. Below it the passes pay
their way: on op-level DenseNet-121 and ResNet-152 (about 54,000 and 30,000 variables) three
passes ended 0.2 % and 0.05 % cheaper within 40 s (docs/solver.md, "Time for the model").
"""


def presolve_iterations(num_variables: int) -> int | None:
    """CP-SAT's ``max_presolve_iterations`` for a model of ``num_variables``, or ``None`` to
    keep its default (:data:`PRESOLVE_ONCE_VARIABLES`).

    >>> presolve_iterations(54_242), presolve_iterations(230_066)
    (None, 1)
    """
    return 1 if num_variables > PRESOLVE_ONCE_VARIABLES else None


@dataclass(frozen=True)
class CpOutcome:
    """How a CP-SAT run ended: status, objective and bound in the model's own (scaled) units,
    the last solution's values (``None`` without one), seconds, and the tail of its log."""

    status: SolveStatus
    objective: float | None
    bound: float | None
    values: np.ndarray | None
    seconds: float
    log_tail: tuple[str, ...] = ()


def run_cpsat(
    model: Any,
    time_limit_s: float,
    threads: int = 1,
    cancel: Cancel | None = None,
    on_solution: Callable[[np.ndarray, float], None] | None = None,
    on_bound: Callable[[float], None] | None = None,
    on_log: Callable[[str], None] | None = None,
    seed: int = 0,
) -> CpOutcome:
    """Minimise ``model`` (a ``cp_model.CpModel``) within ``time_limit_s`` seconds.

    ``on_solution(values, objective)`` gets each improving solution (``values[var.index]``
    is a variable's value); ``on_bound(bound)`` each better bound; ``on_log(line)`` each log
    line. Exceptions raised by a callback stop the search and are raised here afterwards.
    """
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, float(time_limit_s))
    solver.parameters.num_workers = max(1, int(threads))
    solver.parameters.random_seed = seed
    num_variables = len(model.proto.variables)
    level = probing_level(num_variables)
    if level is not None:
        solver.parameters.cp_model_probing_level = level
    passes = presolve_iterations(num_variables)
    if passes is not None:
        solver.parameters.max_presolve_iterations = passes
    solver.parameters.log_search_progress = on_log is not None
    solver.parameters.log_to_stdout = False  # lines go to on_log; stdout stays the CLI's
    failures: list[BaseException] = []
    log: list[str] = []

    def guarded(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - keep C++ out of Python's errors: stop, re-raise later
            failures.append(exc)
            solver.stop_search()

    class Callback(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            if on_solution is not None:
                values = np.asarray(self.response_proto.solution, dtype=np.int64)
                guarded(on_solution, values, float(self.objective_value))

    if on_bound is not None:
        solver.best_bound_callback = lambda bound: guarded(on_bound, float(bound))
    if on_log is not None:

        def logged(line: str) -> None:
            log.append(line)
            del log[:-200]
            guarded(on_log, line)

        solver.log_callback = logged
    done = threading.Event()

    def watch() -> None:
        while not done.wait(POLL_S):
            if cancel is not None and cancel.is_set():
                solver.stop_search()
                return

    watcher = threading.Thread(target=watch, name="cpsat-cancel", daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        code = solver.solve(model, Callback())
    finally:
        done.set()
        watcher.join()
    seconds = time.monotonic() - started
    if failures:
        raise failures[0]
    status = _status(code, cancel, seconds, time_limit_s)
    has = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    values = np.asarray(solver.response_proto.solution, dtype=np.int64) if has else None
    objective = float(solver.objective_value) if has else None
    bound = float(solver.best_objective_bound) if code != cp_model.INFEASIBLE else None
    return CpOutcome(status, objective, bound, values, seconds, tuple(log[-40:]))


def _status(code: int, cancel: Cancel | None, seconds: float, limit: float) -> SolveStatus:
    if code == cp_model.OPTIMAL:
        return SolveStatus.OPTIMAL
    if code == cp_model.INFEASIBLE:
        return SolveStatus.INFEASIBLE
    if cancel is not None and cancel.is_set():
        return SolveStatus.CANCELLED
    if code == cp_model.FEASIBLE:
        return SolveStatus.FEASIBLE
    if code == cp_model.MODEL_INVALID:
        return SolveStatus.ERROR
    return SolveStatus.TIME_LIMIT
