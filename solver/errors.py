"""The exceptions of the core, each carrying what a person needs to fix the problem.

Messages read ``<file>: <where>: <what>; <fix>`` so that the command line can print them on one
line and the GUI can show them in a dialog without a traceback.
"""

from __future__ import annotations

__all__ = [
    "XEngineError",
    "GraphFormatError",
    "ScheduleFormatError",
    "ScheduleViolation",
    "InfeasibleBudgetError",
    "SolverError",
]


class XEngineError(Exception):
    """Base class of every error the core raises on purpose."""


class GraphFormatError(XEngineError, ValueError):
    """A graph document is malformed or inconsistent.

    Parameters
    ----------
    what
        What is wrong, e.g. ``"-4 MiB is negative"``.
    path
        The file the document came from, when there is one.
    where
        The place in the document, e.g. ``"node 'conv3', field 'memory'"``.
    fix
        How to repair it, e.g. ``"sizes must be >= 0"``.
    """

    kind = "graph"

    def __init__(self, what: str, *, path: str | None = None, where: str = "", fix: str = ""):
        self.what = what
        self.path = path
        self.where = where
        self.fix = fix
        super().__init__(self._compose())

    def _compose(self) -> str:
        parts = [p for p in (self.path, self.where) if p]
        head = ": ".join([*parts, self.what])
        return f"{head}; {self.fix}" if self.fix else head

    def with_path(self, path: str) -> GraphFormatError:
        """Return a copy that names ``path`` (loaders learn the file name late)."""
        return type(self)(self.what, path=path, where=self.where, fix=self.fix)


class ScheduleFormatError(GraphFormatError):
    """A schedule document is malformed or does not match its graph."""

    kind = "schedule"


class ScheduleViolation(XEngineError):
    """A schedule breaks a rule of spec/model.md section 2.

    Carries the stage, node and device where the first violation happened, the rule broken and
    the numbers involved, so that a person can find it in the step-through view.
    """

    def __init__(
        self,
        message: str,
        *,
        rule: str,
        stage: int | None = None,
        node: str | None = None,
        device: str | None = None,
        numbers: dict[str, float] | None = None,
    ):
        self.rule = rule
        self.stage = stage
        self.node = node
        self.device = device
        self.numbers = dict(numbers or {})
        super().__init__(message)


class InfeasibleBudgetError(XEngineError):
    """No schedule fits the budgets; ``explanation`` says why, with the numbers."""

    def __init__(self, explanation: str):
        self.explanation = explanation
        super().__init__(explanation)


class SolverError(XEngineError):
    """The optimisation backend failed in a way the user cannot fix by changing the input."""
