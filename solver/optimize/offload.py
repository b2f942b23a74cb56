"""Offloading in the MIQP: XEngine's model plus copies kept on another device (model.md §7).

Off by default: :func:`solver.optimize.solve.solve_xengine` runs the paper's model
(:mod:`solver.optimize.miqp`) unless ``SolveOptions.offload`` is set, and this module never
changes that model. This is the formulation :data:`solver.optimize.formulation.OFFLOADING`;
the solve that runs it (the paper's model first, then this one) is
:func:`solver.optimize.solve.solve_offload`. With the option, a tensor available on device
``s`` in stage ``t`` may be copied over the link ``s -> d`` at the end of the stage and kept
on ``d`` as a checkpoint; later operations read it from ``d`` (locally, or copied back per
use) or it is copied back and kept again. docs/spec-notes.md, "Offloading", states the
semantics the simulator replays; the rows below are that text, in the letters of model.md
§3 plus

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

import math
import threading
from dataclasses import dataclass, field, replace

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Schedule, SolverInfo, Stage
from solver.execution.simulate import Timeline, offload_ms
from solver.optimize.miqp import (
    BYTES_PER_NONZERO,
    INF,
    ArrayModel,
    ModelBuilder,
    ModelTooLarge,
    add_freeing_constraints,
    add_frontier_constraints,
    add_input_constraints,
    add_memory_constraints,
    add_once_constraints,
    add_saved_constraints,
    affordable,
    capped_cost,
    default_max_build_bytes,
    estimate_size,
    fits_on,
    memory_units,
)
from solver.optimize.miqp_schedule import encode_stages, schedule_from_values

__all__ = [
    "OffloadModel",
    "build_offload_model",
    "offload_roles",
    "schedule_from_offload_values",
    "values_from_offload_schedule",
    "OFFLOAD_METHOD",
]

OFFLOAD_METHOD = "xengine+offload"
"""The method name an offloading solve reports (its schedules' ``solver.method``)."""


@dataclass
class OffloadModel(ArrayModel):
    """The solved model with offloading: ``O[s, d, t, i]`` and ``H[d, t, i]`` columns besides
    the families of :class:`~solver.optimize.miqp.ArrayModel` (see the module docstring)."""

    O: dict = field(default_factory=dict)  # the family's letter
    H: dict = field(default_factory=dict)


def build_offload_model(
    graph: Graph,
    *,
    rounding: str = "relaxed",
    deadline: float | None = None,
    cancel: threading.Event | None = None,
    max_build_bytes: int | None = None,
    upper_bound: float | None = None,
) -> OffloadModel:
    """Build XEngine's solved model extended with offloading copies (module docstring).

    Parameters are those of :func:`solver.optimize.miqp.build_array_model`; ``upper_bound``
    (a known schedule's cost) leaves out runs, transfers and copies that alone cost more.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> model = build_offload_model(unit_chain(2, budget=3))
    >>> len(model.O)  # one device: nowhere to offload to
    0
    """
    limit = default_max_build_bytes() if max_build_bytes is None else max_build_bytes
    cols, nonzeros = estimate_size(graph)
    pairs = graph.num_devices * max(graph.num_devices - 1, 0)
    nonzeros += pairs * graph.n * graph.n * 4  # O and H columns and their rows, about
    if nonzeros * BYTES_PER_NONZERO > limit:
        raise ModelTooLarge(
            f"the offloading model of '{graph.name}' ({graph.n} nodes) would have about "
            f"{nonzeros:,} coefficients; coarsen the graph or solve without offloading"
        )
    model = OffloadModel(graph, memory_units(graph, rounding), None)  # type: ignore[arg-type]
    model.upper_bound = upper_bound
    b = ModelBuilder(deadline, cancel)
    _add_variables(model, b)
    add_frontier_constraints(model, b)
    _add_exclusive_constraints(model, b)
    _add_checkpoint_constraints(model, b)
    add_input_constraints(model, b)
    add_freeing_constraints(model, b)
    add_memory_constraints(model, b)
    add_saved_constraints(model, b)
    add_once_constraints(model, b)
    _add_offload_constraints(model, b)
    model.program = b.program()
    from solver.optimize.formulation import OFFLOADING  # the formulation imports this module

    model.formulation = OFFLOADING
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
            [
                fits_on(model, d, i) or (reachable and int(g.output_bytes[i]) <= budget)
                for i in range(g.n)
            ]
        )
    return holds


def _add_variables(model: OffloadModel, b: ModelBuilder) -> None:
    """The solved model's columns with ``S``, ``F`` and copy sources wherever a tensor may be
    held, then ``O`` per usable link and ``H`` per possible sender."""
    g = model.graph
    num_d = g.num_devices
    runs = [[fits_on(model, d, i) for i in range(g.n)] for d in range(num_d)]
    holds = _holds(model)
    for d in range(num_d):
        for t in range(g.n):
            for i in range(t + 1):
                if runs[d][i]:
                    model.R[d, t, i] = b.column(capped_cost(model, float(g.cost[d, i])))
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
                    if math.isfinite(cost) and affordable(model, cost):
                        model.X[src, dst, t, e] = b.column(
                            capped_cost(model, cost), 1.0, integer=False
                        )
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
                    if math.isfinite(ms) and affordable(model, ms):
                        model.O[src, dst, t, i] = b.column(capped_cost(model, ms))
                        if model.memory.binds(src) and (src, t, i) not in model.H:
                            model.H[src, t, i] = b.column(integer=False)


def _add_exclusive_constraints(model: OffloadModel, b: ModelBuilder) -> None:
    """``R[d,t,i] + S[d,t,i] <= 1`` where both exist."""
    for key, s in model.S.items():
        if key in model.R:
            b.row([model.R[key], s], [1.0, 1.0], -INF, 1.0)


def _add_checkpoint_constraints(model: OffloadModel, b: ModelBuilder) -> None:
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


def _add_offload_constraints(model: OffloadModel, b: ModelBuilder) -> None:
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


def values_from_offload_schedule(
    model: OffloadModel, schedule: Schedule, timeline: Timeline
) -> np.ndarray | None:
    """Column values encoding a valid schedule, offloading copies included, or ``None`` if the
    model cannot express it (an operation or copy the model leaves out, or a resident tensor
    recomputed: see :func:`~solver.optimize.miqp_schedule.without_resident_recomputes`).

    The offloading counterpart of :func:`~solver.optimize.miqp_schedule.values_from_schedule`:
    ``R``, ``X``, ``S`` (copies are kept on their target), ``F`` from the replay's frees,
    ``O`` per copy, ``H`` where a tensor is kept into the next stage or sent, and ``U`` by
    its recurrence. Used for MIP starts and to fix the incumbent in the neighbourhood search.
    """
    dev, index = model.graph.device_index, model.graph.index

    def copies(x: np.ndarray, t: int, stage: Stage) -> None:
        for node, source, target in stage.offload_copies():
            i = index[node]
            x[model.O[dev[source], dev[target], t, i]] = 1.0
            if (dev[source], t, i) in model.H:
                x[model.H[dev[source], t, i]] = 1.0

    x = encode_stages(model, schedule, timeline, copies)
    if x is None:
        return None
    for (d, t, i), h in model.H.items():
        if (d, t + 1, i) in model.S:
            x[h] = max(x[h], x[model.S[d, t + 1, i]])
    _fill_memory(model, x)
    return x


def _fill_memory(model: OffloadModel, x: np.ndarray) -> None:
    """Each ``U`` by its recurrence (``U[d,t,k]`` follows ``U[d,t,k']`` in the same stage)."""
    g = model.graph
    size = model.memory.sizes
    incoming: list[list[int]] = [[] for _ in range(g.n)]
    for e, (_, k) in enumerate(g.edge_pairs):
        incoming[k].append(e)
    for d in range(g.num_devices):
        if not model.memory.binds(d):
            continue
        for t in range(g.n):
            held = sum(
                float(size[d, i]) * x[model.S[d, t, i]] for i in range(t) if (d, t, i) in model.S
            )
            for k in range(t + 1):
                if (d, t, k) in model.U:
                    held += float(size[d, k]) * x[model.R[d, t, k]]
                    x[model.U[d, t, k]] = max(0.0, held)
                for e in incoming[k]:
                    if (d, t, e) in model.F:
                        held -= float(size[d, g.edge_pairs[e][0]]) * x[model.F[d, t, e]]


def offload_roles(model: ArrayModel):
    """The paper's column roles plus the copies ``O`` (stage, tensor) and the holds ``H``
    (memory state, always left free by a neighbourhood)."""
    from solver.optimize.formulation import column_roles

    assert isinstance(model, OffloadModel)
    return column_roles(model, {"stage-node": model.O, "state": model.H})
