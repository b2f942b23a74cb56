"""The cheapest one-device schedule, by A* over the backward search's states, and a lower
bound that rises while it runs.

:mod:`solver.optimize.fit_search` walks schedules backwards in time through states
``(H, s, last)`` and asks only whether one reaches stage 0. Every schedule is such a walk and
its cost is the sum of its steps' costs (one device, serial time, model.md §3), so the
cheapest schedule is a shortest path, and A* finds it: states are expanded in order of
``f = g + h``, ``g`` the cost of the operations after the state's moment, ``h`` the plain
cost of the stages not yet reached (each node is computed at least once, in its own stage).
``h`` never overestimates and drops by exactly a step's cost when the step computes a
stage's node, so the first finished walk is optimal, and while it runs the ``f`` of the
state being expanded is a lower bound on every schedule's cost: a bound from the problem
itself, not a relaxation of it.

The dominance of the feasibility search holds here too: two states at the same stage and
next node have the same ``h``, so the one expanded first has the smaller ``g``; a later one
whose ``H`` holds it cannot lead to a cheaper schedule. On Moccasin-like random layered
graphs of 100 nodes at 0.8-0.9 of their peak this proves the optimum in 0.1-12 s where CBC
on the paper's model stopped at 5-10 % gaps after a minute (bench/README.md); the states
grow exponentially with the width of the graph, so at larger sizes it gives the bound only.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from solver.document.graph import Graph
from solver.optimize.backends._common import Cancel
from solver.optimize.fit_search import FitSearcher, _dominated, _keeps

__all__ = ["BestSearch", "BestSearcher"]

OPEN_BYTES = 400_000_000
"""About the memory the queue of states waiting may take (each holds bitmasks of ``n`` bits):
when it would take more the search stops with the bound it has."""


@dataclass(frozen=True)
class BestSearch:
    """The answer of :meth:`BestSearcher.run`.

    ``keeps`` (when ``proven``) holds the keep sets of an optimal schedule, per stage and one
    more, and ``cost`` its cost; ``bound`` is a lower bound on every schedule's cost: the
    optimum when proven; ``math.inf`` when no schedule fits (``proven`` True, ``keeps``
    None); the ceiling when the search ran out of states below it (``proven`` False,
    ``keeps`` None: the schedule that set the ceiling is optimal).
    """

    keeps: list[frozenset[int]] | None
    cost: float | None
    bound: float
    proven: bool
    states: int
    seconds: float

    @property
    def infeasible(self) -> bool:
        return self.proven and self.keeps is None


class BestSearcher(FitSearcher):
    """A* over :class:`~solver.optimize.fit_search.FitSearcher`'s states (see the module
    docstring). Only the costs of ``device`` count: no transfers, no other device."""

    def __init__(self, graph: Graph, device: int = 0) -> None:
        super().__init__(graph, device)
        n = self.n
        self.cost = [float(graph.cost[device, k]) for k in range(n)]
        # ahead[s]: the plain cost of stages 0 .. s-1, each computing its own node at least
        self.ahead = [0.0]
        for k in range(n):
            self.ahead.append(self.ahead[-1] + self.cost[k])
        self.bound = 0.0
        self.best: BestSearch | None = None
        self.came_from: dict[tuple[int, int, int], tuple[int, int, int] | None] = {}
        # (f, -g, tie, state, bytes held, the state it was reached from): among equal f the
        # deepest first, nearer a finished walk
        self.queue: list[tuple[float, float, int, tuple[int, int, int], int, object]] = []
        self.pushed = 0
        self.max_open = OPEN_BYTES // (250 + n // 7)  # 1.5 M states at 100 nodes
        self.stack.clear()  # FitSearcher's depth-first start: not used here
        self.parent.clear()
        if self.answer is None and n:
            top = n - 1
            first = (self.inputs[top], top, top)
            g = self.cost[top]
            self.queue.append((g + self.ahead[top], -g, 0, first, self._weight(first[0]), None))
        elif self.answer is not None:
            if self.answer.proven:  # the last node alone does not fit
                self.best = BestSearch(None, None, math.inf, True, 0, 0.0)
            elif self.answer.found:  # the empty graph
                self.best = BestSearch(self.answer.keeps, 0.0, 0.0, True, 0, 0.0)
            else:  # a node that cannot run here: no answer, no bound
                self.best = BestSearch(None, None, 0.0, False, 0, 0.0)

    def run(  # type: ignore[override]
        self,
        deadline: float | None = None,
        cancel: Cancel | None = None,
        on_bound: Callable[[float], None] | None = None,
        ceiling: Callable[[], float | None] | None = None,
    ) -> BestSearch:
        """Search on until the optimum, ``deadline`` or ``cancel`` (then ``proven`` is false
        and ``bound`` is what is known; run again to go on). ``on_bound`` hears every rise of
        the bound, at most about every 4,096 states.

        ``ceiling`` gives the cost of the best schedule known elsewhere (or None), asked as
        often: no state whose ``f`` reaches it is queued, since none leads to a cheaper
        schedule. That keeps the queue small, and a search that then runs out of states has
        shown that nothing is cheaper than that cost: it returns it as the ``bound``,
        without ``keeps``."""
        if self.best is not None:
            return self.best
        self._began = time.monotonic()
        try:
            return self._astar(deadline, cancel, on_bound, ceiling)
        finally:
            self.seconds += time.monotonic() - self._began

    def _stop(self) -> BestSearch:
        return BestSearch(None, None, self.bound, False, self.states, self._spent())

    def _astar(
        self,
        deadline: float | None,
        cancel: Cancel | None,
        on_bound: Callable[[float], None] | None,
        ceiling: Callable[[], float | None] | None,
    ) -> BestSearch:
        cost, ahead, steps_back = self.cost, self.ahead, self.steps_back
        expanded, came_from, queue = self.expanded, self.came_from, self.queue
        told = self.bound
        known = ceiling() if ceiling is not None else None
        limit = math.inf if known is None else known
        pops = 0
        while queue:
            pops += 1
            if pops % 4096 == 1:  # the first pop too: a deadline passed stops at once
                known = ceiling() if ceiling is not None else None
                if known is not None and known < limit:
                    limit = known
                if on_bound is not None and self.bound > told:
                    told = self.bound
                    on_bound(told)
                if (
                    len(queue) > self.max_open
                    or (deadline is not None and time.monotonic() > deadline)
                    or (cancel is not None and cancel.is_set())
                ):
                    return self._stop()
            f, negative_g, _, state, held, before = heapq.heappop(queue)
            g = -negative_g
            resident, s, last = state
            if state in came_from or _dominated(expanded, s, last, resident):
                continue  # a subset was expanded with no more cost after it
            self.bound = max(self.bound, f)  # every state left has f at least this
            lowest = (resident & -resident).bit_length() - 1
            expanded.setdefault((s, last, lowest), []).append(resident)
            came_from[state] = before  # type: ignore[assignment]
            self.states += 1
            if s == 0 and resident == 0:
                self.best = BestSearch(
                    _keeps(state, came_from, self.n), g, g, True, self.states, self._spent()
                )
                return self.best
            for held_before, child in steps_back(resident, s, last, held):
                step = g + cost[child[2]]  # the operation computes the child's node
                if step + ahead[child[1]] < limit and child not in came_from:
                    self.pushed += 1
                    heapq.heappush(
                        queue,
                        (step + ahead[child[1]], -step, self.pushed, child, held_before, state),
                    )
        # out of states: nothing fits, or nothing is cheaper than the ceiling
        self.best = BestSearch(None, None, limit, math.isinf(limit), self.states, self._spent())
        return self.best
