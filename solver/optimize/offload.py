"""Offloading in the MIQP: XEngine's model plus copies kept on another device (model.md §7).

Off by default: :func:`solver.optimize.solve.solve_xengine` runs the paper's model
(:mod:`solver.optimize.miqp`) unless ``SolveOptions.offload`` is set, and this module never changes
that model. With the option, a tensor available on device ``s`` in stage ``t`` may be copied
over the link ``s -> d`` at the end of the stage and kept on ``d`` as a checkpoint; later
operations read it from ``d`` (locally, or copied back per use) or it is copied back and kept
again. docs/spec-notes.md, "Offloading", states the semantics the simulator replays; the rows
below are that text, in the letters of model.md §3 plus

- ``O[s->d,t,i]`` (binary, ``t < n-1``): tensor ``i`` copied from ``s`` to ``d`` at the end of
  stage ``t``, charged ``CC_link(s->d, M_i)`` (the link model: no edge is served);
- ``H[d,t,i]`` (continuous in [0, 1]): ``i`` held on ``d`` during that end-of-stage phase
  (kept into ``t+1``, or sent from ``d``), so a tensor both kept and sent counts once.

Rows added to (and replacing) the solved model's:

- checkpoints: ``S[d,t+1,i] <= S[d,t,i] + R[d,t,i] + sum_s O[s->d,t,i]`` (replaces §3's row);
- a copy needs its source and lands in a kept tensor: ``O[s->d,t,i] <= Z[s,t,i]``,
  ``O[s->d,t,i] <= S[d,t+1,i]``, ``O[s->d,t,i] <= 1 - Z[d,t,i]``;
- the source keeps it until the copy: ``F[s,t,(i,k)] + sum_d O[s->d,t,i] <= 1``;
- memory of the end-of-stage phase: ``H >= S[d,t+1,i]``, ``H >= O[d->d',t,i]``,
  ``sum_i M_i H[d,t,i] <= B_d`` (``S`` where no ``H``).

Tensors may be held on devices that cannot run them (a pure storage device) when they fit
there; other families keep the solved model's reductions (:mod:`solver.optimize.miqp`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Schedule, SolverInfo
from solver.execution.simulate import Timeline, offload_ms, simulate
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.bounds import explain_infeasible
from solver.optimize.incumbents import Incumbents, ProgressCallback, SolveResult
from solver.optimize.miqp import (
    BYTES_PER_NONZERO,
    DEFAULT_MEMORY_LIMIT,
    INF,
    ArrayModel,
    BuildInterrupted,
    ModelTooLarge,
    _Builder,
    _fits,
    add_freeing_constraints,
    add_frontier_constraints,
    add_input_constraints,
    add_memory_constraints,
    cheapest_once,
    estimate_size,
    memory_units,
)
from solver.optimize.miqp_schedule import schedule_from_values, values_from_schedule
from solver.status import SolveStatus

if TYPE_CHECKING:
    from solver.optimize.solve import SolveOptions

__all__ = [
    "OffloadModel",
    "build_offload_model",
    "schedule_from_offload_values",
    "solve_offload",
    "OFFLOAD_METHOD",
]

logger = logging.getLogger(__name__)

OFFLOAD_METHOD = "xengine+offload"
"""The method name an offloading solve reports (its schedules' ``solver.method``)."""


@dataclass
class OffloadModel(ArrayModel):
    """The solved model with offloading: ``O[s, d, t, i]`` and ``H[d, t, i]`` columns besides
    the families of :class:`~solver.optimize.miqp.ArrayModel` (see the module docstring)."""

    O: dict = field(default_factory=dict)  # noqa: E741 - the family's letter
    H: dict = field(default_factory=dict)


def build_offload_model(
    graph: Graph,
    *,
    rounding: str = "relaxed",
    deadline: float | None = None,
    cancel: threading.Event | None = None,
    memory_limit: int | None = None,
) -> OffloadModel:
    """Build XEngine's solved model extended with offloading copies (module docstring).

    Parameters are those of :func:`solver.optimize.miqp.build_array_model`.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> model = build_offload_model(unit_chain(2, budget=3))
    >>> len(model.O)  # one device: nowhere to offload to
    0
    """
    memory_limit = DEFAULT_MEMORY_LIMIT if memory_limit is None else memory_limit
    cols, nonzeros = estimate_size(graph)
    pairs = graph.num_devices * max(graph.num_devices - 1, 0)
    nonzeros += pairs * graph.n * graph.n * 4  # O and H columns and their rows, about
    if nonzeros * BYTES_PER_NONZERO > memory_limit:
        raise ModelTooLarge(
            f"the offloading model of '{graph.name}' ({graph.n} nodes) would have about "
            f"{nonzeros:,} coefficients; coarsen the graph or solve without offloading"
        )
    model = OffloadModel(graph, memory_units(graph, rounding), None)  # type: ignore[arg-type]
    b = _Builder(deadline, cancel)
    _add_variables(model, b)
    add_frontier_constraints(model, b)
    _add_exclusive_constraints(model, b)
    _add_checkpoint_constraints(model, b)
    add_input_constraints(model, b)
    add_freeing_constraints(model, b)
    add_memory_constraints(model, b)
    _add_offload_constraints(model, b)
    model.program = b.program()
    return model


def _holds(model: ArrayModel) -> list[list[bool]]:
    """Where a tensor may be resident: where its node can run, or where it fits alone and
    some link can bring it."""
    g = model.graph
    holds = []
    for d, device in enumerate(g.devices):
        reachable = any(link.target == device.name for link in g.links)
        budget = int(model.memory.budgets[d])
        holds.append(
            [_fits(model, d, i) or (reachable and int(g.memory[i]) <= budget) for i in range(g.n)]
        )
    return holds


def _add_variables(model: OffloadModel, b: _Builder) -> None:
    """The solved model's columns with ``S``, ``F`` and copy sources wherever a tensor may be
    held, then ``O`` per usable link and ``H`` per possible sender."""
    g = model.graph
    num_d = g.num_devices
    runs = [[_fits(model, d, i) for i in range(g.n)] for d in range(num_d)]
    holds = _holds(model)
    for d in range(num_d):
        for t in range(g.n):
            for i in range(t + 1):
                if runs[d][i]:
                    model.R[d, t, i] = b.column(float(g.cost[d, i]))
                if i < t and holds[d][i]:
                    model.S[d, t, i] = b.column()
            for e, (i, k) in enumerate(g.edge_pairs):
                if k <= t and holds[d][i]:
                    model.F[d, t, e] = b.column()
    for t in range(g.n):
        for e, (i, k) in enumerate(g.edge_pairs):
            if k > t:
                continue
            for src in range(num_d):
                for dst in range(num_d):
                    if src == dst or not (holds[src][i] and runs[dst][k]):
                        continue
                    cost = float(g.transfer[e, src, dst])
                    if math.isfinite(cost):
                        model.X[src, dst, t, e] = b.column(cost, 1.0, integer=False)
    for d in range(num_d):
        if model.memory.binds(d):
            for t in range(g.n):
                for k in range(t + 1):
                    if (d, t, k) in model.R:
                        model.U[d, t, k] = b.column(upper=INF, integer=False)
    names = [device.name for device in g.devices]
    for t in range(g.n - 1):
        for i in range(t + 1):
            for src in range(num_d):
                for dst in range(num_d):
                    if src == dst or (dst, t + 1, i) not in model.S or not holds[src][i]:
                        continue
                    ms = offload_ms(g, i, names[src], names[dst])
                    if math.isfinite(ms):
                        model.O[src, dst, t, i] = b.column(ms)
                        if model.memory.binds(src) and (src, t, i) not in model.H:
                            model.H[src, t, i] = b.column(integer=False)


def _add_exclusive_constraints(model: OffloadModel, b: _Builder) -> None:
    """``R[d,t,i] + S[d,t,i] <= 1`` where both exist."""
    for key, s in model.S.items():
        if key in model.R:
            b.row([model.R[key], s], [1.0, 1.0], -INF, 1.0)


def _add_checkpoint_constraints(model: OffloadModel, b: _Builder) -> None:
    """``S[d,t+1,i] <= S[d,t,i] + R[d,t,i] + sum_s O[s->d,t,i]``."""
    g = model.graph
    for (d, t, i), keep in model.S.items():
        cols = [keep]
        for family in (model.S, model.R):
            if (d, t - 1, i) in family:
                cols.append(family[d, t - 1, i])
        cols += [
            model.O[s, d, t - 1, i] for s in range(g.num_devices) if (s, d, t - 1, i) in model.O
        ]
        b.row(cols, [1.0] + [-1.0] * (len(cols) - 1), -INF, 0.0)


def _available(model: ArrayModel, d: int, t: int, i: int) -> list[int]:
    return [family[d, t, i] for family in (model.R, model.S) if (d, t, i) in family]


def _add_offload_constraints(model: OffloadModel, b: _Builder) -> None:
    """The copy rows, the source's hold until the copy, and the end-of-stage memory rows."""
    g = model.graph
    sent: dict[tuple[int, int, int], list[int]] = {}
    for (s, d, t, i), o in model.O.items():
        source = _available(model, s, t, i)
        b.row([o, *source], [1.0] + [-1.0] * len(source), -INF, 0.0)
        b.row([o, model.S[d, t + 1, i]], [1.0, -1.0], -INF, 0.0)
        here = _available(model, d, t, i)
        if here:
            b.row([o, *here], [1.0] * (1 + len(here)), -INF, 1.0)
        sent.setdefault((s, t, i), []).append(o)
    for (d, t, e), f in model.F.items():
        outgoing = sent.get((d, t, g.edge_pairs[e][0]))
        if outgoing:
            b.row([f, *outgoing], [1.0] * (1 + len(outgoing)), -INF, 1.0)
    for (d, t, i), h in model.H.items():
        if (d, t + 1, i) in model.S:
            b.row([h, model.S[d, t + 1, i]], [1.0, -1.0], 0.0, INF)
        for o in sent[d, t, i]:
            b.row([h, o], [1.0, -1.0], 0.0, INF)
    for d in range(g.num_devices):
        if not model.memory.binds(d):
            continue
        size, rhs = model.memory.sizes[d], float(model.memory.rhs[d])
        for t in range(g.n - 1):
            cols, vals = [], []
            for i in range(t + 1):
                column = model.H.get((d, t, i), model.S.get((d, t + 1, i)))
                if column is not None:
                    cols.append(column)
                    vals.append(float(size[i]))
            if cols:
                b.row(cols, vals, -INF, rhs)


def schedule_from_offload_values(
    model: OffloadModel, values: np.ndarray, info: SolverInfo
) -> Schedule:
    """The schedule the values encode: the solved model's reading plus each set ``O`` as an
    offloading copy (the cheapest source where several are set)."""
    g = model.graph
    plain = schedule_from_values(model, values, info)
    chosen: dict[tuple[int, int, int], tuple[float, int]] = {}
    for (s, d, t, i), o in model.O.items():
        if values[o] > 0.5:
            cost = float(model.program.cost[o])
            if (d, t, i) not in chosen or cost < chosen[d, t, i][0]:
                chosen[d, t, i] = (cost, s)
    if not chosen:
        return plain
    stages = list(plain.stages)
    for (d, t, i), (_, s) in sorted(chosen.items(), key=lambda item: item[0][1]):
        stage = stages[t]
        copies = {dev: dict(src) for dev, src in stage.copies.items()}
        copies.setdefault(g.devices[d].name, {})[g.nodes[i].id] = g.devices[s].name
        stages[t] = replace(stage, copies=copies)
    return replace(plain, stages=tuple(stages))


def _start_values(model: OffloadModel, schedule: Schedule, best: Incumbents) -> np.ndarray | None:
    """A MIP start from a schedule without copies: the solved model's encoding, ``H = S``."""
    if any(stage.copies for stage in schedule.stages) or best.timeline is None:
        return None
    x = values_from_schedule(model, schedule, best.timeline)
    if x is not None:
        for (d, t, i), h in model.H.items():
            if (d, t + 1, i) in model.S:
                x[h] = x[model.S[d, t + 1, i]]
    return x


class _OffloadIncumbents(Incumbents):
    """Incumbents that read the backend's values with the offloading copies."""

    def offer_values(self, model, values, claimed=None) -> bool:
        info = SolverInfo(self.method, self.backend, SolveStatus.FEASIBLE, objective=claimed)
        schedule = schedule_from_offload_values(model, values, info)
        timeline = simulate(self.graph, schedule)
        if not timeline.valid:
            self.rejected.append(f"the solver's schedule does not replay: {timeline.violation}")
            return False
        if claimed is not None and timeline.total_ms > claimed + 1e-6 * max(1.0, claimed):
            self.rejected.append(
                f"the replay costs {timeline.total_ms:.6g} ms but the solver claimed "
                f"{claimed:.6g} ms"
            )
            return False
        return self.offer(schedule, timeline, self.backend)


def solve_offload(
    graph: Graph,
    options: SolveOptions,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    start: tuple[Schedule, Timeline] | None = None,
) -> SolveResult:
    """Solve XEngine's MIQP with offloading copies allowed (``SolveOptions.offload``).

    ``start``, a valid schedule and its replay (e.g. the paper's model's result), is offered
    as an incumbent beside the heuristic one: every schedule of the paper's model is one of
    this model (no copies), so the result is never dearer than it.

    Like :func:`solver.optimize.solve.solve_xengine`: the heuristic start is the first incumbent,
    every schedule is replayed, and "optimal" is claimed only for an exact model whose
    optimum replays at the proven cost. Memory rows rounded to units (very large budgets)
    make the result "feasible" at best, with the safe rounding (no neighbourhood search and
    no confirmation in bytes here, unlike the default model).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.optimize.solve import SolveOptions
    >>> result = solve_offload(unit_chain(4, budget=4), SolveOptions(time_limit_s=20))
    >>> result.status.value, result.timeline.total_ms
    ('optimal', 11.0)
    """
    from solver.optimize.solve import _best_baseline

    reason = explain_infeasible(graph)
    if reason:
        return SolveResult(OFFLOAD_METHOD, SolveStatus.INFEASIBLE, message=reason)
    started = time.monotonic()
    deadline = started + options.time_limit_s
    backend = options.backend.upper() if options.backend == "cbc" else "HiGHS"
    best = _OffloadIncumbents(graph, OFFLOAD_METHOD, backend, on_progress)
    if options.warm_start:
        heuristic = _best_baseline(graph)
        if heuristic is not None:
            best.offer(*heuristic, source="a heuristic")
    if start is not None:
        best.offer(*start, source=start[0].solver.method if start[0].solver else "the start")
    base = SolveResult(method=OFFLOAD_METHOD, status=SolveStatus.ERROR, backend=backend)
    rounding = "relaxed" if memory_units(graph).all_exact else "safe"
    try:
        model = build_offload_model(graph, rounding=rounding, deadline=deadline, cancel=cancel)
    except BuildInterrupted as exc:
        status = SolveStatus.CANCELLED if exc.reason == "cancel" else SolveStatus.TIME_LIMIT
        return best.result(replace(base, status=status), f"stopped while building ({exc.reason})")
    except ModelTooLarge as exc:
        return best.result(base, str(exc))
    base = replace(
        base,
        build_seconds=time.monotonic() - started,
        variables=model.num_variables,
        constraints=model.num_constraints,
    )
    remaining = deadline - time.monotonic()
    if remaining <= 0.05 or (cancel is not None and cancel.is_set()):
        stopped = SolveStatus.CANCELLED if cancel is not None and cancel.is_set() else None
        return best.result(replace(base, status=stopped or SolveStatus.TIME_LIMIT), "stopped")
    mip_start = options.mip_start if options.mip_start is not None else options.backend == "highs"
    start_values = (
        _start_values(model, best.schedule, best) if mip_start and best.schedule else None
    )
    best.floor = max(best.floor or 0.0, cheapest_once(model))
    outcome = run_backend(
        model.program,
        BackendOptions(
            backend=options.backend,
            time_limit_s=remaining,
            gap_rel=options.gap_rel,
            threads=options.threads,
        ),
        best.merged_progress(on_progress),
        cancel,
        start=start_values,
        on_solution=lambda values: best.offer_values(model, values),
    )
    if outcome.values is not None:
        best.offer_values(model, outcome.values, claimed=outcome.objective)
    if rounding == "safe":  # the safe model's optimum and bound do not hold in bytes
        proven = SolveStatus.FEASIBLE if outcome.status is SolveStatus.OPTIMAL else None
        outcome = replace(
            outcome,
            status=proven or outcome.status,
            bound=None,
            message="memory rows rounded up (safe): no bound valid in bytes",
        )
    base = replace(
        base,
        status=outcome.status,
        bound=outcome.bound,
        seconds=time.monotonic() - started,
        message=outcome.message,
        log_tail=outcome.log_tail,
    )
    return best.conclude(base, outcome, cutoff_used=False)
