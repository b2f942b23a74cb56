"""The exact search beside a one-device solve: its rising bound and its optimum, handed to the
solve's incumbents.

:mod:`solver.optimize.best_search` is pure search; this module is the plumbing that runs it on
a thread while CBC and CP-SAT work (they run outside Python's GIL, the search inside it),
raises the incumbents' floor as its bound rises, and offers its optimum, replayed, which
closes the solve (:attr:`~solver.optimize.incumbents.Incumbents.closed`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from solver.execution.simulate import simulate
from solver.optimize.backends._common import AnyOf, Cancel
from solver.optimize.best_search import BestSearch, BestSearcher
from solver.optimize.construct import schedule_from_keeps
from solver.optimize.incumbents import Incumbents

__all__ = ["EXACT", "EXACT_SEARCH_NODES", "exact_search_beside"]

logger = logging.getLogger(__name__)

EXACT = "the exact search (A* over every order of computation and recomputation)"
"""How results and logs name :mod:`solver.optimize.best_search`."""

EXACT_NOTE_S = 5.0
"""The exact search's rising bound is written to the log at most this often."""

EXACT_SEARCH_NODES = 2_000
"""The exact search runs beside solves of graphs up to this size: above it every state's
bitmasks are large and the bound it reaches in a minute is the plain cost."""


@contextmanager
def exact_search_beside(best: Incumbents, deadline: float, halt: Cancel) -> Iterator[None]:
    """On a graph with one device, run the exact search on a thread of its own until
    ``deadline``, ``halt`` or the end of the ``with`` block. It shares the GIL with the
    model's build, so it costs graphs it cannot finish some time (docs/solver.md)."""
    graph = best.graph
    if graph.num_devices != 1 or graph.n > EXACT_SEARCH_NODES:
        yield
        return
    stop = threading.Event()
    noted = [time.monotonic()]

    def risen(bound: float) -> None:
        # in the log every few seconds, so a user sees what the search is doing
        now = time.monotonic()
        said = ""
        if now - noted[0] >= EXACT_NOTE_S:
            noted[0] = now
            said = f"exact search: no schedule costs less than {bound:.6g} ms so far"
        best.raise_floor(bound, said, EXACT)

    def run() -> None:
        try:
            found = BestSearcher(graph).run(
                deadline,
                AnyOf(stop, halt),
                on_bound=risen,
                ceiling=lambda: best.cost,  # nothing as dear as the incumbent is queued
            )
            _offer(best, found)
        except Exception:  # a bound is a bonus: never let it cost the solve
            logger.exception("the exact search failed")

    thread = threading.Thread(target=run, name="xengine-exact-search", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5.0)


def _offer(best: Incumbents, found: BestSearch) -> None:
    """What the search found: the optimum (replayed before it counts), or the bound it
    reached."""
    states = f"{found.states:,} states, {found.seconds:.1f} s"
    if found.keeps is not None and found.cost is not None:
        schedule = schedule_from_keeps(best.graph, found.keeps, best.method)
        timeline = simulate(best.graph, schedule)
        if not timeline.valid or timeline.total_ms > found.cost * (1 + 1e-9) + 1e-9:
            best.note(f"exact search: its schedule does not replay as found ({states})")
            return
        best.offer(schedule, timeline, source="the exact search")
        best.raise_floor(
            timeline.total_ms,
            f"exact search: {timeline.total_ms:.6g} ms is the optimum, no schedule costs less "
            f"({states})",
            EXACT,
        )
    elif found.bound > 0 and math.isfinite(found.bound):
        best.raise_floor(found.bound, "", EXACT)
        best.note(f"exact search: no schedule costs less than {found.bound:.6g} ms ({states})")
