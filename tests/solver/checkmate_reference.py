"""Checkmate's single-device frontier-advancing MILP, written independently from
solver/optimize/xengine.py.

It follows the Checkmate paper (Jain et al., MLSys 2020, eqs. 1-9) with the exact "hazard"
freeing rows, so its optimum checks ours (model.md §3: with D = 1 both have the same optimum).
"""

from __future__ import annotations

import time
import warnings

import pulp

from solver.document.graph import Graph


def checkmate_optimum(graph: Graph, budget: int) -> float | None:
    """The optimal cost, or None when infeasible. Uses the first device's costs."""
    status, objective, _ = checkmate_solve(graph, budget)
    return objective if status == "optimal" else None


def checkmate_solve(
    graph: Graph, budget: int, time_limit: float = 60.0
) -> tuple[str, float | None, float]:
    """Solve the plain model with PuLP's CBC: (``"optimal"``, ``"infeasible"`` or
    ``"not proven"``, the objective when proven, wall seconds of the solve)."""
    n, M, C = graph.n, [int(m) for m in graph.output_bytes], graph.cost[0]
    edges = list(graph.edge_pairs)
    prob = pulp.LpProblem("checkmate", pulp.LpMinimize)
    R = {
        (t, i): prob.add_variable(f"R_{t}_{i}", 0, 1, pulp.LpBinary)
        for t in range(n)
        for i in range(t + 1)
    }
    S = {
        (t, i): prob.add_variable(f"S_{t}_{i}", 0, 1, pulp.LpBinary)
        for t in range(1, n)
        for i in range(t)
    }
    FREE = {
        (t, e): prob.add_variable(f"F_{t}_{e}", 0, 1, pulp.LpBinary)
        for t in range(n)
        for e, (_, k) in enumerate(edges)
        if k <= t
    }
    U = {
        (t, k): prob.add_variable(f"U_{t}_{k}", 0, budget, pulp.LpContinuous)
        for t in range(n)
        for k in range(t + 1)
    }

    def r(t, i):
        return R.get((t, i), 0)

    def s(t, i):
        return S.get((t, i), 0)

    prob += pulp.lpSum(float(C[i]) * v for (t, i), v in R.items())
    for t in range(n):
        prob += R[t, t] == 1
    for (t, i), v in S.items():
        prob += v <= s(t - 1, i) + r(t - 1, i)
    for t in range(n):
        for i, k in edges:
            if k <= t:
                prob += r(t, k) <= r(t, i) + s(t, i)
    for (t, e), free in FREE.items():
        i, k = edges[e]
        later = [j for j in graph.users[i] if k < j <= t]
        hazards = (1 - r(t, k)) + s(t + 1, i) + pulp.lpSum(r(t, j) for j in later)
        prob += (1 - free) * (2 + len(later)) >= hazards
        prob += 1 - free <= hazards
    for t in range(n):
        prob += U[t, 0] == pulp.lpSum(M[i] * s(t, i) for i in range(t)) + M[0] * r(t, 0)
        for k in range(t):
            freed = pulp.lpSum(
                M[edges[e][0]] * FREE[t, e] for e, (_, j) in enumerate(edges) if j == k
            )
            prob += U[t, k + 1] == U[t, k] + M[k + 1] * r(t, k + 1) - freed
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit))
    seconds = time.perf_counter() - started
    if prob.status == pulp.LpStatusInfeasible:
        return "infeasible", None, seconds
    if prob.sol_status not in (pulp.LpSolutionOptimal,) or prob.status != 1:
        return "not proven", None, seconds
    return "optimal", float(pulp.value(prob.objective) or 0.0), seconds  # None: all costs 0
