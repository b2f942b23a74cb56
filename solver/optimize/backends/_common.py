"""What the CBC and HiGHS runners share: the progress tracker, the result and its helpers.

Objective and bound values arrive in solver units (without the objective's constant term);
:class:`Tracker` adds the constant, keeps the best incumbent and the latest bound, and
:func:`finish_result` turns the assigned values into an honest :class:`BackendResult`.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pulp

from solver.status import Progress, SolveStatus

if TYPE_CHECKING:
    from solver.optimize.backends.lp import LinearProgram

__all__ = [
    "AnyOf",
    "Cancel",
    "LOG_TAIL_LINES",
    "POLL_S",
    "BackendResult",
    "Tracker",
    "error_result",
    "finish_result",
    "pulp_codes",
]


class Cancel(Protocol):
    """What the backends ask of a cancel flag: a ``threading.Event``, or anything that can
    say it is set (the neighbourhood search stops on either of two events)."""

    def is_set(self) -> bool: ...


class AnyOf:
    """A :class:`Cancel` set when any of its flags is: a user's cancel and a solve's own stop
    (a proof, a sibling that finished) read as one, without a thread to join them."""

    def __init__(self, *flags: Cancel | None) -> None:
        self.flags = [f for f in flags if f is not None]

    def is_set(self) -> bool:
        return any(f.is_set() for f in self.flags)


LOG_TAIL_LINES = 200
POLL_S = 0.05
"""How often the CBC reader and the HiGHS watcher look at the cancel Event."""
_NO_INCUMBENT = 1e49  # CBC prints 1e+50 as "best solution" until it has one


@dataclass(frozen=True)
class BackendResult:
    """How a backend run ended, in our words rather than PuLP's (which says "Optimal" too often).

    ``objective`` and ``bound`` include the objective's constant term, which CBC does not
    see. ``has_solution`` is True exactly when ``values`` holds the incumbent, one value per
    column (for a PuLP problem, its variables' ``varValue`` then hold it too).
    """

    status: SolveStatus
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    has_solution: bool
    message: str = ""
    log_tail: tuple[str, ...] = ()
    values: np.ndarray | None = None


class Tracker:
    """Best incumbent and bound so far (in model units), the log tail, and the callback."""

    def __init__(self, offset: float, on_progress: Callable[[Progress], None] | None) -> None:
        self.start = time.monotonic()
        self.offset = offset
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._on_progress = on_progress

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def see(self, incumbent: float | str | None = None, bound: float | str | None = None) -> None:
        """Record solver-unit values; incumbents only improve, the latest bound wins."""
        inc = _as_float(incumbent)
        if inc is not None and abs(inc) < _NO_INCUMBENT:
            inc += self.offset
            self.incumbent = inc if self.incumbent is None else min(self.incumbent, inc)
        low = _as_float(bound)
        if low is not None and abs(low) < _NO_INCUMBENT:
            self.bound = low + self.offset

    def gap(self) -> float | None:
        return _relative_gap(self.incumbent, self.bound)

    def line(self, text: str) -> None:
        text = text.rstrip()
        if text:
            self.tail.append(text)
            self.report(text)

    def report(self, line: str | None = None) -> None:
        if self._on_progress is not None:
            bound = self.bound
            if bound is not None and self.incumbent is not None:
                bound = min(bound, self.incumbent)  # CBC's cutoff can push it past the incumbent
            self._on_progress(Progress(self.elapsed(), self.incumbent, bound, self.gap(), line))


def finish_result(
    program: LinearProgram,
    tracker: Tracker,
    status: SolveStatus,
    values: np.ndarray | None,
    message: str,
    gap_rel: float,
) -> BackendResult:
    """Build the result from the solution values, so the objective includes its constant."""
    objective = float(program.cost @ values + program.offset) if values is not None else None
    bound = tracker.bound if status != SolveStatus.INFEASIBLE else None
    if bound is not None and objective is not None:
        bound = min(bound, objective)
    stale = (_relative_gap(objective, bound) or 0.0) > gap_rel
    if status == SolveStatus.OPTIMAL and (bound is None or stale):
        # The backend proved the gap closed; a bound that says otherwise is an old log line
        # (e.g. CBC's LP relaxation when presolve or the cutoff finished the search).
        bound = objective
    return BackendResult(
        status=status,
        objective=objective,
        bound=bound,
        gap=_relative_gap(objective, bound),
        seconds=tracker.elapsed(),
        has_solution=values is not None,
        message=message,
        log_tail=tuple(tracker.tail),
        values=values,
    )


def error_result(tracker: Tracker, message: str) -> BackendResult:
    return BackendResult(
        SolveStatus.ERROR, None, None, None, tracker.elapsed(), False, message, tuple(tracker.tail)
    )


def pulp_codes(status: SolveStatus, solved: bool) -> tuple[int, int]:
    """PuLP's (status, sol_status) that do not lie: only a proven optimum is "Optimal"."""
    if status == SolveStatus.OPTIMAL:
        return pulp.LpStatusOptimal, pulp.LpSolutionOptimal
    if status == SolveStatus.INFEASIBLE:
        return pulp.LpStatusInfeasible, pulp.LpSolutionInfeasible
    if solved:
        return pulp.LpStatusNotSolved, pulp.LpSolutionIntegerFeasible
    return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound


def _relative_gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None:
        return None
    return max(0.0, objective - bound) / max(abs(objective), 1e-9)


def _as_float(text: float | str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
