"""Mending a repair that is stuck on one device: re-plan the stages after an overflow by a
search that joins the repair's own keep sets.

The construction's repair can end with a stage or two still over the budget (on narrow random
layered graphs at 0.8 of their peak: one stage, by 46 bytes of 54 KB). The rest of its
schedule fits, and :mod:`solver.optimize.fit_search`, which searches for a whole schedule from
nothing, gets lost at 250 nodes where the repair was one stage short. So the search here walks
back from the repair's keep set at a stage ``b`` after the last overflowing stage ``o``, through
the same states ``(H, s, next node)`` and steps, and stops at the first state at a stage
``s <= o`` whose ``H`` the repair already holds there (``H`` within its keep set ``K[s]``):
the repair's own stages before ``s`` then lead into it, since they hold at least ``H``, and its
stages after ``b`` follow from ``K[b]`` as before. Each such join removes the last overflow;
the next one is mended the same way, until none is left.

The states are taken cheapest first, counting both the recomputation a walk adds and how far
its ``H`` is from the repair's (each tensor the repair does not hold there counts as twenty
times a node's mean cost): near the repair first, then further. What it returns the caller replays.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence

from solver.document.graph import Graph
from solver.optimize.backends._common import Cancel
from solver.optimize.fit_search import FitSearcher, _bits, _dominated, _keeps

__all__ = ["mend"]

AHEAD = (1, 5, 20)
"""Where a join search starts, in stages after the last overflowing one: right after it
first (the stages after it stay as they are), then further on, so that more stages can change.
The last try starts at the end of the graph."""

APART = 20.0
"""Each tensor a state holds that the repair does not counts as this many mean node costs in
the order states are taken in: near the repair's keep sets first, cheap second. Measured on
the five stuck random graphs (100 nodes, seeds 8 and 9, at 0.8 and 0.9; 250 nodes, seeds 0
and 7, at 0.8): at 1 three found no join in 20 s, at 2 and at 5 one (250:7), at 20 none, each
within 3 s, the schedules costing within 3 % of those at 2."""


def mend(
    graph: Graph,
    keeps: Sequence[frozenset[int]],
    overflowing: Callable[[list[frozenset[int]]], list[int]],
    deadline: float,
    cancel: Cancel | None = None,
) -> list[frozenset[int]] | None:
    """Keep sets (one per stage and one more) with no stage over the budget, mended from
    ``keeps`` (a repair's, which must fit the budget after its last overflowing stage), or
    ``None`` when a join search fails or ``deadline`` passes. ``overflowing(keeps)`` gives
    the stages that overflow with these keep sets, ascending."""
    frame = [_mask(kept) for kept in keeps]
    n = graph.n
    while True:
        over = overflowing([frozenset(_bits(kept)) for kept in frame])
        if not over:
            return [frozenset(_bits(kept)) for kept in frame]
        last = over[-1]
        starts = sorted({min(n, last + ahead) for ahead in AHEAD} | {n})
        joined = None
        for start in starts:
            if time.monotonic() > deadline or (cancel is not None and cancel.is_set()):
                return None
            joined = JoinSearcher(graph, frame, start, last).run(deadline, cancel)
            if joined is not None:
                break
        if joined is None:
            return None
        frame = joined


def _mask(nodes: frozenset[int]) -> int:
    mask = 0
    for k in nodes:
        mask |= 1 << k
    return mask


class JoinSearcher(FitSearcher):
    """The search of the module docstring from ``frame[start]`` at the start of stage
    ``start``, joining ``frame`` at a stage up to ``top`` (one device, its budget)."""

    def __init__(self, graph: Graph, frame: list[int], start: int, top: int) -> None:
        super().__init__(graph)
        self.frame, self.start, self.top = frame, start, top
        self.answer = None
        self.stack.clear()
        self.parent.clear()
        self.cost = [float(graph.cost[0, k]) for k in range(self.n)]
        self.apart = APART * sum(self.cost) / max(1, self.n)

    def run(  # type: ignore[override]
        self, deadline: float | None = None, cancel: Cancel | None = None
    ) -> list[int] | None:
        """The mended keep sets as bitmasks, or ``None`` (no join, or out of time)."""
        frame, top, cost, apart = self.frame, self.top, self.cost, self.apart
        expanded, parent = self.expanded, self.parent
        first = (frame[self.start], self.start, 0)  # next node 0: nothing of stage start runs
        parent[first] = None
        weight_of = {first: 0.0}
        queue = [(0.0, 0, first, self._weight(first[0]))]
        pushed = 0
        while queue:
            if self.states % 256 == 255 and (
                (deadline is not None and time.monotonic() > deadline)
                or (cancel is not None and cancel.is_set())
            ):
                return None
            _, _, state, held = heapq.heappop(queue)
            resident, s, last = state
            if _dominated(expanded, s, last, resident):
                continue  # a subset was taken: it joins wherever this one would
            lowest = (resident & -resident).bit_length() - 1
            expanded.setdefault((s, last, lowest), []).append(resident)
            self.states += 1
            if s <= top and not resident & ~frame[s]:
                return self._spliced(state)
            spent = weight_of[state]
            for held_before, child in self.steps_back(resident, s, last, held):
                if child in parent:
                    continue
                parent[child] = state
                # a recomputation adds its cost; a stage's own node is in every schedule
                extra = cost[child[2]] if child[1] == s else 0.0
                weight_of[child] = spent + extra
                away = (child[0] & ~frame[child[1]]).bit_count()
                pushed += 1
                heapq.heappush(queue, (spent + extra + apart * away, pushed, child, held_before))
        return None

    def _spliced(self, joined: tuple[int, int, int]) -> list[int]:
        """The frame with the walk from ``start`` back to ``joined`` in place of its keep
        sets in between: the ``H`` at each stage's start along the walk."""
        walk = _keeps(joined, self.parent, self.n)
        frame = list(self.frame)
        s = joined[1]
        frame[s] = joined[0]
        for t in range(s + 1, self.start):
            frame[t] = _mask(walk[t])
        return frame
