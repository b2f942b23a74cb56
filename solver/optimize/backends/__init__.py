"""Run a minimisation MILP on CBC or HiGHS with live progress, limits and cancellation.

PuLP's own ``prob.solve()`` gives the GUI nothing to hold on to: ``PULP_CBC_CMD`` waits on a
process it never exposes, CBC's log is block-buffered when piped, and PuLP reports a
time-limited or interrupted run as "Optimal". So CBC (the binary bundled with PuLP) is run
here as a process we own (under a pty, so every log line arrives when printed; SIGINT keeps
the incumbent), and HiGHS runs in process with its callbacks switched on. Both report our
:class:`~solver.status.SolveStatus` (docs/model.md section 4).

A problem is a :class:`~solver.optimize.backends.lp.LinearProgram` (arrays; how the XEngine model is
built) or, for small models and tests, a ``pulp.LpProblem``, converted on the way in.
The runners live in :mod:`solver.optimize.backends.cbc` and :mod:`solver.optimize.backends.highs`;
what they share (progress tracker, :class:`BackendResult`, gap helpers) in
:mod:`solver.optimize.backends._common`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pulp

from solver.optimize.backends._common import BackendResult, Cancel, Tracker, pulp_codes
from solver.optimize.backends.cbc import run_cbc
from solver.optimize.backends.highs import SolutionCallback, run_highs
from solver.optimize.backends.lp import LinearProgram, from_pulp
from solver.optimize.backends.registry import BACKENDS, available_backends
from solver.status import Progress

__all__ = [
    "BACKENDS",
    "BackendOptions",
    "BackendResult",
    "LinearProgram",
    "available_backends",
    "run_backend",
]

LINEAR = tuple(name for name, b in BACKENDS.items() if b.kind == "milp")
"""The backends that run a :class:`LinearProgram` (the others take other models)."""


@dataclass(frozen=True)
class BackendOptions:
    """How to run one solve; validated on construction so a bad setting fails before CBC starts.

    Parameters
    ----------
    backend : str
        ``"cbc"`` (bundled with PuLP) or ``"highs"`` (needs ``highspy``).
    time_limit_s : float
        Wall-clock limit in seconds; the best incumbent found by then is kept.
    gap_rel : float
        Relative MIP gap at which the backend may stop and call the result optimal.
    threads : int or None
        Solver threads; ``None`` keeps the backend's default.
    warm_start : bool
        For a PuLP problem: use the variables' current ``varValue`` as a MIP start. (A
        :class:`LinearProgram` takes its start as an argument of :func:`run_backend`.) On
        XEngine's model a MIP start makes CBC skip its own primal heuristics, see
        :mod:`solver.optimize.solve`.
    cutoff : float or None
        Only look for solutions cheaper than this (e.g. a schedule already in hand). Without
        one, "infeasible" means infeasible; with one, it means nothing beats the cutoff.
    """

    backend: str = "cbc"
    time_limit_s: float = 60.0
    gap_rel: float = 1e-4
    threads: int | None = None
    warm_start: bool = False
    cutoff: float | None = None

    def __post_init__(self) -> None:
        if self.backend not in LINEAR:
            raise ValueError(f"backend must be one of {LINEAR}; got {self.backend!r}")
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise ValueError(f"time_limit_s must be a positive number; got {self.time_limit_s}")
        if not (math.isfinite(self.gap_rel) and self.gap_rel >= 0):
            raise ValueError(f"gap_rel must be >= 0; got {self.gap_rel}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or None; got {self.threads}")


def run_backend(
    problem: LinearProgram | pulp.LpProblem,
    options: BackendOptions,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: Cancel | None = None,
    start: np.ndarray | None = None,
    on_solution: SolutionCallback | None = None,
    on_started: Callable[[], None] | None = None,
) -> BackendResult:
    """Solve ``problem`` with one backend, reporting progress and obeying a cancel Event.

    Parameters
    ----------
    problem : LinearProgram or pulp.LpProblem
        A minimisation MILP. For a PuLP problem, on ``has_solution`` its variables hold the
        incumbent, as after ``prob.solve()``, and ``prob.status``/``prob.sol_status`` are set
        honestly (a stopped run is "Not Solved" with an integer-feasible solution).
    options : BackendOptions
        Backend, limits, cutoff and (PuLP problems) warm start.
    on_progress : callable, optional
        Called on the solving thread with a :class:`Progress` per log line and per new
        incumbent; it must be quick (the GUI throttles redraws itself).
    cancel : threading.Event, optional
        Set it from any thread to stop; the incumbent, if any, is kept. Polled every 50 ms.
    start : numpy.ndarray, optional
        A MIP start for a :class:`LinearProgram`, one value per column.
    on_solution : callable, optional
        HiGHS only: called with each improving solution's column values during the search.
    on_started : callable, optional
        Called once the solver runs: for CBC, after its model file is written (the Python
        part of a solve, which another thread's build waits for).

    Returns
    -------
    BackendResult
        Never raises for solver trouble: a crash, an unreadable answer or a hung CBC is
        ``SolveStatus.ERROR`` or ``TIME_LIMIT`` with a message.

    Raises
    ------
    ValueError
        If a PuLP problem maximises or the backend is not installed.
    Exception
        Whatever ``on_progress`` raises, after CBC has been killed or HiGHS stopped.

    Examples
    --------
    >>> prob = pulp.LpProblem("tiny", pulp.LpMinimize)
    >>> x = prob.add_variable("x", 0, 3, cat="Integer")
    >>> prob += 2 * x + 1
    >>> prob += x >= 1.5, "at_least"
    >>> result = run_backend(prob, BackendOptions(time_limit_s=10))
    >>> result.status, result.objective, x.varValue
    (<SolveStatus.OPTIMAL: 'optimal'>, 5.0, 2.0)
    """
    if options.backend not in available_backends():
        raise ValueError(f"backend {options.backend!r} is not installed; use 'cbc'")
    if isinstance(problem, LinearProgram):
        return _run(problem, options, on_progress, cancel, start, on_solution, on_started)
    if problem.sense != pulp.LpMinimize:
        raise ValueError("run_backend expects a minimisation problem; bounds assume it")
    program, variables = from_pulp(problem)
    if options.warm_start and start is None:
        start = np.array([v.varValue or 0.0 for v in variables], dtype=float)
    result = _run(program, options, on_progress, cancel, start, on_solution, on_started)
    if result.values is not None:
        for var, value in zip(variables, result.values.tolist(), strict=True):
            var.varValue = value
    problem.assignStatus(*pulp_codes(result.status, result.has_solution))
    return result


def _run(
    program: LinearProgram,
    options: BackendOptions,
    on_progress: Callable[[Progress], None] | None,
    cancel: Cancel | None,
    start: np.ndarray | None,
    on_solution: SolutionCallback | None,
    on_started: Callable[[], None] | None = None,
) -> BackendResult:
    tracker = Tracker(program.offset, on_progress)
    if options.backend == "highs":  # each runner is its own: a new one is a new branch here
        if on_started is not None:
            on_started()
        return run_highs(program, options, tracker, cancel, start, on_solution)
    return run_cbc(program, options, tracker, cancel, start, on_started)
