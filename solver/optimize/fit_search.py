"""Does any schedule fit one device's budget? A backward search that answers both ways.

The construction repairs checkpoint-all greedily and can get stuck on graphs where every
tensor a stage holds has a long recomputation cascade (Moccasin-like random layered graphs at
0.8 of their peak): it then cannot tell a hard budget from an impossible one. This search
decides it, for one device, by walking a schedule backwards in time.

The state at a moment of the schedule is ``(H, s, last)``: ``H`` the tensors that were
computed before that moment and are read after it (they must be resident now), ``s`` the
stage, ``last`` the node of the next operation in the stage (operations in a stage run in
ascending node order, and stage ``s`` ends with node ``s``, model.md §2). The operation just
before the moment is either

* a recomputation, in stage ``s``, of some ``r`` in ``H`` with ``r < last``: it needs
  ``H`` and ``r``'s inputs in memory (with ``r``'s workspace), and before it ``r`` is no
  longer needed but its inputs are; or
* node ``s - 1`` at the end of stage ``s - 1`` (every stage computes its own node): it needs
  ``H``, node ``s - 1`` and its inputs in memory.

Nothing is resident when stage 0 starts, so a schedule exists exactly when some chain of
such steps reaches stage 0 with ``H`` empty. Operations that nothing reads later only add
memory, and tensors not needed later are freed after their last read (model.md §2 rules 4-5),
so the bytes a step needs are exactly what the simulator counts: the search is exact, not a
relaxation. A chain it finds is a schedule (its keep sets are the ``H`` at each stage's
start); a search that runs out of states is a proof that none exists.

It is a depth-first search, the step that leaves the fewest bytes resident first, pruned by
dominance: at the same stage and next node, a state whose ``H`` contains one already expanded
needs at least as much memory at every step, so it cannot succeed where that one failed.
The states can still be exponential in number; the search stops at a deadline and then says
neither.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from solver.document.graph import Graph
from solver.optimize.backends._common import Cancel

__all__ = ["FitSearch", "FitSearcher", "search_fit"]

MAX_STATES = 2_000_000
"""States expanded at most (about 1 GB of bookkeeping at 250 nodes); then the answer is
"unknown"."""


@dataclass(frozen=True)
class FitSearch:
    """The answer of :func:`search_fit`.

    ``keeps`` (when a schedule was found) holds, per stage ``t`` and one more, the node
    indices resident when stage ``t`` starts; ``proven`` is True when the search ran out of
    states: no schedule fits the budget. Neither: the deadline (or a cancel) came first.
    """

    keeps: list[frozenset[int]] | None
    proven: bool
    states: int
    seconds: float

    @property
    def found(self) -> bool:
        return self.keeps is not None


def search_fit(
    graph: Graph,
    deadline: float | None = None,
    cancel: Cancel | None = None,
    device: int = 0,
) -> FitSearch:
    """Search for a schedule of every node on ``device`` within its activation budget, until
    ``deadline`` (see :class:`FitSearcher`).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> search_fit(unit_chain(4, budget=3)).found  # recompute the chain in the backward
    True
    >>> search_fit(unit_chain(4, budget=2)).proven  # a node and its input need 2 units ...
    True
    """
    return FitSearcher(graph, device).run(deadline, cancel)


class FitSearcher:
    """The search of the module docstring, which can be stopped and taken up again.

    Nodes computed once (``Node.recomputable`` False) are computed in their own stage only.
    Transfers and other devices are not considered: on a graph with one device a search
    that runs out of states proves the budget infeasible.
    """

    def __init__(self, graph: Graph, device: int = 0) -> None:
        n = graph.n
        self.n = n
        self.size = [int(b) for b in graph.output_bytes]
        self.work = [int(b) for b in graph.workspace]
        self.budget = int(graph.devices[device].activation_budget)
        self.once = set(graph.once)
        self.inputs = [0] * n
        for k in range(n):
            for i in graph.inputs[k]:
                self.inputs[k] |= 1 << i
        self.seconds = 0.0
        self._began = 0.0
        self.states = 0
        self.answer: FitSearch | None = None
        # (stage, next node, lowest node of H) -> every H expanded
        self.expanded: dict[tuple[int, int, int], list[int]] = {}
        self.parent: dict[tuple[int, int, int], tuple[int, int, int] | None] = {}
        self.stack: list[tuple[tuple[int, int, int], int]] = []
        if n == 0:
            self.answer = FitSearch([frozenset()], False, 0, 0.0)
        elif any(math.isnan(graph.cost[device, k]) for k in range(n)):
            self.answer = FitSearch(None, False, 0, 0.0)  # a node cannot run here: not ours
        else:
            top = n - 1
            first = (self.inputs[top], top, top)
            if self._weight(self.inputs[top] | 1 << top) + self.work[top] > self.budget:
                self.answer = FitSearch(None, True, 0, 0.0)
            self.parent[first] = None
            self.stack.append((first, self._weight(first[0])))

    def _weight(self, mask: int) -> int:
        size = self.size
        total = 0
        while mask:
            low = mask & -mask
            total += size[low.bit_length() - 1]
            mask ^= low
        return total

    def run(self, deadline: float | None = None, cancel: Cancel | None = None) -> FitSearch:
        """Search on until an answer, ``deadline`` or ``cancel``; neither answer (``found``
        and ``proven`` both false) means it can be run again to go on."""
        if self.answer is not None:
            return self.answer
        self._began = time.monotonic()
        try:
            return self._search(deadline, cancel)
        finally:
            self.seconds += time.monotonic() - self._began

    def _spent(self) -> float:
        return self.seconds + time.monotonic() - self._began

    def _done(self, keeps: list[frozenset[int]] | None, proven: bool) -> FitSearch:
        self.answer = FitSearch(keeps, proven, self.states, self._spent())
        return self.answer

    def steps_back(
        self, resident: int, s: int, last: int, held: int
    ) -> list[tuple[int, tuple[int, int, int]]]:
        """The steps back from state ``(resident, s, last)`` (``held`` its bytes) that fit the
        budget, as ``(bytes held before the step, the state before it)``; the step's
        operation computes that state's node ``[2]`` (in its stage ``[1]``)."""
        inputs, size, work, budget, weight = (
            self.inputs,
            self.size,
            self.work,
            self.budget,
            self._weight,
        )
        steps: list[tuple[int, tuple[int, int, int]]] = []
        # the bytes of a step's inputs not yet resident are both what it needs beyond
        # ``held`` and what the state before it holds beyond ``held`` less its output
        if s > 0:  # node s - 1 at the end of stage s - 1
            j = s - 1
            bit = 1 << j
            loaded = weight(inputs[j] & ~resident)
            output = size[j] if resident & bit else 0  # already counted in ``held``
            if held + loaded + size[j] - output + work[j] <= budget:
                steps.append((held - output + loaded, ((resident & ~bit) | inputs[j], j, j)))
        once = self.once
        mask = resident
        while mask:
            low = mask & -mask
            mask ^= low
            r = low.bit_length() - 1
            if r >= last or r in once:
                continue
            loaded = weight(inputs[r] & ~resident)
            if held + loaded + work[r] <= budget:
                steps.append((held - size[r] + loaded, ((resident & ~low) | inputs[r], s, r)))
        return steps

    def _search(self, deadline: float | None, cancel: Cancel | None) -> FitSearch:
        expanded, parent, stack = self.expanded, self.parent, self.stack
        while stack:
            if self.states % 256 == 255 and (
                self.states >= MAX_STATES
                or (deadline is not None and time.monotonic() > deadline)
                or (cancel is not None and cancel.is_set())
            ):
                return FitSearch(None, False, self.states, self._spent())
            state, held = stack.pop()
            resident, s, last = state
            if _dominated(expanded, s, last, resident):
                continue  # a subset of it was expanded: whatever works here worked there
            lowest = (resident & -resident).bit_length() - 1  # -1 when empty
            expanded.setdefault((s, last, lowest), []).append(resident)
            self.states += 1
            if s == 0 and resident == 0:
                return self._done(_keeps(state, parent, self.n), False)
            steps = self.steps_back(resident, s, last, held)
            # the lightest popped first; ties by stage and node, so runs are reproducible
            steps.sort(key=lambda step: (-step[0], step[1][1], step[1][2]))
            for after_weight, child in steps:
                if child not in parent:
                    parent[child] = state
                stack.append((child, after_weight))
        return self._done(None, True)


def _dominated(
    expanded: dict[tuple[int, int, int], list[int]], s: int, last: int, resident: int
) -> bool:
    """Whether a subset of ``resident`` was expanded at stage ``s`` before node ``last``.

    The expanded sets are filed by their lowest node, so only the files of nodes in
    ``resident`` (and of the empty set) can hold a subset: a tenth of the comparisons."""
    if (s, last, -1) in expanded:
        return True
    outside = ~resident
    mask = resident
    while mask:
        low = mask & -mask
        mask ^= low
        for seen in expanded.get((s, last, low.bit_length() - 1), ()):
            if not seen & outside:
                return True
    return False


def _keeps(
    end: tuple[int, int, int],
    parent: dict[tuple[int, int, int], tuple[int, int, int] | None],
    n: int,
) -> list[frozenset[int]]:
    """The keep sets of the chain that ends (in the search: begins) at ``end``: the tensors
    resident at each stage's start are the ``H`` of the state stage ``t - 1``'s node was
    computed from."""
    keeps: list[frozenset[int]] = [frozenset() for _ in range(n + 1)]
    child = end
    state = parent[end]
    while state is not None:
        resident, s, _ = state
        if child[1] == s - 1:  # the step from state to child computed node s - 1
            keeps[s] = frozenset(_bits(resident))
        child, state = state, parent[state]
    return keeps


def _bits(mask: int) -> list[int]:
    found = []
    while mask:
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return found
