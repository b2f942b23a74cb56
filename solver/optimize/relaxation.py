"""A lower bound at every size: what the memory of each stage forces, as a small MILP.

The paper's model proves its bound with n^2 variables; beyond a few hundred nodes no backend
finishes even its LP, and the only bound left was every node once on its cheapest device
(the "plain cost"), which says nothing about rematerialization. This relaxation keeps the
part of the problem that forces recomputation and drops the rest:

A tensor ``u`` that is computed only once, on device ``d``, must stay resident on ``d`` from
stage ``u`` until its last reader ``last(u)`` runs (model.md §2: nothing else can bring it
back, and without offloading it lives only where it was computed). So while node ``t`` runs
for the first time, for every ``u < t < last(u)`` computed once, ``M_u`` is in use on its
device. With binary variables

- ``w[t,d]``: node ``t`` first runs on ``d`` (``sum_d w[t,d] = 1``);
- ``z[u,d] <= w[u,d]``: ``u`` runs once, on ``d``, so it is held there for its whole span;
- ``r[u] >= 1 - sum_d z[u,d]``: ``u`` runs at least twice (at least ``min_d C[d][u]`` more);
- ``v[i,t,d] >= z[i,d], >= w[t,d]``: an input ``i`` of ``t`` held beyond ``t`` is on ``d``,

every stage ``t`` and device ``d`` gives one row,
``sum_{u spans t} M_u z[u,d] + sum_{i in(t)} M_i v[i,t,d] + (M_t + W_t) w[t,d] <= B_d``
(inputs whose last reader is ``t`` count with ``w[t,d]``), and the objective is
``sum C[d][t] w[t,d] + sum min_d C[d][u] r[u]`` plus the transfers a first run must make
from a tensor held on another device. Every schedule gives a feasible point of this program
with at most its cost, so the program's bound (its optimum, or the backend's bound when time
runs out) is a valid lower bound of XEngine's problem. It ignores what a recomputation reads,
so it is weak where recomputing cascades; where memory forces a few recomputations of cheap
nodes it is close (docs/solver.md has the measurements).

The rows have ``sum_t |span(t)|`` coefficients, up to n^2/4 on a training graph; above
:data:`MAX_COEFFICIENTS` only the stages with the most bytes held are kept (dropping rows
keeps the bound valid).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solver.document.graph import Graph
from solver.optimize.backends import BackendOptions, run_backend
from solver.optimize.backends._common import Cancel
from solver.optimize.backends.lp import LinearProgram
from solver.status import Progress, SolveStatus

__all__ = ["MAX_COEFFICIENTS", "Relaxation", "build_relaxation", "relaxation_bound"]

MAX_TRANSFER_DEVICES = 8
"""Above this many devices the transfer terms are left out (their count grows as D^2)."""
MAX_COEFFICIENTS = 3_000_000
"""Memory-row coefficients kept at most (about 1 s to build, a few hundred MB for CBC)."""


@dataclass(frozen=True)
class Relaxation:
    """The program and how much of the graph it saw (``stages_kept`` of ``graph.n``)."""

    program: LinearProgram
    stages_kept: int
    stages: int


class Stopped(Exception):
    """Building the relaxation was cancelled."""


def build_relaxation(
    graph: Graph, max_coefficients: int = MAX_COEFFICIENTS, cancel: Cancel | None = None
) -> Relaxation:
    """The relaxation of ``graph`` under its budgets as a :class:`LinearProgram`; raises
    :class:`Stopped` soon after ``cancel`` is set."""
    g = graph
    n, num_d = g.n, g.num_devices
    size = [int(m) for m in g.output_bytes]
    work = [int(w) for w in g.workspace]
    budgets = [int(b) for b in g.activation_budgets]
    last = [max(users, default=-1) for users in g.users]
    able = np.zeros((num_d, n), dtype=bool)
    for d in range(num_d):
        for t in range(n):
            need = size[t] + sum(size[i] for i in g.inputs[t]) + work[t]
            able[d, t] = not math.isnan(g.cost[d, t]) and need <= budgets[d]
    cmin = [
        min((float(g.cost[d, u]) for d in range(num_d) if able[d, u]), default=0.0)
        for u in range(n)
    ]
    cost: list[float] = []
    integer: list[bool] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    upper: list[float] = []

    def column(c: float, is_int: bool = True) -> int:
        cost.append(c)
        integer.append(is_int)
        return len(cost) - 1

    def row(entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        r = len(lower)
        if r % 4096 == 0 and cancel is not None and cancel.is_set():
            raise Stopped
        for col, val in entries:
            rows.append(r)
            cols.append(col)
            vals.append(val)
        lower.append(lo)
        upper.append(hi)

    w = {}
    z = {}
    for t in range(n):
        for d in range(num_d):
            if able[d, t]:
                w[t, d] = column(min(float(g.cost[d, t]), 1e12))
        row([(w[t, d], 1.0) for d in range(num_d) if (t, d) in w], 1.0, 1.0)
    for u in range(n):
        if last[u] <= u:
            continue  # read by nobody after it runs: it never has to be held
        r = column(min(cmin[u], 1e12))
        entries = [(r, 1.0)]
        for d in range(num_d):
            if (u, d) in w:
                z[u, d] = column(0.0)
                row([(z[u, d], 1.0), (w[u, d], -1.0)], -math.inf, 0.0)
                entries.append((z[u, d], 1.0))
        row(entries, 1.0, math.inf)  # r + sum_d z >= 1
    # A first run reading a tensor held only on another device pays at least that transfer
    # (left out beyond MAX_TRANSFER_DEVICES devices: n x D^2 terms; leaving terms out keeps
    # the bound valid, only weaker).
    pairs = g.edge_pairs if num_d <= MAX_TRANSFER_DEVICES else ()
    for e, (i, k) in enumerate(pairs):
        for d in range(num_d):
            for d2 in range(num_d):
                if d == d2 or (k, d) not in w or (i, d2) not in z:
                    continue
                transfer = float(g.transfer[e, d2, d])
                if not math.isfinite(transfer) or transfer <= 0:
                    continue
                x = column(min(transfer, 1e12), is_int=False)
                row([(x, 1.0), (z[i, d2], -1.0), (w[k, d], -1.0)], -1.0, math.inf)
    # Which tensors span each stage, and the stages with the most bytes held.
    spans: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        for t in range(u + 1, last[u]):
            spans[t].append(u)
    inputs = [set(g.inputs[t]) for t in range(n)]
    held = [sum(size[u] for u in spans[t] if u not in inputs[t]) for t in range(n)]
    order = sorted(range(n), key=lambda t: held[t], reverse=True)
    kept_stages: list[int] = []
    total = 0
    for t in order:
        coefficients = num_d * (len(spans[t]) + len(g.inputs[t]) + 1)
        if total + coefficients > max_coefficients and kept_stages:
            continue
        total += coefficients
        kept_stages.append(t)
    v = {}
    for t in sorted(kept_stages):
        for d in range(num_d):
            terms: list[tuple[int, float]] = []
            for u in spans[t]:
                if u not in inputs[t] and size[u] and (u, d) in z:
                    terms.append((z[u, d], float(size[u])))
            for i in g.inputs[t]:
                if not size[i]:
                    continue
                if last[i] > t and (i, d) in z:
                    key = (i, t, d)
                    if key not in v:
                        v[key] = column(0.0, is_int=False)
                        row([(v[key], 1.0), (z[i, d], -1.0)], 0.0, math.inf)
                        if (t, d) in w:
                            row([(v[key], 1.0), (w[t, d], -1.0)], 0.0, math.inf)
                    terms.append((v[key], float(size[i])))
                elif (t, d) in w:
                    terms.append((w[t, d], float(size[i])))
            if (t, d) in w and size[t] + work[t]:
                terms.append((w[t, d], float(size[t] + work[t])))
            if terms and sum(val for _, val in terms) > budgets[d]:
                row(terms, -math.inf, float(budgets[d]))
    count = len(cost)
    program = LinearProgram(
        cost=np.array(cost),
        col_lower=np.zeros(count),
        col_upper=np.ones(count),
        integer=np.array(integer, dtype=bool),
        rows=np.array(rows, dtype=np.int64),
        cols=np.array(cols, dtype=np.int64),
        vals=np.array(vals),
        row_lower=np.array(lower),
        row_upper=np.array(upper),
    )
    return Relaxation(program, len(kept_stages), n)


def relaxation_bound(
    graph: Graph,
    time_limit_s: float = 10.0,
    backend: str = "cbc",
    cancel: Cancel | None = None,
    built: threading.Event | None = None,
    on_bound: Callable[[float], None] | None = None,
) -> float | None:
    """A valid lower bound on the cost of every schedule of ``graph`` (module docstring), or
    ``None`` when the backend gave none in time (an infeasible relaxation means that no
    schedule exists; that is reported by the paper's necessary condition first).

    ``built`` is set once the program is built and the backend runs (the build and writing
    CBC's file are Python, CBC is not), so that another build waiting for the interpreter
    can go on.
    ``on_bound`` hears each bound the backend reports while it runs (CBC's root LP on a
    5,107-operation tower ends seconds before its time limit, when the answer comes).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> relaxation_bound(unit_chain(4, budget=3))  # plain cost 9, optimum 15
    12.0
    """
    try:
        relaxation = build_relaxation(graph, cancel=cancel)
    except Stopped:
        return None
    options = BackendOptions(backend=backend, time_limit_s=time_limit_s, gap_rel=1e-6, threads=1)

    def heard(progress: Progress) -> None:
        if on_bound is not None and progress.bound is not None:
            on_bound(progress.bound)

    started = built.set if built is not None else None
    outcome = run_backend(relaxation.program, options, heard, cancel, on_started=started)
    if outcome.status is SolveStatus.OPTIMAL and outcome.objective is not None:
        return outcome.objective
    return outcome.bound
