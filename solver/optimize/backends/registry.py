"""Every solver backend in one table: its name, its label, what it solves and how well.

Adding a backend means one entry here (and its runner); the command line's choices, the
window's list and the solve loop's per-backend decisions all read this table, as linopy keeps
one registry of solvers with their features.

Examples
--------
>>> BACKENDS["cbc"].label, BACKENDS["cbc"].kind
('CBC', 'milp')
>>> backend("gurobi")
Traceback (most recent call last):
...
solver.errors.XEngineError: unknown solver 'gurobi'; choose one of cbc, highs, cpsat
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from solver.errors import XEngineError

__all__ = ["BACKENDS", "Backend", "available_backends", "backend"]


@dataclass(frozen=True)
class Backend:
    """One backend and its features.

    ``kind`` is what it solves: ``"milp"`` (the paper's linear formulations, as a
    :class:`~solver.optimize.backends.lp.LinearProgram`) or ``"cp"`` (the retention-interval
    model of :mod:`solver.optimize.intervals`). ``mip_start``: handed the heuristic start,
    it keeps searching well (CBC does not: its own heuristics stop, docs/solver.md).
    ``module`` must import for it to be available; ``extra`` is the pip extra that installs it.
    """

    name: str
    label: str
    kind: str
    description: str
    mip_start: bool
    module: str | None = None
    extra: str | None = None

    def available(self) -> bool:
        """Whether this installation can run it."""
        if self.module is None:
            return True
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    def install_hint(self) -> str:
        """How to make it available, in one phrase."""
        return f"pip install -e '.[{self.extra}]'" if self.extra else "it is built in"


BACKENDS: dict[str, Backend] = {
    "cbc": Backend(
        "cbc",
        "CBC",
        "milp",
        "COIN-OR CBC, bundled with PuLP (the default)",
        mip_start=False,
    ),
    "highs": Backend(
        "highs",
        "HiGHS",
        "milp",
        "HiGHS through highspy",
        mip_start=True,
        module="highspy",
        extra="highs",
    ),
    "cpsat": Backend(
        "cpsat",
        "CP-SAT",
        "cp",
        "OR-Tools CP-SAT on the retention-interval model",
        mip_start=True,
        module="ortools.sat.python.cp_model",
        extra="cpsat",
    ),
}


def backend(name: str) -> Backend:
    """The backend called ``name``; an unknown name is refused with the choices."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise XEngineError(
            f"unknown solver {name!r}; choose one of {', '.join(BACKENDS)}"
        ) from None


def available_backends() -> list[str]:
    """The backends this installation can run, in the table's order (CBC first).

    Examples
    --------
    >>> available_backends()[0]
    'cbc'
    """
    return [name for name, b in BACKENDS.items() if b.available()]
