"""XEngine's MIQP (docs/model.md §3), linearized and built directly as arrays.

This is the model the solver runs. :mod:`solver.optimize.xengine` keeps the spec's formulation
line by line in PuLP as the reference; this one is equivalent on optima but smaller and
exact in bytes (docs/spec-notes.md, "The solved formulation"):

- **No recomputation of a resident tensor** (``R + S <= 1``): recomputing what is already on
  the device costs time and memory and never helps, so ``Z = R + S`` and the ``Z`` family with
  its three availability rows disappears.
- **``S`` only where the device can run the node**: without offloading, a tensor is resident
  only where it was computed.
- **Node fixing**: ``R[d,*,k] = 0`` where ``M_k`` plus ``k``'s inputs exceed ``B_d`` (the
  necessary condition of model.md §4: ``k`` cannot run there), and where one run of ``k`` on
  ``d`` alone costs more than a known schedule (``upper_bound``): no optimum contains it, and
  a cost such as 1e308 never reaches the backend, whose tolerances it would swamp.
- **Memory as the recurrence** ``U[d,t,k] = U[d,t,k-1] + M_k R[d,t,k] - frees after k-1``
  (model.md §3 states both forms): O(n^2) coefficients instead of O(n^3).
- **Workspaces** (docs/spec-notes.md, "Workspace memory"): node ``k``'s transient bytes
  ``W_k`` enter the budget row of ``(d, t, k)`` alone, as ``W_k R[d,t,k]``; the recurrence
  never carries them to ``k+1``. With every ``W = 0`` the model is the one without them.
- **Memory rows in whole units**: each device's sizes and budget are divided by a unit of
  their own, exact where they share a divisor that keeps the budget below 10^6 units; else
  rounded either way, as :func:`memory_units` explains, and :mod:`solver.optimize.solve` confirms or
  repairs the result against the bytes. The right-hand side has half a unit of room for
  the backend's tolerances, which whole-unit rows never need.

Building checks a deadline and a cancel Event every few thousand columns, and refuses a model
whose estimated size would not fit in memory before allocating it.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from math import gcd
from typing import Any

import numpy as np

from solver.document.graph import Graph
from solver.errors import XEngineError
from solver.optimize.backends._common import Cancel
from solver.optimize.backends.lp import LinearProgram
from solver.optimize.cuts import add_conflict_cuts

__all__ = [
    "MemoryUnits",
    "ArrayModel",
    "ModelTooLarge",
    "BuildInterrupted",
    "memory_units",
    "estimate_size",
    "build_array_model",
    "cheapest_once",
    "MAX_ROW_UNITS",
    "BUILD_SHARE_OF_HOST",
    "FALLBACK_BUILD_BYTES",
    "default_max_build_bytes",
    "COST_CEILING",
    "ModelBuilder",
    "fits_on",
    "affordable",
    "capped_cost",
    "add_saved_constraints",
    "add_once_constraints",
]

COST_CEILING = 1e12
"""Objective coefficients above this many ms (30 years) enter the model capped at it.

A cost like 1e308 swamps any solver's tolerances (CBC then called a feasible model
infeasible). Capping keeps every schedule's model cost at most its true cost, so the bound
stays valid; and a schedule that uses no capped run costs the same in both, so the model's
optimum is the true one whenever it replays at its model cost (:mod:`solver.optimize.solve`
says "optimal" only then)."""
MAX_ROW_UNITS = 10**6
"""Budgets above this many units are expressed in a fractional unit (exact, not rounded)."""
BYTES_PER_NONZERO = 200
"""Peak build memory per coefficient (lists of Python ints and floats, then numpy)."""
BUILD_SHARE_OF_HOST = 1 / 3
"""The share of the host's physical memory a model build may take by default: the backend
needs the rest for its own copy of the model and its search."""
FALLBACK_BUILD_BYTES = 8 * 2**30
"""The default build limit where the host's physical memory cannot be read."""


class ModelTooLarge(XEngineError):
    """The model would not fit in memory; the message gives its estimated size and what to do."""


class BuildInterrupted(XEngineError):
    """Building stopped at the deadline or on cancel; ``reason`` is "deadline" or "cancel"."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"model building stopped ({reason})")
        self.reason = reason


@dataclass(frozen=True)
class MemoryUnits:
    """Per device: the unit (bytes) of its memory rows, and sizes and budget in whole units.

    ``rhs[d]`` is the budget in units plus one half: with whole-unit sizes a row then admits
    exactly the schedules that fit, with room for the backend's tolerances. ``exact[d]`` says
    whether the unit divides every size and the budget; otherwise sizes and budget were
    rounded as ``rounding`` says (see :func:`memory_units`).
    """

    unit: np.ndarray
    sizes: np.ndarray
    rhs: np.ndarray
    budgets: np.ndarray
    exact: np.ndarray
    rounding: str = "relaxed"
    cap: int = 0
    workspace: np.ndarray | None = None
    """Workspace ``W_k`` per device and node in the device's units, rounded like ``sizes``
    (all zero when the graph has none)."""

    @property
    def all_exact(self) -> bool:
        return bool(np.all(self.exact))

    def binds(self, d: int) -> bool:
        """Whether device ``d``'s budget can bind at all (else it gets no memory rows)."""
        return int(self.budgets[d]) < self.cap


def unbounded_memory(graph: Graph) -> int:
    """Memory no schedule of the solved model can exceed on one device: every tensor resident
    once (``R + S <= 1``) plus the largest set of copied inputs and workspace of one
    operation."""
    sizes = [int(m) for m in graph.output_bytes]
    work = [int(w) for w in graph.workspace]
    inputs = max(
        (sum(sizes[i] for i in graph.inputs[k]) + work[k] for k in range(graph.n)), default=0
    )
    return sum(sizes) + inputs + 1


def memory_units(graph: Graph, rounding: str = "relaxed") -> MemoryUnits:
    """Each device's unit: the gcd of the sizes, or ``B_d / 10^6`` if that is finer.

    Every schedule's memory is a multiple of the gcd, so sizes in gcd units and the budget
    rounded down to whole units state exactly the same rows. Otherwise sizes and budget are
    rounded to whole units of ``B_d / 10^6`` (solvers tell 1-byte differences in a 27 GB
    budget apart no better than their ~1e-9 relative tolerances, and whole units keep the
    rows robust). ``rounding="relaxed"`` rounds sizes down and the budget up: every schedule
    that fits in bytes fits the model, so its bound is valid for the exact problem.
    ``rounding="safe"`` rounds sizes up and the budget down: every schedule that fits the
    model fits in bytes.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> m = memory_units(unit_chain(2, budget=4))
    >>> m.unit.tolist(), m.sizes.tolist(), m.rhs.tolist(), m.all_exact
    ([1.0], [[1.0, 1.0, 1.0, 1.0, 1.0]], [4.5], True)
    """
    if rounding not in ("relaxed", "safe"):
        raise ValueError(f"rounding must be 'relaxed' or 'safe'; got {rounding!r}")
    sizes = [int(m) for m in graph.output_bytes]
    work = [int(w) for w in graph.workspace]
    cap = unbounded_memory(graph)
    # Every memory sum is a multiple of the gcd of the sizes and workspaces, so a budget
    # rounded down to one is the same constraint: that gcd alone is an exact unit.
    divisor = 0
    for value in (*sizes, *work):
        divisor = gcd(divisor, value)
    divisor = max(divisor, 1)
    units, scaled, scaled_work, rhs, budgets, exact = [], [], [], [], [], []
    for raw in graph.activation_budgets:
        budget = min(int(raw), cap)  # at the cap, memory never binds: no rows at all
        if budget >= cap or budget // divisor <= MAX_ROW_UNITS:
            unit, limit = float(divisor), budget // divisor
            row, row_work = [m // divisor for m in sizes], [w // divisor for w in work]
        else:
            unit = budget / MAX_ROW_UNITS
            down = rounding == "relaxed"
            row = [_whole(m / unit, up=not down) for m in sizes]
            row_work = [_whole(w / unit, up=not down) for w in work]
            limit = _whole(budget / unit, up=down)
        units.append(unit)
        scaled.append(row)
        scaled_work.append(row_work)
        rhs.append(limit + 0.5)
        budgets.append(budget)
        exact.append(unit == float(divisor))
    n = len(sizes)
    return MemoryUnits(
        np.array(units),
        np.array(scaled, dtype=float).reshape(len(units), n),
        np.array(rhs),
        np.array(budgets, dtype=np.int64),
        np.array(exact, dtype=bool),
        rounding,
        cap,
        np.array(scaled_work, dtype=float).reshape(len(units), n),
    )


def _whole(value: float, up: bool) -> int:
    # A float quotient can land a hair off an exact integer; never round past it.
    nearest = round(value)
    if abs(value - nearest) < 1e-9 * max(1.0, value):
        return int(nearest)
    return math.ceil(value) if up else math.floor(value)


@dataclass
class ArrayModel:
    """The program and where each spec variable lives in it.

    ``R[d, t, i]``, ``S[d, t, i]``, ``F[d, t, e]``, ``X[src, dst, t, e]`` and ``U[d, t, k]``
    map to column numbers; a key that is absent is fixed to 0 by the spec or by the
    reductions above.
    """

    graph: Graph
    memory: MemoryUnits
    program: LinearProgram
    R: dict = field(default_factory=dict)
    S: dict = field(default_factory=dict)
    F: dict = field(default_factory=dict)
    X: dict = field(default_factory=dict)
    U: dict = field(default_factory=dict)
    upper_bound: float | None = None
    """The known schedule's cost the model was reduced with (see :func:`build_array_model`)."""
    capped: bool = False
    """Whether some objective coefficient was capped at :data:`COST_CEILING`."""
    formulation: Any = None
    """The :class:`~solver.optimize.formulation.Formulation` that built it (decode, encode)."""

    @property
    def num_variables(self) -> int:
        return self.program.num_cols

    @property
    def num_constraints(self) -> int:
        return self.program.num_rows


def estimate_size(graph: Graph) -> tuple[int, int]:
    """(columns, coefficients) of the model, counted from the graph without building it.

    An upper estimate: it assumes every device can run every node.
    """
    n, num_d = graph.n, graph.num_devices
    pairs = num_d * max(num_d - 1, 0)
    tri = n * (n + 1) // 2
    late = sum(n - k for _, k in graph.edge_pairs)  # (edge, stage) pairs with k <= t
    later_users = sum(
        n - j for i, k in graph.edge_pairs for j in graph.users[i] if j > k
    )  # (edge, stage, later user) triples
    cols = num_d * (3 * tri + late) + pairs * late
    per_device = 16 * tri + 8 * late + 2 * later_users
    per_pair = 12 * late + 2 * later_users
    return cols, num_d * per_device + pairs * per_pair


class ModelBuilder:
    """Columns and coordinate rows, with the deadline and cancel checks of a long build."""

    def __init__(self, deadline: float | None, cancel: Cancel | None) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integer: list[bool] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self._deadline, self._cancel = deadline, cancel

    def column(self, cost: float = 0.0, upper: float = 1.0, integer: bool = True) -> int:
        j = len(self.cost)
        if j % 4096 == 0:
            self.check()
        self.cost.append(cost)
        self.upper.append(upper)
        self.integer.append(integer)
        return j

    def row(self, cols: list[int], vals: list[float], lower: float, upper: float) -> None:
        r = len(self.row_lower)
        if r % 8192 == 0:
            self.check()
        self.rows.extend([r] * len(cols))
        self.cols.extend(cols)
        self.vals.extend(vals)
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    def check(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise BuildInterrupted("cancel")
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise BuildInterrupted("deadline")

    def program(self) -> LinearProgram:
        n = len(self.cost)
        return LinearProgram(
            cost=np.array(self.cost),
            col_lower=np.zeros(n),
            col_upper=np.array(self.upper),
            integer=np.array(self.integer, dtype=bool),
            rows=np.array(self.rows, dtype=np.int64),
            cols=np.array(self.cols, dtype=np.int64),
            vals=np.array(self.vals),
            row_lower=np.array(self.row_lower),
            row_upper=np.array(self.row_upper),
        )


INF = math.inf


def default_max_build_bytes() -> int:
    """Bytes a model build may take unless told: :data:`BUILD_SHARE_OF_HOST` of this host's RAM.

    Read when a build starts, so the same code suits a laptop and a large server; where the
    platform cannot say (no ``sysconf``), :data:`FALLBACK_BUILD_BYTES`.

    Examples
    --------
    >>> default_max_build_bytes() > 0
    True
    """
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return FALLBACK_BUILD_BYTES
    return int(total * BUILD_SHARE_OF_HOST) if total > 0 else FALLBACK_BUILD_BYTES


def build_array_model(
    graph: Graph,
    *,
    rounding: str = "relaxed",
    deadline: float | None = None,
    cancel: Cancel | None = None,
    max_build_bytes: int | None = None,
    upper_bound: float | None = None,
) -> ArrayModel:
    """Build the solved formulation of XEngine's MIQP for ``graph`` under its budgets.

    Parameters
    ----------
    graph : Graph
        The graph, with its devices' memory limits.
    rounding : str
        How memory is rounded where a device's sizes have no usable common divisor; see
        :func:`memory_units`. Irrelevant where they have one (the model is then exact).
    deadline : float, optional
        A ``time.monotonic()`` instant; building stops with :class:`BuildInterrupted` past it.
    cancel : threading.Event or any Cancel, optional
        Building stops with :class:`BuildInterrupted` once it is set.
    max_build_bytes : int, optional
        Host bytes the build may take (default :func:`default_max_build_bytes`); a larger estimate
        raises :class:`ModelTooLarge` before anything is allocated.
    upper_bound : float, optional
        The cost of a known valid schedule. Runs and copies that alone cost more are left
        out: no schedule using one can beat it, so the optimum is unchanged, while the
        known schedule itself stays in the model.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> model = build_array_model(unit_chain(2, budget=3))
    >>> model.num_variables > 0, len(model.R)
    (True, 15)
    """
    limit = default_max_build_bytes() if max_build_bytes is None else max_build_bytes
    cols, nonzeros = estimate_size(graph)
    needed = nonzeros * BYTES_PER_NONZERO
    if needed > limit:
        raise ModelTooLarge(
            f"the model of '{graph.name}' ({graph.n} nodes, {graph.num_devices} devices) would "
            f"have about {cols:,} variables and {nonzeros:,} coefficients and need about "
            f"{needed / 2**30:.1f} GiB to build (limit {limit / 2**30:.1f} GiB); "
            "coarsen the graph (layer level instead of op level) or use fewer devices"
        )
    model = ArrayModel(graph, memory_units(graph, rounding), LinearProgram.__new__(LinearProgram))
    model.upper_bound = upper_bound
    builder = ModelBuilder(deadline, cancel)
    add_variables(model, builder)
    add_frontier_constraints(model, builder)
    add_exclusive_constraints(model, builder)
    add_checkpoint_constraints(model, builder)
    add_input_constraints(model, builder)
    add_freeing_constraints(model, builder)
    add_memory_constraints(model, builder)
    add_saved_constraints(model, builder)
    add_once_constraints(model, builder)
    add_conflict_cuts(model, builder)  # valid inequalities only: solver/optimize/cuts.py
    model.program = builder.program()
    from solver.optimize.formulation import PAPER  # the formulation imports this module

    model.formulation = PAPER
    return model


def fits_on(model: ArrayModel, d: int, k: int) -> bool:
    """Whether node ``k`` can run on device ``d`` at all (cost defined, requirement fits)."""
    g = model.graph
    if math.isnan(g.cost[d, k]) or not affordable(model, float(g.cost[d, k])):
        return False
    need = (
        int(g.output_bytes[k])
        + sum(int(g.output_bytes[i]) for i in g.inputs[k])
        + int(g.workspace[k])
    )
    return need <= int(model.memory.budgets[d])


def affordable(model: ArrayModel, cost: float) -> bool:
    """Whether a run or copy of this cost can be in a schedule cheaper than the known one
    (``upper_bound``): dearer ones are left out of the model, which shrinks it."""
    bound = model.upper_bound
    return bound is None or not math.isfinite(bound) or cost <= bound


def capped_cost(model: ArrayModel, cost: float) -> float:
    """The objective coefficient of ``cost``: at most :data:`COST_CEILING` (and the model
    remembers that it capped, so it never calls an answer optimal on capped costs alone)."""
    if cost > COST_CEILING:
        model.capped = True
        return COST_CEILING
    return cost


def add_variables(model: ArrayModel, b: ModelBuilder) -> None:
    """Binary ``R`` (``i <= t``) and ``S`` (``i < t``) where ``d`` can run ``i``; binary ``F``
    per edge ``(i, k)`` with ``k <= t`` where ``d`` can hold ``i``; ``X`` in [0, 1] per link;
    continuous ``U >= 0`` per memory row. Costs are the objective
    ``sum C[d][i] R[d,t,i] + sum CC[e][d'->d] X[d'->d,t,e]``."""
    g = model.graph
    runs = [[fits_on(model, d, i) for i in range(g.n)] for d in range(g.num_devices)]
    for d in range(g.num_devices):
        for t in range(g.n):
            for i in range(t + 1):
                if runs[d][i]:
                    model.R[d, t, i] = b.column(capped_cost(model, float(g.cost[d, i])))
                    if i < t:
                        model.S[d, t, i] = b.column()
            for e, (i, k) in enumerate(g.edge_pairs):
                if k <= t and runs[d][i]:
                    model.F[d, t, e] = b.column()
    for t in range(g.n):
        for e, (i, k) in enumerate(g.edge_pairs):
            if k > t:
                continue
            for src in range(g.num_devices):
                for dst in range(g.num_devices):
                    if src == dst or not (runs[src][i] and runs[dst][k]):
                        continue
                    cost = float(g.transfer[e, src, dst])
                    if math.isfinite(cost) and affordable(model, cost):
                        model.X[src, dst, t, e] = b.column(
                            capped_cost(model, cost), 1.0, integer=False
                        )
    for d in range(g.num_devices):
        if not model.memory.binds(d):
            continue
        for t in range(g.n):
            for k in range(t + 1):
                if (d, t, k) in model.R:
                    model.U[d, t, k] = b.column(upper=INF, integer=False)


def add_frontier_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``sum_d R[d,t,t] = 1``."""
    g = model.graph
    for t in range(g.n):
        cols = [model.R[d, t, t] for d in range(g.num_devices) if (d, t, t) in model.R]
        b.row(cols, [1.0] * len(cols), 1.0, 1.0)


def add_exclusive_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``R[d,t,i] + S[d,t,i] <= 1``: never recompute a resident tensor."""
    for key, s in model.S.items():
        b.row([model.R[key], s], [1.0, 1.0], -INF, 1.0)


def add_checkpoint_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``S[d,t+1,i] <= S[d,t,i] + R[d,t,i]``: keep only what was resident or computed."""
    for (d, t, i), keep in model.S.items():
        cols, vals = [keep], [1.0]
        for family in (model.S, model.R):
            if (d, t - 1, i) in family:
                cols.append(family[d, t - 1, i])
                vals.append(-1.0)
        b.row(cols, vals, -INF, 0.0)


def _available(model: ArrayModel, d: int, t: int, i: int) -> tuple[list[int], list[float]]:
    """``Z[d,t,i] = R[d,t,i] + S[d,t,i]`` as columns and coefficients."""
    cols = [family[d, t, i] for family in (model.R, model.S) if (d, t, i) in family]
    return cols, [1.0] * len(cols)


def add_input_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``R[d,t,k] <= Z[d,t,i] + sum_{d'} X[d'->d,t,(i,k)]``; ``X[d'->d] <= Z[d',t,i]``;
    ``X[d'->d] <= R[d,t,k]``; ``X[d'->d] <= 1 - Z[d,t,i]``."""
    g = model.graph
    for (d, t, k), r in model.R.items():
        for i in g.inputs[k]:
            e = g.edge_number[i, k]
            cols, vals = _available(model, d, t, i)
            copies = [model.X[s, d, t, e] for s in range(g.num_devices) if (s, d, t, e) in model.X]
            b.row([r, *cols, *copies], [1.0] + [-1.0] * (len(cols) + len(copies)), -INF, 0.0)
    for (src, dst, t, e), x in model.X.items():
        i, k = g.edge_pairs[e]
        cols, vals = _available(model, src, t, i)
        b.row([x, *cols], [1.0] + [-1.0] * len(cols), -INF, 0.0)
        b.row([x, model.R[dst, t, k]], [1.0, -1.0], -INF, 0.0)
        cols, vals = _available(model, dst, t, i)
        b.row([x, *cols], [1.0, *vals], -INF, 1.0)


def add_freeing_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``F[d,t,(i,k)] <= Z[d,t,i]``; ``<= R[d,t,k] + sum_{d'} X[d->d',t,(i,k)]``;
    ``<= 1 - S[d,t+1,i]``; and for each later user ``j > k`` of ``i``:
    ``<= 1 - R[d,t,j]`` and ``<= 1 - X[d->d',t,(i,j)]``."""
    g = model.graph
    for (d, t, e), f in model.F.items():
        i, k = g.edge_pairs[e]
        cols, _ = _available(model, d, t, i)
        b.row([f, *cols], [1.0] + [-1.0] * len(cols), -INF, 0.0)
        uses = [model.R[d, t, k]] if (d, t, k) in model.R else []
        uses += [model.X[d, s, t, e] for s in range(g.num_devices) if (d, s, t, e) in model.X]
        b.row([f, *uses], [1.0] + [-1.0] * len(uses), -INF, 0.0)
        if (d, t + 1, i) in model.S:
            b.row([f, model.S[d, t + 1, i]], [1.0, 1.0], -INF, 1.0)
        for j in g.users[i]:
            if not k < j <= t:
                continue
            later = g.edge_number[i, j]
            if (d, t, j) in model.R:
                b.row([f, model.R[d, t, j]], [1.0, 1.0], -INF, 1.0)
            for s in range(g.num_devices):
                if (d, s, t, later) in model.X:
                    b.row([f, model.X[d, s, t, later]], [1.0, 1.0], -INF, 1.0)


def add_memory_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``U[d,t,k] = U[d,t,k'] + M_k R[d,t,k] - sum_{k' <= j < k} sum_{(i,j)} M_i F[d,t,(i,j)]``
    (``k'`` the previous row's node; the first row starts from ``sum_i M_i S[d,t,i]``) and
    ``U[d,t,k] + sum_{(i,k)} sum_{d'} M_i X[d'->d,t,(i,k)] + W_k R[d,t,k] <= B_d``, per
    device; the workspace term only where ``W_k > 0`` (it is not carried to ``k+1``)."""
    g = model.graph
    incoming: list[list[int]] = [[] for _ in range(g.n)]
    for e, (_, k) in enumerate(g.edge_pairs):
        incoming[k].append(e)
    for d in range(g.num_devices):
        if not model.memory.binds(d):
            continue  # a budget no schedule can exceed needs no rows
        size, rhs = model.memory.sizes[d], float(model.memory.rhs[d])
        work = model.memory.workspace[d] if model.memory.workspace is not None else None
        for t in range(g.n):
            previous: int | None = None
            pending_cols: list[int] = []
            pending_vals: list[float] = []
            for i in range(t):
                if (d, t, i) in model.S:
                    pending_cols.append(model.S[d, t, i])
                    pending_vals.append(-float(size[i]))
            for k in range(t + 1):
                if (d, t, k) in model.U:
                    u = model.U[d, t, k]
                    cols = [u, model.R[d, t, k], *pending_cols]
                    vals = [1.0, -float(size[k]), *pending_vals]
                    if previous is not None:
                        cols.append(previous)
                        vals.append(-1.0)
                    b.row(cols, vals, 0.0, 0.0)
                    copies = [
                        (model.X[s, d, t, e], float(size[g.edge_pairs[e][0]]))
                        for e in incoming[k]
                        for s in range(g.num_devices)
                        if (s, d, t, e) in model.X
                    ]
                    if work is not None and work[k] > 0:  # in use while k runs, then released
                        copies.append((model.R[d, t, k], float(work[k])))
                    b.row([u] + [c for c, _ in copies], [1.0] + [v for _, v in copies], -INF, rhs)
                    previous, pending_cols, pending_vals = u, [], []
                for e in incoming[k]:
                    if (d, t, e) in model.F:
                        pending_cols.append(model.F[d, t, e])
                        pending_vals.append(float(size[g.edge_pairs[e][0]]))


def add_saved_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``sum_i M_i S[d,t_b,i] <= L_d`` at the boundary stage ``t_b`` (the first backward
    node's) for each device with a saved-bytes limit ``L_d`` (``Device.saved_limit``): what
    the forward leaves resident for the backward. The row is in units of the gcd of its sizes
    (exact), with half a unit of room for the backend's tolerances."""
    g = model.graph
    t = g.boundary
    if t is None:
        return
    for d, device in enumerate(g.devices):
        if device.saved_limit is None:
            continue
        keys = [
            (int(g.output_bytes[i]), model.S[d, t, i]) for i in range(t) if (d, t, i) in model.S
        ]
        divisor = 0
        for size, _ in keys:
            divisor = gcd(divisor, size)
        divisor = max(divisor, 1)
        b.row(
            [col for _, col in keys],
            [size / divisor for size, _ in keys],
            -INF,
            device.saved_limit // divisor + 0.5,
        )


def add_once_constraints(model: ArrayModel, b: ModelBuilder) -> None:
    """``sum_{d, t > i} R[d,t,i] = 0`` for each node ``i`` computed once
    (``Node.recomputable`` False, :attr:`Graph.once`): it runs in its own stage only (the
    frontier row) and is then kept or freed, never computed again (docs/spec-notes.md,
    "Nodes computed once"). One row per such node; none for a graph without them."""
    g = model.graph
    for i in g.once:
        cols = [
            model.R[d, t, i]
            for d in range(g.num_devices)
            for t in range(i + 1, g.n)
            if (d, t, i) in model.R
        ]
        if cols:
            b.row(cols, [1.0] * len(cols), -INF, 0.0)


def cheapest_once(model: ArrayModel) -> float:
    """A lower bound on any schedule's cost: each node once, on its cheapest device that can
    hold it with its inputs (the frontier computes every node at least once)."""
    g = model.graph
    total = 0.0
    for k in range(g.n):
        total += min(float(g.cost[d, k]) for d in range(g.num_devices) if (d, k, k) in model.R)
    return total
