"""Budget sweeps: the memory/time trade-off curve of one device (any executor).

Each point solves the graph with one device's budget set to a fraction of the
no-rematerialization peak (spec/formats.md ``sweep``), with XEngine and with the best single
device, so the curve shows where heterogeneity pays off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from solver.bounds import no_remat_peak
from solver.graph import Graph
from solver.methods import solve
from solver.solve import SolveOptions, SolveResult

__all__ = ["SweepPoint", "budget_steps", "sweep_budgets"]


@dataclass(frozen=True)
class SweepPoint:
    """One solve of the sweep: ``budget`` bytes of activation memory on ``device``."""

    device: str
    fraction: float
    budget: int
    method: str
    result: SolveResult

    @property
    def total_ms(self) -> float | None:
        return self.result.timeline.total_ms if self.result.ok else None


def budget_steps(start: float, stop: float, steps: int) -> list[float]:
    """Evenly spaced fractions from ``start`` to ``stop`` inclusive.

    Examples
    --------
    >>> budget_steps(1.0, 0.1, 4)
    [1.0, 0.7, 0.4, 0.1]
    """
    if steps < 2:
        return [start]
    return [round(start + (stop - start) * j / (steps - 1), 6) for j in range(steps)]


def sweep_budgets(
    graph: Graph,
    device: str,
    fractions: Iterable[float],
    methods: Iterable[str] = ("xengine", "checkmate"),
    options: SolveOptions = SolveOptions(),
    executor: Executor | None = None,
    on_point: Callable[[SweepPoint], None] | None = None,
    cancel: threading.Event | None = None,
) -> list[SweepPoint]:
    """Solve ``graph`` for each budget fraction of ``device`` and each method.

    The device's memory becomes ``fixed_memory + fraction * no_remat_peak``. With an
    ``executor`` the solves run concurrently; ``on_point`` is called as each one finishes.
    Points cancelled before they start are left out.
    """
    peak = no_remat_peak(graph)
    fixed = graph.device(device).fixed_memory
    jobs = []
    for fraction in fractions:
        budget = int(fraction * peak)
        variant = graph.with_budgets({device: fixed + budget})
        for method in methods:
            jobs.append((fraction, budget, method, variant))

    def run(job) -> SweepPoint | None:
        fraction, budget, method, variant = job
        if cancel is not None and cancel.is_set():
            return None
        point = SweepPoint(
            device, fraction, budget, method, solve(variant, method, options, cancel=cancel)
        )
        if on_point is not None:
            on_point(point)
        return point

    if executor is None:
        points = [run(job) for job in jobs]
    else:
        futures: list[Future] = [executor.submit(run, job) for job in jobs]
        points = [f.result() for f in futures]
    return [p for p in points if p is not None]
