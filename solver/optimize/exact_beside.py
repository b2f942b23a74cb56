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
from collections.abc import Callable, Iterator
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

    leading = _Leading(best, deadline)

    def risen(bound: float) -> None:
        # in the log every few seconds, so a user sees what the search is doing
        now = time.monotonic()
        said = ""
        if now - noted[0] >= EXACT_NOTE_S:
            noted[0] = now
            said = f"exact search: no schedule costs less than {bound:.6g} ms so far"
        best.raise_floor(bound, said, EXACT)
        leading.heard(bound)

    def run() -> None:
        try:
            searcher = BestSearcher(graph)
            trailing = _Trailing(searcher, best, deadline)
            found = searcher.run(
                deadline,
                AnyOf(stop, halt, trailing),
                on_bound=risen,
                ceiling=lambda: best.cost,  # nothing as dear as the incumbent is queued
            )
            _offer(best, found)
            if trailing.fired and not found.proven:
                best.note(
                    "exact search: stopped, its bound trails another and rises too slowly to "
                    "prove the incumbent in the time left; its core goes to the others"
                )
        except Exception:  # a bound is a bonus: never let it cost the solve
            logger.exception("the exact search failed")

    thread = threading.Thread(target=run, name="xengine-exact-search", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5.0)


class _Trailing:
    """Set once the search's bound trails another prover's (CBC's, say) and, at the pace it
    has risen so far, would not reach the incumbent before the deadline: its one hope was to
    prove the incumbent by running out of states, and the core it takes is then worth more to
    the backend and CP-SAT. Its bound stays in the solve as it stood.

    Measured (one device, 60 s, docs/solver.md): on U-Net at 60 % its bound rose 0.1 ms a
    second, 7 ms short of the optimum and behind CBC's after 4 s, while it slowed CBC's proof
    from 7 s to 12 s; on the 100-node random graphs it leads CBC's, and goes on."""

    def __init__(
        self,
        searcher: BestSearcher,
        best: Incumbents,
        deadline: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.searcher, self.best, self.deadline, self.clock = searcher, best, deadline, clock
        self.looked = clock()
        self.first: tuple[float, float] | None = None  # (when, bound) first seen
        self.fired = False

    def is_set(self) -> bool:
        now = self.clock()
        if self.fired or now - self.looked < TRAILING_LOOK_S or self.best.outpaced.is_set():
            return self.fired  # once it took CBC's core (:class:`_Leading`) it keeps going
        self.looked = now
        mine, cost = self.searcher.bound, self.best.cost
        if self.first is None:
            self.first = (now, mine)
            return False
        other = self.best.bound_besides(EXACT)
        if cost is None or other is None or other <= mine:
            return False
        pace = (mine - self.first[1]) / (now - self.first[0])
        self.fired = mine + pace * (self.deadline - now) < cost
        return self.fired


class _Leading:
    """Sets the incumbents' :attr:`~solver.optimize.incumbents.Incumbents.outpaced` once the
    search's bound leads the backend's by at least :data:`LEAD_SHARE` of what separates the
    backend's from the incumbent, the backend's, at its pace since the last look, would not
    reach the incumbent by the deadline (CBC's bound creeps in its root's cuts), and the
    search, at its pace since then, would: then the
    backend's core is worth more to the search (it shares a core with CP-SAT's worker while
    CBC runs). The mirror of :class:`_Trailing`.

    Measured on the 100-node random graph seed 1 at 0.9 (one device, 60 s, 2 shared cores):
    the search's bound rose from 53,674 to 55,051 while CBC's stayed at its root's 52,052 after
    24 s of its feasibility pump against a known incumbent, and the search ended 0.4 % short
    of proving 55,252 (docs/solver.md, "It takes CBC's core when it leads far")."""

    def __init__(
        self, best: Incumbents, deadline: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.best, self.deadline, self.clock = best, deadline, clock
        self.looked: tuple[float, float, float | None] | None = None  # (when, mine, backend's)

    def heard(self, mine: float) -> None:
        """The search's bound rose to ``mine``: look, at most every :data:`TRAILING_LOOK_S`."""
        now = self.clock()
        if self.best.outpaced.is_set():
            return
        if self.looked is not None and now - self.looked[0] < TRAILING_LOOK_S:
            return
        backend, cost = self.best.backend_bound(), self.best.cost
        before, self.looked = self.looked, (now, mine, backend)
        if before is None or backend is None or cost is None or not math.isfinite(cost):
            return
        then, mine_then, backend_then = before
        if backend_then is None or mine - backend < LEAD_SHARE * (cost - backend):
            return
        left = self.deadline - now
        if backend + (backend - backend_then) / (now - then) * left >= cost:
            return  # the backend's bound, at its pace, would still prove the incumbent
        if mine + (mine - mine_then) / (now - then) * left < cost:
            return  # the search would not prove it either: the backend keeps its chance
        self.best.note(
            f"exact search: its bound {mine:.6g} ms leads {self.best.backend}'s "
            f"{backend:.6g}, which would not reach the incumbent in the time left at its pace "
            f"of the last {now - then:.0f} s; {self.best.backend} stops and its core goes to "
            "the search"
        )
        self.best.outpaced.set()


LEAD_SHARE = 0.5
"""How far the search's bound must lead the backend's, as a share of the distance from the
backend's to the incumbent, before the backend's core goes to the search."""

TRAILING_LOOK_S = 2.0
"""How often the search asks whether it trails (:class:`_Trailing`, its pace measured from its
first look on) or leads (:class:`_Leading`, both paces measured since the last look)."""


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
