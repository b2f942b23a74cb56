"""Solve statuses and progress reports shared by the backends, the solver and the GUI.

The statuses are ours, not PuLP's: PuLP reports a time-limited or interrupted run as
"Optimal", so every backend maps its own words onto these (docs/model.md section 4).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from solver.document.schedule import Schedule

__all__ = ["SolveStatus", "Progress"]


class SolveStatus(enum.Enum):
    """How a solve ended."""

    OPTIMAL = "optimal"
    """Proven optimal within the requested relative gap."""
    FEASIBLE = "feasible"
    """Stopped by the time limit with an incumbent; the gap says how far from proven."""
    INFEASIBLE = "infeasible"
    """Proven that no schedule fits the budgets."""
    TIME_LIMIT = "time-limit"
    """Stopped by the time limit before any schedule was found."""
    CANCELLED = "cancelled"
    """Stopped by the user; an incumbent, if any, is kept."""
    ERROR = "error"
    """The backend failed, or a returned schedule did not replay in the simulator."""

    @property
    def has_solution_possible(self) -> bool:
        """Whether a schedule may come with this status."""
        return self in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE, SolveStatus.CANCELLED)


@dataclass(frozen=True)
class Progress:
    """One progress report from a running solve (all fields in model units).

    ``incumbent`` and ``bound`` are ``None`` while unknown; ``log_line`` carries one line of
    the backend's log when the report was triggered by a log line. ``schedule`` is set when the
    report announces a new incumbent schedule that has already been replayed by the simulator
    (valid, costing ``incumbent``): a view may draw it as provisional until the solve ends.
    """

    elapsed_s: float
    incumbent: float | None = None
    bound: float | None = None
    gap: float | None = None
    log_line: str | None = None
    schedule: Schedule | None = None
