"""XEngine's MIQP (docs/model.md §3), linearized for CBC and built with PuLP.

:func:`build_model` is the table of contents: one function per constraint family, each quoting
its rows of the spec. Variable families keep the spec's letters as dicts keyed by index tuples;
a variable that the spec fixes to 0 (beyond the frontier, or a device that cannot run a node) is
simply absent, and :meth:`Model.var` returns 0 for it. LP names are built from integers only.

``build_model(graph, offload=True)`` adds offloading (model.md §7) as docs/spec-notes.md,
"Offloading", states it, written from that text and not from the solved offloading model
(:mod:`solver.optimize.offload`), which a property test checks against it:
``O[s->d,t,i]`` (a copy at the end of stage ``t``) and ``H[d,t,i]`` (held during the copies).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from math import gcd

import numpy as np
import pulp

from solver.document.graph import Graph
from solver.execution.simulate import offload_ms

__all__ = ["ScaledMemory", "Model", "scale_memory", "build_model"]

MAX_MEMORY_UNITS = 10**6


@dataclass(frozen=True)
class ScaledMemory:
    """Tensor sizes and budgets in solver units, one unit per device (see :func:`scale_memory`).

    ``sizes[d, i]``, ``workspace[d, i]`` and ``budgets[d]`` are in units of ``units[d]`` bytes.
    """

    units: np.ndarray
    sizes: np.ndarray
    budgets: np.ndarray
    workspace: np.ndarray | None = None


def scale_memory(graph: Graph) -> ScaledMemory:
    """Express sizes and budgets in small integers without loosening any memory constraint.

    Memory rows are per device, so each device gets its own unit: a large host budget does not
    coarsen the GPU's rows. A budget above what any schedule could use (every tensor plus a
    copy of each) is capped first; then the device's sizes and budget are divided by their
    greatest common divisor (exact). Only if the budget still exceeds ``MAX_MEMORY_UNITS`` are
    sizes rounded up and the budget down, so that a schedule feasible in solver units is
    feasible in bytes (model.md §3).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> s = scale_memory(unit_chain(2, budget=4))
    >>> s.units.tolist(), s.sizes.tolist(), s.budgets.tolist()
    ([1.0], [[1, 1, 1, 1, 1]], [4])
    """
    sizes = [int(m) for m in graph.output_bytes]
    work = [int(w) for w in graph.workspace]
    n = len(sizes)
    cap = max(2 * sum(sizes) + max(work, default=0), 1)
    rows = [_scale_device(sizes + work, min(int(b), cap)) for b in graph.activation_budgets]
    return ScaledMemory(
        np.array([r[0] for r in rows], dtype=float),
        np.array([r[1][:n] for r in rows], dtype=np.int64).reshape(len(rows), n),
        np.array([r[2] for r in rows], dtype=np.int64),
        np.array([r[1][n:] for r in rows], dtype=np.int64).reshape(len(rows), n),
    )


def _scale_device(sizes: list[int], budget: int) -> tuple[float, list[int], int]:
    """One device's unit, its ``sizes`` (tensor sizes, then workspaces) and budget in it."""
    divisor = 0
    for value in [*sizes, budget]:
        divisor = gcd(divisor, value)
    divisor = max(divisor, 1)
    if budget / divisor <= MAX_MEMORY_UNITS:
        return float(divisor), [m // divisor for m in sizes], budget // divisor
    unit = budget / MAX_MEMORY_UNITS
    return unit, [math.ceil(m / unit) for m in sizes], math.floor(budget / unit)


@dataclass
class Model:
    """The PuLP problem with its variable families, as in model.md §3.

    Keys: ``R[d, t, i]``, ``S[d, t, i]``, ``Z[d, t, i]``, ``F[d, t, e]``,
    ``X[d_src, d_dst, t, e]`` with ``e`` the edge number of ``graph.edge_pairs``; with
    offloading also ``O[d_src, d_dst, t, i]`` and ``H[d, t, i]``.
    """

    graph: Graph
    memory: ScaledMemory
    prob: pulp.LpProblem
    R: dict = field(default_factory=dict)
    S: dict = field(default_factory=dict)
    Z: dict = field(default_factory=dict)
    F: dict = field(default_factory=dict)
    X: dict = field(default_factory=dict)
    O: dict = field(default_factory=dict)  # the family's letter
    H: dict = field(default_factory=dict)

    def var(self, family: dict, key: tuple) -> pulp.LpVariable | int:
        """The variable at ``key``, or 0 where the spec fixes it to zero."""
        return family.get(key, 0)

    @property
    def num_variables(self) -> int:
        families = (self.R, self.S, self.Z, self.F, self.X, self.O, self.H)
        return sum(len(family) for family in families)

    @property
    def num_constraints(self) -> int:
        return len(self.prob.constraints)

    def can_run(self, d: int, i: int) -> bool:
        return not math.isnan(self.graph.cost[d, i])

    def can_copy(self, e: int, src: int, dst: int) -> bool:
        return src != dst and math.isfinite(self.graph.transfer[e, src, dst])


def build_model(graph: Graph, offload: bool = False) -> Model:
    """Build XEngine's linearized MIQP for ``graph`` under its devices' budgets; with
    ``offload``, tensors may also be copied to another device and kept there (model.md §7).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> m = build_model(unit_chain(2, budget=3))
    >>> m.num_variables > 0 and m.prob.sense == pulp.LpMinimize
    True
    """
    model = Model(graph, scale_memory(graph), pulp.LpProblem("xengine", pulp.LpMinimize))
    add_variables(model)
    if offload:
        add_offload_variables(model)
    add_frontier_constraints(model)
    add_checkpoint_constraints(model)
    add_availability_constraints(model)
    add_input_constraints(model)
    add_freeing_constraints(model)
    add_memory_constraints(model)
    add_once_constraints(model)
    if offload:
        add_offload_constraints(model)
    set_objective(model)
    return model


def add_variables(model: Model) -> None:
    """Binary ``R, S, Z, F`` and continuous ``X`` in [0, 1], only where the spec lets them vary:
    ``i <= t`` (``i < t`` for ``S``, ``t >= 1``), devices that can run ``i``, edges whose
    consumer has reached the frontier, and device pairs joined by a link or an override."""
    g, prob = model.graph, model.prob
    binary = pulp.LpBinary
    for d in range(g.num_devices):
        for t in range(g.n):
            for i in range(t + 1):
                if model.can_run(d, i):
                    model.R[d, t, i] = prob.add_variable(f"R_{d}_{t}_{i}", 0, 1, binary)
                if i < t:
                    model.S[d, t, i] = prob.add_variable(f"S_{d}_{t}_{i}", 0, 1, binary)
                model.Z[d, t, i] = prob.add_variable(f"Z_{d}_{t}_{i}", 0, 1, binary)
            for e, (_, k) in enumerate(g.edge_pairs):
                if k <= t:
                    model.F[d, t, e] = prob.add_variable(f"F_{d}_{t}_{e}", 0, 1, binary)
    for t in range(g.n):
        for e, (_, k) in enumerate(g.edge_pairs):
            if k > t:
                continue
            for src in range(g.num_devices):
                for dst in range(g.num_devices):
                    if model.can_copy(e, src, dst) and (dst, t, k) in model.R:
                        name = f"X_{src}_{dst}_{t}_{e}"
                        model.X[src, dst, t, e] = prob.add_variable(name, 0, 1, pulp.LpContinuous)


def add_frontier_constraints(model: Model) -> None:
    """``sum_d R[d,t,t] = 1`` (``R[d,t,i] = 0`` for ``i > t`` and ``S[d,t,i] = 0`` for
    ``i >= t`` hold by construction: those variables do not exist)."""
    g = model.graph
    for t in range(g.n):
        terms = [model.R[d, t, t] for d in range(g.num_devices) if (d, t, t) in model.R]
        model.prob += pulp.lpSum(terms) == 1, f"frontier_{t}"


def add_checkpoint_constraints(model: Model) -> None:
    """``S[d,t+1,i] <= S[d,t,i] + R[d,t,i]``: keep only what was resident or computed;
    with offloading ``+ sum_s O[s->d,t,i]``: or copied there at the end of the stage."""
    g = model.graph
    for (d, t, i), keep in model.S.items():
        before = model.var(model.S, (d, t - 1, i)) + model.var(model.R, (d, t - 1, i))
        copies = [
            model.O[s, d, t - 1, i] for s in range(g.num_devices) if (s, d, t - 1, i) in model.O
        ]
        model.prob += keep <= before + pulp.lpSum(copies), f"checkpoint_{d}_{t}_{i}"


def add_availability_constraints(model: Model) -> None:
    """``Z >= R``, ``Z >= S``, ``Z <= R + S``: available means computed or resident."""
    for (d, t, i), z in model.Z.items():
        r, s = model.var(model.R, (d, t, i)), model.var(model.S, (d, t, i))
        model.prob += z >= r, f"avail_r_{d}_{t}_{i}"
        model.prob += z >= s, f"avail_s_{d}_{t}_{i}"
        model.prob += z <= r + s, f"avail_or_{d}_{t}_{i}"


def add_input_constraints(model: Model) -> None:
    """``R[d,t,k] <= Z[d,t,i] + sum_{d'} X[d'->d,t,(i,k)]``; ``X[d'->d] <= Z[d',t,i]``;
    ``X[d'->d] <= R[d,t,k]``; ``X[d'->d] <= 1 - Z[d,t,i]``."""
    g, prob = model.graph, model.prob
    for (d, t, k), r in model.R.items():
        for i in g.inputs[k]:
            e = g.edge_number[i, k]
            copies = [model.X[s, d, t, e] for s in range(g.num_devices) if (s, d, t, e) in model.X]
            prob += r <= model.Z[d, t, i] + pulp.lpSum(copies), f"input_{d}_{t}_{e}"
    for (src, dst, t, e), x in model.X.items():
        i, k = g.edge_pairs[e]
        prob += x <= model.Z[src, t, i], f"copy_src_{src}_{dst}_{t}_{e}"
        prob += x <= model.R[dst, t, k], f"copy_use_{src}_{dst}_{t}_{e}"
        prob += x <= 1 - model.Z[dst, t, i], f"copy_needed_{src}_{dst}_{t}_{e}"


def add_freeing_constraints(model: Model) -> None:
    """``F[d,t,(i,k)] <= Z[d,t,i]``; ``<= R[d,t,k] + sum_{d'} X[d->d',t,(i,k)]``;
    ``<= 1 - S[d,t+1,i]``; and for each later user ``j > k`` of ``i``:
    ``<= 1 - R[d,t,j]`` and ``<= 1 - X[d->d',t,(i,j)]``."""
    g, prob = model.graph, model.prob
    for (d, t, e), f in model.F.items():
        i, k = g.edge_pairs[e]
        prob += f <= model.Z[d, t, i], f"free_avail_{d}_{t}_{e}"
        sends = [model.X[d, s, t, e] for s in range(g.num_devices) if (d, s, t, e) in model.X]
        prob += f <= model.var(model.R, (d, t, k)) + pulp.lpSum(sends), f"free_use_{d}_{t}_{e}"
        if (d, t + 1, i) in model.S:
            prob += f <= 1 - model.S[d, t + 1, i], f"free_kept_{d}_{t}_{e}"
        for j in g.users[i]:
            if not k < j <= t:
                continue
            later = g.edge_number[i, j]
            if (d, t, j) in model.R:
                prob += f <= 1 - model.R[d, t, j], f"free_later_{d}_{t}_{e}_{j}"
            for s in range(g.num_devices):
                if (d, s, t, later) in model.X:
                    prob += f <= 1 - model.X[d, s, t, later], f"free_sent_{d}_{t}_{e}_{s}_{j}"


def add_memory_constraints(model: Model) -> None:
    """``P[d,t,k] + sum_{(i,k)} sum_{d'} M_i X[d'->d,t,(i,k)] + W_k R[d,t,k] <= B_d`` with
    ``P[d,t,k] = sum_i M_i S[d,t,i] + sum_{j<=k} M_j R[d,t,j]
    - sum_{j<k} sum_{(i,j)} M_i F[d,t,(i,j)]``
    (memory counted per device, never pooled; the workspace ``W_k`` of docs/spec-notes.md
    only in the row of ``k``, and only where it is not 0)."""
    g, prob = model.graph, model.prob
    sizes, budget = model.memory.sizes, model.memory.budgets
    work = model.memory.workspace
    incoming: dict[int, list[int]] = {k: [] for k in range(g.n)}
    for e, (_, k) in enumerate(g.edge_pairs):
        incoming[k].append(e)
    for d in range(g.num_devices):
        for t in range(g.n):
            size = sizes[d]
            running = [int(size[i]) * model.S[d, t, i] for i in range(t) if (d, t, i) in model.S]
            for k in range(t + 1):
                if (d, t, k) in model.R:
                    running.append(int(size[k]) * model.R[d, t, k])
                copies = [
                    int(size[g.edge_pairs[e][0]]) * model.X[s, d, t, e]
                    for e in incoming[k]
                    for s in range(g.num_devices)
                    if (s, d, t, e) in model.X
                ]
                if work is not None and (d, t, k) in model.R and work[d, k] > 0:
                    copies.append(int(work[d, k]) * model.R[d, t, k])
                if (d, t, k) in model.R:
                    prob += pulp.lpSum(running + copies) <= int(budget[d]), f"memory_{d}_{t}_{k}"
                running.extend(
                    -int(size[g.edge_pairs[e][0]]) * model.F[d, t, e] for e in incoming[k]
                )


def add_once_constraints(model: Model) -> None:
    """``R[d,t,i] = 0`` for ``t > i`` where node ``i`` is computed once
    (``Node.recomputable`` False; docs/spec-notes.md, "Nodes computed once")."""
    g = model.graph
    for i in g.once:
        for (d, t, j), r in model.R.items():
            if j == i and t > i:
                model.prob += r == 0, f"once_{d}_{t}_{i}"


def add_offload_variables(model: Model) -> None:
    """Binary ``O[s->d,t,i]`` for ``i <= t < n-1``, ``s != d`` joined by a link (a copy
    serves no edge: the link model prices it), and binary ``H[d,t,i]`` for ``t < n-1``."""
    g, prob = model.graph, model.prob
    names = [device.name for device in g.devices]
    for t in range(g.n - 1):
        for i in range(t + 1):
            for src in range(g.num_devices):
                for dst in range(g.num_devices):
                    if src != dst and math.isfinite(offload_ms(g, i, names[src], names[dst])):
                        name = f"O_{src}_{dst}_{t}_{i}"
                        model.O[src, dst, t, i] = prob.add_variable(name, 0, 1, pulp.LpBinary)
            for d in range(g.num_devices):
                model.H[d, t, i] = prob.add_variable(f"H_{d}_{t}_{i}", 0, 1, pulp.LpBinary)


def add_offload_constraints(model: Model) -> None:
    """A copy needs its tensor on the source at the end of the stage and not on the target:
    ``O[s->d,t,i] <= Z[s,t,i]``, ``O <= 1 - Z[d,t,i]``; it lands in a kept tensor:
    ``O <= S[d,t+1,i]``; the source holds it until the copy: ``F[s,t,(i,k)] + sum_d
    O[s->d,t,i] <= 1``. During the copies a device holds what it keeps or sends:
    ``H[d,t,i] >= S[d,t+1,i]``, ``H[d,t,i] >= O[d->d',t,i]``, ``sum_i M_i H[d,t,i] <= B_d``."""
    g, prob = model.graph, model.prob
    for (s, d, t, i), o in model.O.items():
        prob += o <= model.Z[s, t, i], f"offload_src_{s}_{d}_{t}_{i}"
        prob += o <= 1 - model.Z[d, t, i], f"offload_needed_{s}_{d}_{t}_{i}"
        prob += o <= model.S[d, t + 1, i], f"offload_kept_{s}_{d}_{t}_{i}"
        prob += model.H[s, t, i] >= o, f"offload_held_{s}_{d}_{t}_{i}"
    for (d, t, e), f in model.F.items():
        i = g.edge_pairs[e][0]
        sends = [model.O[d, x, t, i] for x in range(g.num_devices) if (d, x, t, i) in model.O]
        if sends:
            model.prob += f + pulp.lpSum(sends) <= 1, f"offload_hold_{d}_{t}_{e}"
    sizes, budget = model.memory.sizes, model.memory.budgets
    for d in range(g.num_devices):
        for t in range(g.n - 1):
            for i in range(t + 1):
                prob += model.H[d, t, i] >= model.S[d, t + 1, i], f"held_kept_{d}_{t}_{i}"
            held = [int(sizes[d, i]) * model.H[d, t, i] for i in range(t + 1)]
            prob += pulp.lpSum(held) <= int(budget[d]), f"memory_copies_{d}_{t}"


def set_objective(model: Model) -> None:
    """``min sum C[d][i] R[d,t,i] + sum CC[e][d'->d] X[d'->d,t,e]`` (ms), plus with
    offloading ``sum CC_link(s->d, M_i) O[s->d,t,i]``."""
    g = model.graph
    names = [device.name for device in g.devices]
    compute = [float(g.cost[d, i]) * r for (d, t, i), r in model.R.items()]
    copies = [float(g.transfer[e, s, d]) * x for (s, d, t, e), x in model.X.items()]
    offloads = [offload_ms(g, i, names[s], names[d]) * o for (s, d, t, i), o in model.O.items()]
    model.prob += pulp.lpSum(compute + copies + offloads)
