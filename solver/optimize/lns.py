"""Anytime improvement: a large neighbourhood search over windows of stages.

On real networks the whole model is too big for the backend to improve on the heuristic start
within seconds (ResNet-50: 130,000 columns), yet a window of a few stages is small. So: keep
the incumbent everywhere but in one window of consecutive stages, let the backend re-solve the
window (only cheaper schedules count: the incumbent's cost is the cutoff), replay what it
finds, and move on. Windows slide with half a window of overlap, starting where recomputation
and copies cost the most; a full pass without improvement widens them. Every improvement is
an incumbent of :class:`~solver.optimize.incumbents.Incumbents`, so the GUI sees it at once.

This only finds schedules; the bound comes from the full model (:mod:`solver.optimize.solve` runs
both). It works alike on any linear formulation (:mod:`solver.optimize.formulation`), which
says where each column belongs: with offloading, a copy ``O`` belongs to its stage and tensor,
and the end-of-stage holds ``H`` (continuous, like ``U``) are always free.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from solver.document.schedule import Schedule
from solver.execution.simulate import Timeline
from solver.optimize.backends import BackendOptions, registry, run_backend
from solver.optimize.backends._common import AnyOf, Cancel
from solver.optimize.incumbents import Incumbents
from solver.optimize.miqp import ArrayModel
from solver.optimize.miqp_schedule import without_resident_recomputes
from solver.status import SolveStatus

__all__ = ["WindowSearch", "encode_schedule", "search_windows"]

logger = logging.getLogger(__name__)

FREE_INTEGERS = 4000
"""Free integer columns in a first neighbourhood: CBC re-solves one in well under a second.
Each kind then adapts: wider after a quick proof that nothing better is inside, narrower after
a time-out (ResNet-50 improves only from about 25,000)."""
MIN_FREE_INTEGERS, MAX_FREE_INTEGERS = 1000, 60000
MIN_SECONDS, MAX_SECONDS = 2.0, 15.0
"""A neighbourhood's time limit: a sixth of the time left, within these."""
_KINDS = ("nodes", "stages")


@dataclass
class WindowSearch:
    """Statistics of one search: windows tried, improvements, and time spent."""

    windows: int = 0
    improvements: int = 0
    seconds: float = 0.0


def search_windows(
    model: ArrayModel,
    best: Incumbents,
    backend: str,
    deadline: float,
    cancel: Cancel | None = None,
    stop: Cancel | None = None,
) -> WindowSearch:
    """Improve ``best`` by re-solving windows of stages until ``deadline``, ``cancel`` or ``stop``.

    Parameters
    ----------
    model : ArrayModel
        The full model; windows are restrictions of it.
    best : Incumbents
        Holds the incumbent (it must have one) and receives every improvement.
    backend : str
        ``"cbc"`` or ``"highs"``, for the window solves.
    deadline : float
        A ``time.monotonic()`` instant.
    cancel, stop : Cancel, optional
        Either ends the search (``stop``: the full model proved optimality).
    """
    stats = WindowSearch()
    started = time.monotonic()
    neighbourhoods = _Neighbourhoods(model)
    targets = {kind: float(FREE_INTEGERS) for kind in _KINDS}
    spent = dict.fromkeys(_KINDS, 0.0)
    found = dict.fromkeys(_KINDS, 0)
    while not _stopped(deadline, cancel, stop):
        x = _incumbent_values(model, best)
        if x is None:
            break
        # The kind that has paid best so far (improvements per second), each tried early on.
        kind = max(_KINDS, key=lambda k: (found[k] + 1) / (spent[k] + 5.0))
        free = neighbourhoods.next(kind, int(targets[kind]))
        stats.windows += 1
        limit = min(max(MIN_SECONDS, (deadline - time.monotonic()) / 6), MAX_SECONDS)
        began = time.monotonic()
        result = _solve_free(model, best, backend, x, free, deadline, limit, cancel, stop)
        spent[kind] += time.monotonic() - began
        found[kind] += result == "improved"
        stats.improvements += result == "improved"
        logger.debug("%s %d: %s", kind, int(targets[kind]), result)
        if result == "proven":  # nothing better in there, and quickly: look wider
            targets[kind] = min(targets[kind] * 2, MAX_FREE_INTEGERS)
        elif result == "timeout":
            targets[kind] = max(targets[kind] * 0.6, MIN_FREE_INTEGERS)
    stats.seconds = time.monotonic() - started
    return stats


class _Neighbourhoods:
    """Which columns a neighbourhood frees: windows of stages, or blocks of tensors.

    A window of consecutive stages re-decides how those stages compute, given what enters and
    leaves them. A block of consecutive nodes with the nodes that read them re-decides, across
    the whole schedule, where those tensors live and when they are kept or recomputed: the
    checkpointing decisions that stage windows cannot move. Memory columns ``U`` are always
    free (they follow from the rest).
    """

    def __init__(self, model: ArrayModel) -> None:
        g = model.graph
        self.model = model
        self.integer = model.program.integer
        roles = model.formulation.roles(model)
        self.stage, self.node, self.other, self.is_u = (
            roles.stage,
            roles.node,
            roles.other,
            roles.state,
        )

        n = g.n
        self.per = {
            "stages": np.bincount(self.stage[self.integer], minlength=n),
            "nodes": np.bincount(self.node[self.integer & (self.node >= 0)], minlength=n) * 2,
        }
        self.cursor = {"stages": n, "nodes": n}

    def next(self, kind: str, target: int) -> np.ndarray:
        """The next neighbourhood of ``kind`` with about ``target`` free integers.

        Each kind sweeps from the end (the backward pass, where recomputation happens) to
        the start and round again, the next window overlapping the last by half.
        """
        n = self.model.graph.n
        last = self.cursor[kind]
        first, count = last, 0
        while first > 0 and count + self.per[kind][first - 1] <= target:
            first -= 1
            count += self.per[kind][first]
        first = min(first, last - 1)
        self.cursor[kind] = n if first == 0 else max(first + 1, (first + last) // 2)
        if self.cursor[kind] >= last and first > 0:
            self.cursor[kind] = last - 1
        if kind == "stages":
            return self.is_u | ((self.stage >= first) & (self.stage < last))
        g = self.model.graph
        chosen = np.zeros(n, dtype=bool)
        chosen[first:last] = True
        for i in range(first, last):
            chosen[list(g.users[i])] = True
        touched = (self.node >= 0) & chosen[np.maximum(self.node, 0)]
        touched |= (self.other >= 0) & chosen[np.maximum(self.other, 0)]
        return self.is_u | touched


def _stopped(deadline: float, *events: Cancel | None) -> bool:
    return time.monotonic() > deadline - 0.2 or any(e is not None and e.is_set() for e in events)


def _incumbent_values(model: ArrayModel, best: Incumbents) -> np.ndarray | None:
    with best.lock:
        schedule, timeline = best.schedule, best.timeline
    if schedule is None or timeline is None:
        return None
    schedule, timeline = without_resident_recomputes(model.graph, schedule, timeline)
    return encode_schedule(model, schedule, timeline)


def encode_schedule(model: ArrayModel, schedule: Schedule, timeline: Timeline) -> np.ndarray | None:
    """``schedule`` as column values of ``model`` (by its formulation), or ``None`` where the
    model cannot express it."""
    return model.formulation.encode(model, schedule, timeline)


def _solve_free(
    model: ArrayModel,
    best: Incumbents,
    backend: str,
    x: np.ndarray,
    free: np.ndarray,
    deadline: float,
    limit: float,
    cancel: Cancel | None,
    stop: Cancel | None = None,
) -> str:
    """Re-solve the ``free`` columns with the rest fixed at ``x``; offer what is cheaper.

    Returns "improved", "proven" (nothing cheaper inside, proved within a third of
    ``limit``), "timeout", or "none" (anything else).
    """
    sub, columns = model.program.restricted(free, x)
    cost = best.cost
    remaining = deadline - time.monotonic()
    if cost is None or remaining < 0.5:
        return "none"
    options = BackendOptions(
        backend=backend,
        time_limit_s=min(limit, remaining),
        gap_rel=1e-6,
        threads=1,
        cutoff=cost - 1e-6 * max(1.0, abs(cost)),
    )
    start = x[columns] if registry.backend(backend).mip_start else None
    # A neighbourhood's backend stops with the search: once the full model has proved its
    # answer, waiting for the neighbourhood would only delay the result.
    outcome = run_backend(sub, options, None, AnyOf(cancel, stop), start=start)
    quick = outcome.seconds < limit / 3
    if outcome.values is None:
        if outcome.status is SolveStatus.INFEASIBLE:
            return "proven" if quick else "none"
        return "timeout" if outcome.status is SolveStatus.TIME_LIMIT else "none"
    if outcome.objective is not None and outcome.objective >= cost - 1e-6 * max(1.0, abs(cost)):
        # Nothing cheaper came back: HiGHS, given the incumbent as a MIP start, returns it
        # despite the cutoff. Solved to optimality, that is a proof like CBC's "infeasible".
        if outcome.status is SolveStatus.OPTIMAL:
            return "proven" if quick else "none"
        return "timeout" if outcome.status is SolveStatus.TIME_LIMIT else "none"
    candidate = x.copy()
    candidate[columns] = outcome.values
    logger.debug("neighbourhood of %d columns: %.6g -> %.6g", len(columns), cost, outcome.objective)
    claimed = None if model.capped else outcome.objective
    if best.offer_values(model, candidate, claimed=claimed):
        return "improved"
    return "timeout" if outcome.status is not SolveStatus.OPTIMAL else "none"
