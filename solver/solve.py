"""Solving: XEngine's MIQP end to end, from graph to a replayed schedule (spec/model.md §3-4).

:func:`solve_xengine` builds the model, warm-starts it from the best baseline, runs a backend
with progress and cancel, reads the schedule back, and replays it in the simulator. A schedule
that does not replay, or that costs more than the solver claimed, is reported as an error and
never returned as valid.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from solver.backends import BackendOptions, run_backend
from solver.baselines import checkpoint_all, chen_greedy
from solver.bounds import explain_infeasible, no_remat_peak
from solver.graph import Graph
from solver.greedy import best_heterogeneous
from solver.schedule import Operation, Schedule, SolverInfo, Stage
from solver.simulate import Timeline, simulate
from solver.status import Progress, SolveStatus
from solver.units import format_size
from solver.xengine import Model, build_model

__all__ = ["SolveOptions", "SolveResult", "solve_xengine", "schedule_to_values", "read_schedule"]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class SolveOptions:
    """What to solve with: the backend and its limits, and whether to warm-start."""

    backend: str = "cbc"
    time_limit_s: float = 60.0
    gap_rel: float = 1e-4
    threads: int | None = None
    warm_start: bool = True


@dataclass(frozen=True)
class SolveResult:
    """The outcome of one solve (model.md §4). ``schedule`` and ``timeline`` are set together,
    only for a schedule that replayed validly; ``message`` explains anything else."""

    method: str
    status: SolveStatus
    schedule: Schedule | None = None
    timeline: Timeline | None = None
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    build_seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    backend: str = ""
    message: str = ""
    log_tail: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """A valid schedule is available."""
        return self.schedule is not None and self.timeline is not None and self.timeline.valid


def solve_xengine(
    graph: Graph,
    options: SolveOptions = SolveOptions(),
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    method: str = "xengine",
) -> SolveResult:
    """Find the fastest schedule of ``graph`` under its devices' budgets with XEngine's MIQP.

    With one device this is Checkmate's model. Infeasible budgets are explained (model.md §4).

    Examples
    --------
    >>> from solver.generators import unit_chain
    >>> result = solve_xengine(unit_chain(4, budget=4), SolveOptions(time_limit_s=20))
    >>> result.status.value, result.timeline.total_ms
    ('optimal', 11.0)
    """
    reason = explain_infeasible(graph)
    if reason:
        return SolveResult(method, SolveStatus.INFEASIBLE, message=reason)
    started = time.perf_counter()
    model = build_model(graph)
    build_seconds = time.perf_counter() - started
    start = _best_baseline(graph) if options.warm_start else None
    if start is not None:
        _set_start_values(graph, model, start)
    backend_options = BackendOptions(
        backend=options.backend,
        time_limit_s=options.time_limit_s,
        gap_rel=options.gap_rel,
        threads=options.threads,
        warm_start=start is not None,
    )
    outcome = run_backend(model.prob, backend_options, on_progress, cancel)
    base = SolveResult(
        method=method,
        status=outcome.status,
        objective=outcome.objective,
        bound=outcome.bound,
        gap=outcome.gap,
        seconds=outcome.seconds,
        build_seconds=build_seconds,
        variables=model.num_variables,
        constraints=model.num_constraints,
        backend=options.backend.upper() if options.backend == "cbc" else "HiGHS",
        message=outcome.message,
        log_tail=outcome.log_tail,
    )
    if not outcome.has_solution:
        if start is not None and outcome.status in (SolveStatus.CANCELLED, SolveStatus.TIME_LIMIT):
            return _fallback_to_start(base, start)
        return _without_schedule(graph, base)
    return _replayed(graph, model, base)


def _fallback_to_start(result: SolveResult, start: tuple[Schedule, Timeline]) -> SolveResult:
    """The solver stopped before it wrote an incumbent: the warm start is still a valid one."""
    schedule, timeline = start
    status = (
        SolveStatus.CANCELLED if result.status is SolveStatus.CANCELLED else SolveStatus.FEASIBLE
    )
    info = (
        replace(
            schedule.solver,
            status=status,
            objective=timeline.total_ms,
            bound=result.bound,
            backend=result.backend,
        )
        if schedule.solver
        else None
    )
    return replace(
        result,
        status=status,
        schedule=replace(schedule, solver=info),
        timeline=timeline,
        objective=timeline.total_ms,
        message=f"stopped before the solver wrote an incumbent; this is the warm start "
        f"({schedule.solver.method if schedule.solver else 'a baseline'})",
    )


def _without_schedule(graph: Graph, result: SolveResult) -> SolveResult:
    if result.status is SolveStatus.INFEASIBLE:
        peak = no_remat_peak(graph)
        budgets = ", ".join(f"{d.name} {format_size(d.budget)}" for d in graph.devices)
        message = (
            "no schedule fits the budgets, although every node fits on some device alone; "
            f"budgets are {budgets}, the no-rematerialization peak is {format_size(peak)}: "
            "raise a budget towards it"
        )
        return replace(result, message=message)
    if result.status is SolveStatus.TIME_LIMIT:
        return replace(
            result,
            message="the time limit ran out before any schedule was found; "
            "raise the time limit or the budgets",
        )
    return result


def _replayed(graph: Graph, model: Model, result: SolveResult) -> SolveResult:
    """Read the schedule, replay it, and refuse it unless it is valid and no dearer than claimed."""
    schedule = read_schedule(model, result)
    timeline = simulate(graph, schedule)
    if not timeline.valid:
        return replace(
            result,
            status=SolveStatus.ERROR,
            message=f"the solver's schedule does not replay: {timeline.violation}",
        )
    claimed = result.objective if result.objective is not None else float("inf")
    if timeline.total_ms > claimed + 1e-6 * max(1.0, abs(claimed)):
        return replace(
            result,
            status=SolveStatus.ERROR,
            message=f"the replay costs {timeline.total_ms:.6g} ms but the solver "
            f"claimed {claimed:.6g} ms",
        )
    return replace(result, schedule=schedule, timeline=timeline)


def read_schedule(model: Model, result: SolveResult) -> Schedule:
    """Turn the variable values of a solved model into a :class:`Schedule`.

    An input is read locally when available there; otherwise from the cheapest device whose
    transfer variable is set. Redundant choices of an incumbent only make the replay cheaper.
    """
    g = model.graph

    def on(var) -> bool:
        return var is not None and (var.varValue or 0.0) > 0.5

    stages = []
    for t in range(g.n):
        ops = []
        for k in range(t + 1):
            for d, device in enumerate(g.devices):
                if on(model.R.get((d, t, k))):
                    ops.append(Operation(g.nodes[k].id, device.name, _sources(model, d, t, k)))
        keep = {
            device.name: frozenset(
                g.nodes[i].id for i in range(t + 1) if on(model.S.get((d, t + 1, i)))
            )
            for d, device in enumerate(g.devices)
        }
        stages.append(Stage(tuple(ops), keep))
    info = SolverInfo(
        method=result.method,
        backend=result.backend,
        status=result.status,
        objective=result.objective,
        bound=result.bound,
        gap=result.gap,
        seconds=result.seconds,
        variables=result.variables,
        constraints=result.constraints,
    )
    budgets = {d.name: d.memory for d in g.devices}
    return Schedule(g.name, budgets, tuple(stages), info)


def _sources(model: Model, d: int, t: int, k: int) -> dict[str, str]:
    g = model.graph
    sources = {}
    for i in g.inputs[k]:
        if (model.Z[d, t, i].varValue or 0.0) > 0.5:
            continue
        e = g.edge_number[i, k]
        options = [
            (float(g.transfer[e, s, d]), s)
            for s in range(g.num_devices)
            if (s, d, t, e) in model.X and (model.X[s, d, t, e].varValue or 0.0) > 1e-6
        ]
        if options:
            sources[g.nodes[i].id] = g.devices[min(options)[1]].name
    return sources


# ----- warm start ----------------------------------------------------------------------------
def _best_baseline(graph: Graph) -> tuple[Schedule, Timeline] | None:
    """The cheapest fitting baseline (single-device ones and the greedy heterogeneous one)."""
    best: tuple[Schedule, Timeline] | None = None
    greedy = best_heterogeneous(graph)
    if greedy.schedule is not None:
        best = (greedy.schedule, greedy.timeline)
    for device in graph.devices:
        schedule = checkpoint_all(graph, device.name)
        candidates = [(schedule, simulate(graph, schedule))]
        greedy = chen_greedy(graph, device.name)
        if greedy.schedule is not None:
            candidates.append((greedy.schedule, greedy.timeline))
        for schedule, timeline in candidates:
            if timeline.valid and (best is None or timeline.total_ms < best[1].total_ms):
                best = (schedule, timeline)
    return best


def _set_start_values(graph: Graph, model: Model, start: tuple[Schedule, Timeline]) -> None:
    """Write a valid schedule into the variables' values, as the backend's MIP start."""
    for var in model.prob.variables():
        var.varValue = 0.0
    for family, values in schedule_to_values(graph, *start).items():
        table = getattr(model, family)
        for key, value in values.items():
            if key in table:
                table[key].varValue = value


def schedule_to_values(graph: Graph, schedule: Schedule, timeline: Timeline) -> dict[str, dict]:
    """Variable values ``{family: {key: 1.0}}`` that encode a valid schedule in the MIQP."""
    R, S, Z, F, X = {}, {}, {}, {}, {}
    dev = graph.device_index
    for t, stage in enumerate(schedule.stages):
        for op in stage.ops:
            d, k = dev[op.device], graph.index[op.node]
            R[d, t, k] = Z[d, t, k] = 1.0
            for source_id, source in op.inputs.items():
                if source != op.device:
                    e = graph.edge_number[graph.index[source_id], k]
                    X[dev[source], d, t, e] = 1.0
        if t + 1 < graph.n:
            for device, kept in stage.keep.items():
                for node in kept:
                    S[dev[device], t + 1, graph.index[node]] = 1.0
                    Z[dev[device], t + 1, graph.index[node]] = 1.0
    for event in timeline.ops:
        k = graph.index[event.node]
        for device, tensor in event.freed:
            F[dev[device], event.stage, graph.edge_number[graph.index[tensor], k]] = 1.0
    return {"R": R, "S": S, "Z": Z, "F": F, "X": X}
