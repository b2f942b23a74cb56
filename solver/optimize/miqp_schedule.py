"""Between schedules and the solved model's column values (solver.optimize.miqp), both ways.

:func:`schedule_from_values` reads a backend's answer as a :class:`Schedule`;
:func:`values_from_schedule` encodes a valid schedule as column values, for a MIP start or to
fix part of an incumbent in a neighbourhood search. The solved model never recomputes a
resident tensor, so :func:`without_resident_recomputes` first drops such (wasteful) operations
from a schedule; that only lowers its cost and memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.execution.simulate import Timeline, simulate
from solver.optimize.miqp import ArrayModel

__all__ = [
    "schedule_from_values",
    "values_from_schedule",
    "encode_stages",
    "without_resident_recomputes",
]


def schedule_from_values(model: ArrayModel, values: np.ndarray, info: SolverInfo) -> Schedule:
    """The schedule the values encode. An input is read locally when available there,
    otherwise from the cheapest device whose transfer variable is set."""
    g = model.graph

    def on(family: dict, key: tuple) -> bool:
        return key in family and values[family[key]] > 0.5

    stages = []
    for t in range(g.n):
        ops = []
        for k in range(t + 1):
            for d, device in enumerate(g.devices):
                if on(model.R, (d, t, k)):
                    ops.append(
                        Operation(g.nodes[k].id, device.name, _sources(model, values, d, t, k))
                    )
        keep = {
            device.name: frozenset(
                g.nodes[i].id for i in range(t + 1) if on(model.S, (d, t + 1, i))
            )
            for d, device in enumerate(g.devices)
        }
        stages.append(Stage(tuple(ops), keep))
    return Schedule(g.name, g.memory_limits, tuple(stages), info)


def _sources(model: ArrayModel, values: np.ndarray, d: int, t: int, k: int) -> dict[str, str]:
    g = model.graph
    sources = {}
    for i in g.inputs[k]:
        local = sum(values[f[d, t, i]] for f in (model.R, model.S) if (d, t, i) in f)
        if local > 0.5:
            continue
        e = g.edge_number[i, k]
        options = [
            (float(g.transfer[e, s, d]), s)
            for s in range(g.num_devices)
            if (s, d, t, e) in model.X and values[model.X[s, d, t, e]] > 1e-6
        ]
        if options:
            sources[g.nodes[i].id] = g.devices[min(options)[1]].name
    return sources


def values_from_schedule(
    model: ArrayModel, schedule: Schedule, timeline: Timeline
) -> np.ndarray | None:
    """Column values encoding a valid schedule, or ``None`` if the model cannot express it
    (an operation on a device the model excludes, or a resident tensor recomputed)."""
    x = encode_stages(model, schedule, timeline)
    if x is not None:
        _fill_memory(model, x)
    return x


def encode_stages(
    model: ArrayModel,
    schedule: Schedule,
    timeline: Timeline,
    on_stage: Callable[[np.ndarray, int, Stage], None] | None = None,
) -> np.ndarray | None:
    """``R``, ``X``, ``S`` and ``F`` of a schedule (``U`` is left to the caller), or ``None``
    if the model cannot express it. ``on_stage(x, t, stage)`` sets the columns a model adds
    per stage (the offloading model's copies), inside the same check."""
    g = model.graph
    dev = g.device_index
    x = np.zeros(model.program.num_cols)
    try:
        for t, stage in enumerate(schedule.stages):
            for op in stage.ops:
                d, k = dev[op.device], g.index[op.node]
                x[model.R[d, t, k]] = 1.0
                for source_id, source in op.inputs.items():
                    if source != op.device:
                        e = g.edge_number[g.index[source_id], k]
                        x[model.X[dev[source], d, t, e]] = 1.0
            if t + 1 < g.n:
                for device, kept in stage.keep.items():
                    for node in kept:
                        x[model.S[dev[device], t + 1, g.index[node]]] = 1.0
            if on_stage is not None:
                on_stage(x, t, stage)
        for event in timeline.ops:
            k = g.index[event.node]
            for device, tensor in event.freed:
                edge = g.edge_number.get((g.index[tensor], k))
                if edge is not None:
                    x[model.F[dev[device], event.stage, edge]] = 1.0
    except (KeyError, IndexError):
        return None
    for key, column in model.S.items():  # kept and recomputed: not the model's (see above)
        if x[column] > 0.5 and key in model.R and x[model.R[key]] > 0.5:
            return None
    return x


def _fill_memory(model: ArrayModel, x: np.ndarray) -> None:
    """Set each ``U`` by its recurrence, so the encoded point satisfies the equality rows."""
    program = model.program
    u_cols = np.array(sorted(model.U.values()), dtype=np.int64)
    is_u = np.zeros(program.num_cols, dtype=bool)
    is_u[u_cols] = True
    # Each U appears with coefficient +1 in exactly one equality row, listed in build order,
    # so one pass over those rows in order evaluates the recurrence.
    eq_rows = np.flatnonzero(program.row_lower == program.row_upper)
    eq_set = np.zeros(program.num_rows, dtype=bool)
    eq_set[eq_rows] = True
    mask = eq_set[program.rows]
    rows, cols, vals = program.rows[mask], program.cols[mask], program.vals[mask]
    order = np.argsort(rows, kind="stable")
    rows, cols, vals = rows[order], cols[order], vals[order]
    bounds = np.searchsorted(rows, eq_rows)
    ends = np.append(bounds[1:], len(rows))
    for start, end in zip(bounds.tolist(), ends.tolist(), strict=True):
        rc, rv = cols[start:end], vals[start:end]
        own = [p for p in range(len(rc)) if is_u[rc[p]] and rv[p] == 1.0]
        if not own:
            continue
        target = rc[own[0]]
        rest = sum(float(rv[p]) * x[rc[p]] for p in range(len(rc)) if p != own[0])
        x[target] = max(0.0, -rest)


def without_resident_recomputes(
    graph: Graph, schedule: Schedule, timeline: Timeline
) -> tuple[Schedule, Timeline]:
    """Drop operations that recompute a tensor already resident on their device.

    The result replays validly, costs no more and holds no more memory; if dropping changes
    nothing (or, defensively, if the shorter schedule does not replay) the input comes back.
    """
    stages, changed = [], False
    for t, stage in enumerate(schedule.stages):
        resident = schedule.stages[t - 1].keep if t > 0 else {}
        ops = tuple(op for op in stage.ops if op.node not in resident.get(op.device, ()))
        changed |= len(ops) != len(stage.ops)
        stages.append(replace(stage, ops=ops))
    if not changed:
        return schedule, timeline
    shorter = replace(schedule, stages=tuple(stages))
    replay = simulate(graph, shorter)
    if replay.valid and replay.total_ms <= timeline.total_ms:
        return shorter, replay
    return schedule, timeline
