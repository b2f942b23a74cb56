"""Valid inequalities that tighten the LP relaxation of the solved MIQP (issue 18).

The memory rows of :mod:`solver.optimize.miqp` are a recurrence through continuous ``U``
columns, so neither the LP relaxation nor CBC's knapsack-cover generator sees which tensors
can never be resident together. On VGG16 with the GPU at 40 % the LP holds half of a 308 MB
tensor on the GPU across a stage whose operation needs 822 MB of a 935 MB budget, and CBC's
bound stayed at 486 ms for 300 s against a 514 ms schedule (docs/solver.md, "The bound at
40 %").

**Conflict cuts.** Operation ``k`` on device ``d`` in stage ``t`` needs
``need(k) = M_k + sum_{i in in(k)} M_i + W_k`` bytes on ``d`` while it runs (its output, every
input, local or copied, and its workspace; model.md §2.3-2.4). Two kinds of tensor ``i`` are
resident on ``d`` during that operation whatever else the schedule does:

- ``i < k`` kept into stage ``t+1`` (``S[d,t+1,i] = 1``): it was resident from the start of
  stage ``t`` or computed at position ``i < k``, and a kept tensor is not freed;
- ``k < i < t`` resident at the start of stage ``t`` (``S[d,t,i] = 1``): a tensor is freed only
  after its last use in the stage, and every user of ``i`` comes after ``i``, so after ``k``.

So where ``M_i + need(k) > B_d`` (``i`` not ``k`` and not an input of ``k``, which ``need``
counts already), the two cannot both be 1::

    S[d,t+1,i] + R[d,t,k] <= 1      (i < k)
    S[d,t,i]   + R[d,t,k] <= 1      (k < i < t)

Every valid schedule satisfies them (the argument uses only model.md §2), so the model's
optimum and every bound of it stay valid; they only cut fractional points. Sizes are in
bytes, so they hold for the exact problem even where the memory rows are rounded. The
offloading model is not given them: there a copy at the end of a stage makes a tensor
resident that was not resident during the stage.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from solver.optimize.bounds import node_requirement

if TYPE_CHECKING:
    from solver.optimize.miqp import ArrayModel, ModelBuilder

__all__ = ["MAX_CONFLICT_CUTS", "conflict_pairs", "add_conflict_cuts"]

MAX_CONFLICT_CUTS = 500_000
"""Conflict rows added at most (two coefficients each); beyond it the rest are left out,
which keeps every bound valid, only weaker."""


def conflict_pairs(model: ArrayModel, limit: int = MAX_CONFLICT_CUTS) -> list[tuple[int, int]]:
    """The column pairs ``(S, R)`` of the conflict cuts of ``model`` (module docstring).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.optimize.miqp import build_array_model
    >>> len(conflict_pairs(build_array_model(unit_chain(4, budget=3))))  # backward ops need 3 B
    26
    >>> conflict_pairs(build_array_model(unit_chain(4, budget=4)))  # 1 B to spare: no pair
    []
    """
    g = model.graph
    sizes = np.array([int(m) for m in g.output_bytes], dtype=np.int64)
    by_size = np.argsort(-sizes, kind="stable")
    pairs: list[tuple[int, int]] = []
    for d in range(g.num_devices):
        budget = int(g.activation_budgets[d])
        if not model.memory.binds(d) or budget >= model.memory.cap:
            continue
        for k in range(g.n):
            if (d, k, k) not in model.R:
                continue  # k never runs on d
            heavy = _heavier_than(sizes, by_size, budget - node_requirement(g, k))
            skip = {k, *g.inputs[k]}
            heavy = [i for i in heavy if i not in skip]
            for t in range(k, g.n):
                r = model.R.get((d, t, k))
                if r is None:
                    continue
                for i in heavy:
                    s = model.S.get((d, t + 1, i) if i < k else (d, t, i))
                    if s is not None:
                        pairs.append((s, r))
                if len(pairs) >= limit:
                    return pairs[:limit]
    return pairs


def add_conflict_cuts(model: ArrayModel, b: ModelBuilder) -> int:
    """Add ``S + R <= 1`` for every conflict pair of :func:`conflict_pairs`; returns how many."""
    pairs = conflict_pairs(model)
    for s, r in pairs:
        b.row([s, r], [1.0, 1.0], -math.inf, 1.0)
    return len(pairs)


def _heavier_than(sizes: np.ndarray, by_size: np.ndarray, room: int) -> list[int]:
    """The nodes whose output exceeds ``room`` bytes (``by_size``: indices, largest first)."""
    count = int(np.searchsorted(-sizes[by_size], -room, side="left"))
    return [int(i) for i in by_size[:count]]
