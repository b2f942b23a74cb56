"""Solving: XEngine's MIQP end to end, from graph to a replayed schedule (docs/model.md §3-4).

:func:`solve_xengine` finds a heuristic schedule, builds the model (:mod:`solver.optimize.miqp`),
runs a backend with progress and cancel, and reads the answer back. Every schedule, the
heuristic's, each improving one and the final one, goes through the simulator before anyone
sees it (:class:`~solver.optimize.incumbents.Incumbents`); one that does not replay, or that costs
more than the solver claimed, is never returned as valid.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.errors import XEngineError
from solver.execution.simulate import Timeline, simulate
from solver.optimize.advice import advise
from solver.optimize.backends import BackendOptions, BackendResult, registry, run_backend
from solver.optimize.backends._common import AnyOf, Cancel
from solver.optimize.baselines import checkpoint_all, checkpoint_all_where_it_fits, chen_greedy
from solver.optimize.bounds import each_node_once, explain_infeasible
from solver.optimize.construct import Construction, construct_best
from solver.optimize.exact_beside import exact_search_beside
from solver.optimize.formulation import OFFLOADING, PAPER, Formulation
from solver.optimize.greedy import best_heterogeneous
from solver.optimize.handover import RootWatch, root_wait_s
from solver.optimize.incumbents import Incumbents, ProgressCallback, SolveResult
from solver.optimize.interval_solve import prove_or_deepen, search_intervals, solve_intervals
from solver.optimize.intervals import DEFAULT_RUNS
from solver.optimize.lns import encode_schedule, search_windows
from solver.optimize.miqp import (
    ArrayModel,
    BuildInterrupted,
    ModelTooLarge,
    cheapest_once,
    estimate_size,
)
from solver.optimize.offload import OFFLOAD_METHOD
from solver.optimize.once import explain_saved_floor
from solver.optimize.relaxation import relaxation_bound
from solver.optimize.roomier import roomier_limits
from solver.optimize.saved_start import saved_limit_start
from solver.status import Progress, SolveStatus

__all__ = [
    "PAPER_SHARE",
    "Plan",
    "ProgressCallback",
    "SolveOptions",
    "SolveResult",
    "SolveStart",
    "best_baseline",
    "plan_solve",
    "solve_model",
    "solve_offload",
    "start_solve",
    "solve_xengine",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolveOptions:
    """What to solve with: the backend and its limits, and how to use the heuristic start.

    ``warm_start`` computes the heuristic schedules first and keeps the best as our own
    incumbent. ``mip_start`` (``None``: per backend, see :func:`_mip_start`) also hands it to
    the backend; ``cutoff`` makes the backend look only for cheaper schedules. ``improve``
    runs a neighbourhood search (:mod:`solver.optimize.lns`) beside the full model, which then only
    has to prove: schedules come from both.
    """

    backend: str = "cbc"
    time_limit_s: float = 60.0
    gap_rel: float = 1e-4
    threads: int | None = None
    warm_start: bool = True
    mip_start: bool | None = None
    cutoff: bool = False
    improve: bool = True
    offload: bool = False
    """Allow offloading copies (solver/optimize/offload.py); off: the paper's model, unchanged."""
    formulation: str = "auto"
    """``"stages"`` (the paper's model), ``"intervals"`` (retention intervals, CP-SAT) or
    ``"auto"``: by the backend and the graph's size (:func:`choose_formulation`)."""
    runs: int = DEFAULT_RUNS
    """The interval model's ``C``: computations per node and device it considers."""

    def __post_init__(self) -> None:
        if self.formulation not in FORMULATIONS:
            raise ValueError(
                f"formulation must be one of {', '.join(FORMULATIONS)}; got {self.formulation!r}"
            )
        if self.runs < 1:
            raise ValueError(f"runs must be at least 1; got {self.runs}")


FORMULATIONS = ("auto", "stages", "intervals")


def solve_xengine(
    graph: Graph,
    options: SolveOptions = SolveOptions(),
    on_progress: ProgressCallback | None = None,
    cancel: Cancel | None = None,
    method: str = "xengine",
) -> SolveResult:
    """Find the fastest schedule of ``graph`` under its devices' budgets with XEngine's MIQP.

    With one device this is Checkmate's model. Infeasible budgets are explained (model.md §4).
    The heuristic start is our own incumbent from the first moment: it is reported at once,
    returned if the backend stops, fails or crashes without a better schedule, and handed to
    the backend only as the options say (see :class:`SolveOptions`).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> result = solve_xengine(unit_chain(4, budget=4), SolveOptions(time_limit_s=20))
    >>> result.status.value, result.timeline.total_ms
    ('optimal', 11.0)
    """
    if options.offload:  # issue 12: offloading, a model of its own
        result = solve_offload(graph, options, on_progress, cancel)
    else:
        result = _solve(graph, options, on_progress, cancel, method)
    roomier = None
    if result.schedule is None and result.status in (
        SolveStatus.TIME_LIMIT,
        SolveStatus.INFEASIBLE,
    ):
        # "a larger budget", with a number: what the construction needs (a few seconds)
        if cancel is None or not cancel.is_set():
            roomier = roomier_limits(graph, cancel=cancel)
    advice = advise(result, graph, options.time_limit_s, options.backend, roomier)
    return replace(result, advice=advice) if advice else result


def _solve(
    graph: Graph,
    options: SolveOptions,
    on_progress: ProgressCallback | None,
    cancel: Cancel | None,
    method: str,
) -> SolveResult:
    start = start_solve(graph, options, method, on_progress, cancel)
    if isinstance(start, SolveResult):
        return start
    if cancel is not None and cancel.is_set():
        stopped = replace(start.base, status=SolveStatus.CANCELLED)
        return start.best.result(stopped, "cancelled during the heuristic start")
    plan = plan_solve(graph, options)
    start.best.note(f"plan: {plan.why}")
    # Every search below stops when the user cancels or when a bound found beside them
    # proves the incumbent (Incumbents.closed); the result then says which.
    halt = AnyOf(cancel, start.best.closed)
    # The relaxation's build and the interval model's are Python and share one interpreter:
    # on the interval plan (the largest graphs) the latter waits for the former, whose CBC
    # then runs in its own process while the interval model is built (a 5,107-operation
    # tower: built side by side, both were done 20.6 s after the construction; the interval
    # model alone takes 12 s, the relaxation 4.4 s).
    relaxed = threading.Event()
    interval_plan = plan.formulation == "intervals"
    with (
        _relaxation_beside(start, options, cancel, relaxed, interval_plan),
        exact_search_beside(start.best, start.deadline, halt),
    ):
        after = relaxed if interval_plan else None
        result = _run_plan(start, plan, options, on_progress, halt, after)
    user_cancelled = cancel is not None and cancel.is_set()
    stopped_by_bound = start.best.closed.is_set() and result.status is not SolveStatus.OPTIMAL
    if stopped_by_bound and not user_cancelled and start.best.timeline is not None:
        return start.best.closed_result(result)
    return result


def _run_plan(
    start: SolveStart,
    plan: Plan,
    options: SolveOptions,
    on_progress: ProgressCallback | None,
    halt: Cancel,
    after: threading.Event | None = None,
) -> SolveResult:
    if plan.formulation == "intervals":
        return solve_intervals(start, options, on_progress, halt, options.runs, after)
    if plan.improver != "intervals":
        return solve_model(start, PAPER, options, on_progress, halt, plan.improver)
    # CP-SAT first: its schedule is the cutoff and the node fixing of the paper's model,
    # which then mostly has to prove (the 100-node random graph at 0.8: proven in 12 s
    # from CP-SAT's schedule; CBC alone ended 0.4 % short in 60 s).
    first_s = min(options.time_limit_s * INTERVALS_FIRST, INTERVALS_FIRST_CAP_S)
    first = start.started + first_s
    search_intervals(start.best, first, halt, None, options.runs, threads=2)
    if halt.is_set():
        stopped = replace(start.base, status=SolveStatus.CANCELLED)
        return start.best.result(stopped, "cancelled during CP-SAT's search")
    restricted = start.best.restricted
    beside = "covering" if restricted is not None and restricted.proven else "intervals"
    return solve_model(start, PAPER, replace(options, cutoff=True), on_progress, halt, beside)


INTERVALS_FIRST = 0.35
"""The share of the time limit CP-SAT gets first on the interval model, at most
:data:`INTERVALS_FIRST_CAP_S` (it stops sooner when it has proven its restricted optimum),
before CBC starts on the paper's model."""
INTERVALS_FIRST_CAP_S = 3.0
"""CP-SAT's first phase, at most: long enough for a cutoff near the optimum on the 100-node
random graph, short enough that CBC, which proves VGG16 at 60 % by itself, starts at once
(a 21 s first phase cost VGG16 at 60 % 24 s to proof instead of 2 s)."""


@dataclass(frozen=True)
class Plan:
    """What a solve runs: the ``formulation`` the backend solves (``"stages"``, the paper's
    model; ``"intervals"``, retention intervals on CP-SAT) and the ``improver`` beside it on
    the second core (``"windows"``, the neighbourhood search; ``"intervals"``, CP-SAT on the
    interval model; ``"none"``), with the reason in words."""

    formulation: str
    improver: str
    why: str


STAGE_MODEL_COLUMNS = 200_000
"""Above this many columns (about 150 nodes on two devices) the paper's model is not built on
``"auto"``: building it takes much of a minute and CBC does not finish its root LP within
one (an op-level ResNet-50, 439 nodes: 828,286 columns, 33 s to build). docs/solver.md has
the measurements."""


def plan_solve(graph: Graph, options: SolveOptions) -> Plan:
    """Choose the formulation and the improver (see :class:`Plan`).

    CP-SAT as the backend runs the interval model alone. CBC and HiGHS run the paper's model,
    which proves optima in bytes with no restriction, while it is small enough to help
    (:data:`STAGE_MODEL_COLUMNS`); beside it CP-SAT searches the interval model when it is
    installed (it finds better schedules sooner than the neighbourhood search), else the
    neighbourhood search runs. Above that size the interval model runs on CP-SAT, with
    CBC's relaxation for the bound. ``formulation="stages"`` keeps the paper's model
    (with the neighbourhood search) at any size.
    """
    chosen = registry.backend(options.backend)
    have_cpsat = registry.BACKENDS["cpsat"].available()
    if graph.saved_limits and (chosen.kind == "cp" or options.formulation == "intervals"):
        raise XEngineError(
            "the interval formulation (CP-SAT) has no saved-bytes limit; solve with CBC or "
            "HiGHS on the paper's model"
        )
    if chosen.kind == "cp":
        return Plan("intervals", "none", f"{chosen.label} on the interval model")
    if options.formulation == "intervals":
        raise XEngineError(f"the interval formulation runs on CP-SAT, not {chosen.label}")
    search = "windows" if options.improve else "none"
    if options.formulation == "stages":
        return Plan("stages", search, f"{chosen.label} on the paper's model, as asked")
    if graph.saved_limits:
        # The interval model has no row for the saved bytes: its schedules would mostly be
        # refused by the replay, and its restricted optimum would mislead the node fixing.
        why = f"{chosen.label} on the paper's model (a saved-bytes limit: no interval model)"
        return Plan("stages", search, why)
    columns, _ = estimate_size(graph)
    if columns <= STAGE_MODEL_COLUMNS:
        if have_cpsat and options.improve:
            why = f"{chosen.label} on the paper's model, CP-SAT on the interval model beside it"
            return Plan("stages", "intervals", why)
        return Plan("stages", search, f"{chosen.label} on the paper's model")
    if have_cpsat:
        why = (
            f"the paper's model would have about {columns:,} columns; CP-SAT on the interval "
            f"model, {chosen.label} on the relaxation bound"
        )
        return Plan("intervals", "none", why)
    why = (
        f"the paper's model would have about {columns:,} columns and CP-SAT is not installed "
        f"(pip install -e '.[cpsat]'); {chosen.label} on the paper's model"
    )
    return Plan("stages", search, why)


@contextmanager
def _relaxation_beside(
    start: SolveStart,
    options: SolveOptions,
    cancel: Cancel | None,
    built: threading.Event | None = None,
    interval_plan: bool = False,
) -> Iterator[None]:
    """Compute :mod:`solver.optimize.relaxation`'s bound on a thread of its own while the
    solve runs (CBC in a process of its own), raising the incumbents' floor with each bound
    CBC reports; ``built`` is set once its CBC runs (its build and file written) or it ended.
    On the ``interval_plan`` (whose CP-SAT gives no bound without the restriction) it gets
    :data:`RELAXATION_LARGE_SHARE` of the limit."""
    stop = threading.Event()
    best = start.best
    budget = min(RELAXATION_SECONDS, max(0.5, options.time_limit_s * RELAXATION_SHARE))
    if interval_plan:
        budget = max(budget, options.time_limit_s * RELAXATION_LARGE_SHARE)

    def raise_floor(bound: float) -> None:
        if not stop.is_set():
            why = f"relaxation: no schedule costs less than {bound:.6g} ms"
            best.raise_floor(bound, why, "the relaxation")

    def run() -> None:
        try:
            bound = relaxation_bound(
                best.graph, budget, "cbc", AnyOf(stop, cancel), built, raise_floor
            )
        except Exception:  # a bound is a bonus: never let it cost the solve
            logger.exception("the relaxation bound failed")
            return
        finally:
            if built is not None:
                built.set()
        if bound is not None:
            raise_floor(bound)

    thread = threading.Thread(target=run, name="xengine-relaxation", daemon=True)
    thread.start()
    try:
        yield
    finally:
        # a bound that comes before the deadline may still prove the incumbent
        thread.join(timeout=max(0.0, min(0.5, start.deadline - time.monotonic())))
        stop.set()  # its CBC stops at once, its build within 4,096 rows, its MPS in a chunk
        thread.join(timeout=5.0)


EACH_NODE_ONCE = "counting each node once on its cheapest device"
"""The source named for :func:`~solver.optimize.bounds.each_node_once`'s bound."""
RELAXATION_SECONDS = 10.0
RELAXATION_SHARE = 0.15
"""The relaxation gets this share of the time limit, at most :data:`RELAXATION_SECONDS`."""
RELAXATION_LARGE_SHARE = 0.3
"""On the interval plan the relaxation is the one bound past each node once, and CBC's root
LP on a 5,107-operation tower came 8 s into its 9 s (at one more second of load, none): there
it gets this share of the limit. Its bounds are heard as CBC reports them, so a longer time
costs a core, not a later bound."""


@dataclass
class SolveStart:
    """A solve that has begun: its incumbents (the heuristic start offered), its clock, and
    the result it will fill in (``base``: method and backend, status ``error`` until known)."""

    best: Incumbents
    started: float
    deadline: float
    base: SolveResult


def start_solve(
    graph: Graph,
    options: SolveOptions,
    method: str,
    on_progress: ProgressCallback | None = None,
    cancel: Cancel | None = None,
) -> SolveStart | SolveResult:
    """The start every MIQP solve shares: the infeasibility check, the deadline, the backend's
    name, and the heuristic start (:func:`best_baseline`) as the first incumbent.

    Returns the finished :class:`SolveResult` when the budgets are infeasible (model.md §4's
    explanation), else the :class:`SolveStart`.
    """
    reason = explain_infeasible(graph) or explain_saved_floor(graph)
    if reason:
        return SolveResult(method, SolveStatus.INFEASIBLE, message=reason)
    started = time.monotonic()
    backend = registry.backend(options.backend).label
    best = Incumbents(graph, method, backend, on_progress, options.gap_rel)
    # A bound from the first moment: the relaxation below may not be in before the time limit
    # on an op-level import (a 5,107-operation tower at 30 s had none at all).
    once = each_node_once(graph)
    if once is not None:
        best.raise_floor(once, "", EACH_NODE_ONCE)
    if options.warm_start:
        until = started + _heuristic_seconds(options)
        # A schedule at once where one device holds everything: the construction below may
        # take 17 s on 5,000 operations (this one 2.5 s).
        kept_all = checkpoint_all_where_it_fits(graph)
        if kept_all is not None:
            best.offer(*kept_all, source=_source_name(kept_all[0]))
            best.note(
                f"{_source_name(kept_all[0])}: {kept_all[1].total_ms:.6g} ms "
                "(every tensor kept on one device, no recomputation)"
            )
        # Under a saved-bytes limit no start below looks at the boundary: this one does.
        held = saved_limit_start(graph)
        if held is not None and best.offer(*held, source="the saved-limit start"):
            best.note(
                f"saved-limit start: {held[1].total_ms:.6g} ms (a knapsack of tensors held "
                "across the boundary, the rest recomputed in the backward)"
            )
        # The construction may take longer than the baselines' share: on large graphs it is
        # the schedule everything else starts from (a 5,000-operation tower: 61.7 ms from it
        # in 33 s, 69.8 from the best baseline; cut at 6 s it gave nothing).
        best.note(f"construction: keep everything, recompute what overflows ({graph.n:,} nodes)")

        def first_built(found: Construction) -> None:  # shown while a wider repair runs
            assert found.schedule is not None and found.timeline is not None
            best.offer(found.schedule, found.timeline, source="the construction")
            best.note(
                f"construction: {found.timeline.total_ms:.6g} ms in {found.seconds:.1f} s; "
                "a repair weighing more drops at each step goes on"
            )

        built = construct_best(
            graph,
            deadline=max(until, started + options.time_limit_s * CONSTRUCTION_SHARE),
            cancel=cancel,
            alternatives_until=started + options.time_limit_s * ALTERNATIVES_SHARE,
            repair_until=started + options.time_limit_s * FIRST_REPAIR_SHARE,
            widen_until=started + options.time_limit_s * WIDEN_SHARE,
            on_schedule=first_built,
        )
        if built.infeasible:  # the backward search ran out: no schedule fits at all
            return SolveResult(
                method,
                SolveStatus.INFEASIBLE,
                seconds=time.monotonic() - started,
                message=built.reason,  # no backend: none ran
            )
        if built.schedule is not None and built.timeline is not None:
            best.offer(built.schedule, built.timeline, source="the construction")
            best.note(f"construction: {built.timeline.total_ms:.6g} ms in {built.seconds:.1f} s")
        else:
            best.note(f"{built.reason} ({built.seconds:.1f} s)")
        # a cancelled solve still keeps a schedule: the baselines run when there is none
        cancelled = cancel is not None and cancel.is_set()
        if best.timeline is None or (time.monotonic() < until and not cancelled):
            heuristic = best_baseline(graph, deadline=until, tried=kept_all)
            if heuristic is not None:
                best.offer(*heuristic, source=_source_name(heuristic[0]))
    base = SolveResult(method=method, status=SolveStatus.ERROR, backend=backend)
    return SolveStart(best, started, started + options.time_limit_s, base)


def solve_model(
    start: SolveStart,
    formulation: Formulation,
    options: SolveOptions,
    on_progress: ProgressCallback | None = None,
    cancel: Cancel | None = None,
    improver: str = "windows",
) -> SolveResult:
    """Build ``formulation``'s model, run the backend (and the neighbourhood search beside it,
    if ``options.improve``), confirm the answer in bytes where memory rows were rounded, and
    conclude. Shared by the paper's model and the offloading one."""
    best, started, deadline, base = start.best, start.started, start.deadline, start.base
    graph = best.graph
    label = formulation.label
    base = replace(base, formulation=label)
    try:
        model = formulation.make(graph, deadline=deadline, cancel=cancel, upper_bound=best.cost)
    except BuildInterrupted as exc:
        status = SolveStatus.CANCELLED if exc.reason == "cancel" else SolveStatus.TIME_LIMIT
        why = "cancelled" if exc.reason == "cancel" else "the time limit ran out"
        return best.result(replace(base, status=status), f"{why} while building the model")
    except ModelTooLarge as exc:
        return best.result(base, str(exc))
    base = replace(
        base,
        build_seconds=time.monotonic() - started,
        variables=model.num_variables,
        constraints=model.num_constraints,
    )
    best.note(
        f"{label}: model built in {base.build_seconds:.1f} s: {model.num_variables:,} "
        f"variables, {model.num_constraints:,} constraints"
    )
    outcome = _run_model(model, options, best, deadline, on_progress, cancel, improver)
    if outcome is None:  # the deadline or a cancel came before the backend could start
        stopped = SolveStatus.CANCELLED if cancel is not None and cancel.is_set() else None
        return best.result(replace(base, status=stopped or SolveStatus.TIME_LIMIT), "stopped")
    base = replace(
        base,
        status=outcome.status,
        bound=outcome.bound,
        seconds=time.monotonic() - started,
        message=outcome.message,
        log_tail=outcome.log_tail,
    )
    if outcome.values is not None:
        # A capped cost makes a schedule dearer than the model says: no claim to hold it to.
        claimed = None if model.capped else outcome.objective
        best.offer_values(model, outcome.values, claimed=claimed)
    if not model.memory.all_exact:
        outcome = _confirm_in_bytes(
            model, outcome, options, best, deadline, on_progress, cancel, improver
        )
    return best.conclude(base, outcome, cutoff_used=_cutoff(options, best) is not None)


def _confirm_in_bytes(
    relaxed: ArrayModel,
    outcome: BackendResult,
    options: SolveOptions,
    best: Incumbents,
    deadline: float,
    on_progress: ProgressCallback | None,
    cancel: Cancel | None,
    improver: str,
) -> BackendResult:
    """Where memory was rounded, check the relaxed model's answer in bytes, else repair it.

    The relaxed model (sizes rounded down, budgets up) admits every schedule that fits, so
    its bound holds for the exact problem, and its optimum is the exact optimum whenever it
    replays within the budgets in bytes. When it does not, the safe model (sizes up, budgets
    down), whose every schedule fits, searches for the rest of the time; the result is then
    "feasible" with the relaxed bound, unless the two meet.
    """
    g = relaxed.graph
    confirmed = (
        outcome.status is SolveStatus.OPTIMAL
        and outcome.objective is not None
        and best.cost is not None
        and best.cost <= outcome.objective + 1e-6 * max(1.0, outcome.objective)
    )
    if confirmed or outcome.status in (SolveStatus.INFEASIBLE, SolveStatus.CANCELLED):
        return outcome
    if outcome.status is SolveStatus.TIME_LIMIT and outcome.bound is None:
        return outcome  # nothing to confirm, and its time is spent (or CP-SAT took it)
    best.rejected.clear()  # an overrun of the relaxed model is expected here, not an error
    rounded = ", ".join(
        f"{d.name} to {relaxed.memory.unit[k]:.4g} B"
        for k, d in enumerate(g.devices)
        if not relaxed.memory.exact[k]
    )
    why = f"memory rows rounded ({rounded}); the bound is the relaxed model's, valid in bytes"
    try:
        safe = relaxed.formulation.make(
            g, rounding="safe", deadline=deadline, cancel=cancel, upper_bound=relaxed.upper_bound
        )
    except (BuildInterrupted, ModelTooLarge):
        return replace(outcome, status=_not_proven(outcome.status), message=why)
    second = _run_model(safe, options, best, deadline, on_progress, cancel, improver)
    if second is None:
        return replace(outcome, status=_not_proven(outcome.status), message=why)
    if second.values is not None:
        best.offer_values(safe, second.values, claimed=None if safe.capped else second.objective)
    bound = outcome.bound
    met = bound is not None and best.cost is not None and best.cost <= bound * (1 + options.gap_rel)
    status = SolveStatus.OPTIMAL if met else _not_proven(second.status)
    if second.status is SolveStatus.INFEASIBLE:
        # The safe model leaves out schedules that fit in bytes: its "infeasible" (with the
        # incumbent as cutoff: "nothing cheaper") proves nothing about the problem itself.
        status = SolveStatus.FEASIBLE if best.cost is not None else SolveStatus.TIME_LIMIT
    if second.status is SolveStatus.CANCELLED:
        status = SolveStatus.CANCELLED
    return replace(second, status=status, bound=bound, objective=best.cost, message=why)


def _not_proven(status: SolveStatus) -> SolveStatus:
    return SolveStatus.FEASIBLE if status is SolveStatus.OPTIMAL else status


def _run_model(
    model: ArrayModel,
    options: SolveOptions,
    best: Incumbents,
    deadline: float,
    on_progress: ProgressCallback | None,
    cancel: Cancel | None,
    improver: str = "windows",
) -> BackendResult | None:
    """Run the backend for the time left; the heuristic start goes in as the options say."""
    remaining = deadline - time.monotonic()
    if remaining <= 0.05 or (cancel is not None and cancel.is_set()):
        return None
    start = None
    if _mip_start(options) and best.schedule is not None and best.timeline is not None:
        start = encode_schedule(model, best.schedule, best.timeline)
    backend_options = BackendOptions(
        backend=options.backend,
        time_limit_s=remaining,
        gap_rel=options.gap_rel,
        threads=options.threads,
        cutoff=_cutoff(options, best),
    )
    best.raise_floor(cheapest_once(model), "")
    proven = threading.Event()
    search = None
    if improver == "intervals":
        search = threading.Thread(
            target=_search_then_deepen,
            args=(best, deadline, cancel, proven, options.runs),
            name="xengine-cpsat",
            daemon=True,
        )
        search.start()
    elif improver == "covering" and best.timeline is not None:
        search = threading.Thread(
            target=_cover_or_improve,
            args=(model, best, options.backend, deadline, cancel, proven),
            name="xengine-covering",
            daemon=True,
        )
        search.start()
    elif improver == "windows" and best.timeline is not None:
        search = threading.Thread(
            target=_improve,
            args=(model, best, options.backend, deadline, cancel, proven),
            name="xengine-lns",
            daemon=True,
        )
        search.start()
    progress = best.merged_progress(on_progress)
    stop_backend: Cancel = AnyOf(cancel, best.outpaced)
    watch = None
    if improver == "intervals":
        watch = RootWatch(root_wait_s(options.time_limit_s), AnyOf(cancel, proven))
        progress, stop_backend = watch.progress(progress), AnyOf(stop_backend, watch.stalled)
        watch.start()
    try:
        outcome = run_backend(
            model.program,
            backend_options,
            progress,
            stop_backend,
            start=start,
            on_solution=lambda values: best.offer_values(model, values),
        )
        if watch is not None and search is not None and _stalled(watch, outcome, cancel):
            why = watch.why(registry.backend(options.backend).label)
            best.note(why)
            proven.set()  # the one-worker search stops; both cores go to CP-SAT
            search.join()
            _search_then_deepen(best, deadline, cancel, threading.Event(), options.runs, 2)
            return replace(outcome, status=SolveStatus.TIME_LIMIT, bound=None, message=why)
        if _outpaced(best, outcome, cancel):
            why = (
                f"{registry.backend(options.backend).label} stopped at "
                f"{best.elapsed():.0f} s: the exact search's bound led its own, which rose "
                "too slowly to prove the incumbent in time; the search kept its core"
            )
            best.note(why)
            _wait(cancel, deadline)  # the exact search beside proves, or the time runs out
            return replace(outcome, status=SolveStatus.TIME_LIMIT, bound=None, message=why)
        if search is not None and outcome.status not in _PROOFS:
            # CBC sometimes gives up well before its limit (ResNet-18 at op level, 60 s: at
            # 43 s, still in its root node); the search keeps the time the user gave.
            search.join(timeout=max(0.0, deadline - time.monotonic()))
        return outcome
    finally:
        proven.set()  # the full model has finished (proved, or ran out of time): stop searching
        if search is not None:
            search.join()


def _stalled(watch: RootWatch, outcome: BackendResult, cancel: Cancel | None) -> bool:
    """Whether the backend was stopped by the watch (not by a proof, a cancel or its end)."""
    if not watch.stalled.is_set() or outcome.status is not SolveStatus.CANCELLED:
        return False
    return cancel is None or not cancel.is_set()


def _outpaced(best: Incumbents, outcome: BackendResult, cancel: Cancel | None) -> bool:
    """Whether the backend was stopped because the exact search outpaced it (not by a proof,
    a cancel or its end)."""
    if not best.outpaced.is_set() or outcome.status is not SolveStatus.CANCELLED:
        return False
    return cancel is None or not cancel.is_set()


def _wait(cancel: Cancel | None, deadline: float) -> None:
    """Until ``deadline`` or ``cancel`` (a user's cancel, or a bound that proves the
    incumbent)."""
    while time.monotonic() < deadline and (cancel is None or not cancel.is_set()):
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


_PROOFS = (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE, SolveStatus.CANCELLED)
"""Outcomes after which the neighbourhood search stops at once; after any other it keeps
the rest of the time (a backend that failed or stopped early leaves it the machine)."""


def _search_then_deepen(
    best: Incumbents,
    deadline: float,
    cancel: Cancel | None,
    stop: Cancel,
    runs: int,
    threads: int = 1,
) -> None:
    """CP-SAT on the interval model beside the full model (or in its place, with both cores,
    once it stalled: :mod:`~solver.optimize.handover`); once it proves its restricted
    optimum, :func:`~solver.optimize.interval_solve.prove_or_deepen` in the time left."""
    search = search_intervals(best, deadline, cancel, stop, runs, threads=threads)
    if search.restricted is not None and search.restricted.proven:
        prove_or_deepen(best, deadline, cancel, stop, threads=threads)


def _cover_or_improve(
    model: ArrayModel,
    best: Incumbents,
    backend: str,
    deadline: float,
    cancel: Cancel | None,
    stop: Cancel,
) -> None:
    """Prove the incumbent with CP-SAT on covering runs (its restricted optimum is in: this
    makes it a proof for every schedule), or search with more runs per node where that model
    is too large (:func:`~solver.optimize.interval_solve.prove_or_deepen`); the
    neighbourhood search in the time either leaves."""
    prove_or_deepen(best, deadline, cancel, stop)
    _improve(model, best, backend, deadline, cancel, stop)


def _improve(
    model: ArrayModel,
    best: Incumbents,
    backend: str,
    deadline: float,
    cancel: Cancel | None,
    stop: Cancel,
) -> None:
    """The neighbourhood search beside the full model, on a model whose schedules all fit:
    where memory is rounded, the safe rounding (a relaxed model's window would keep finding
    schedules that overrun by a few bytes)."""
    if model.memory.rounding != "safe" and not model.memory.all_exact:
        try:
            model = model.formulation.make(
                model.graph,
                rounding="safe",
                deadline=deadline,
                cancel=stop,
                upper_bound=model.upper_bound,
            )
        except (BuildInterrupted, ModelTooLarge):
            return
    search_windows(model, best, backend, deadline, cancel, stop)


def _mip_start(options: SolveOptions) -> bool:
    """Whether the heuristic start goes to the backend as a MIP start.

    Measured on the bench set (docs/spec-notes.md): given a MIP start, CBC never leaves it
    (its own heuristics stop), so CBC gets none; HiGHS uses one well.
    """
    if options.mip_start is not None:
        return options.mip_start
    return registry.backend(options.backend).mip_start


def _cutoff(options: SolveOptions, best: Incumbents) -> float | None:
    if not options.cutoff or best.timeline is None:
        return None
    return best.timeline.total_ms


CONSTRUCTION_SHARE = 0.6
"""The construction may run until this share of the time limit (the baselines until
:func:`_heuristic_seconds`); on small graphs it ends within a second anyway."""
FIRST_REPAIR_SHARE = 0.85
"""While the construction has no schedule, its repair may run until this share of the time
limit: on an op-level import it is the schedule everything else starts from, and the model
could not be built and searched in the time left anyway (a 5,107-operation tower at 30 s: the
repair takes about 22 s, its model's build and CP-SAT's presolve 19 s). The rest is for
tightening and replaying it (2.6 s there)."""
ALTERNATIVES_SHARE = 0.3
"""Once the construction has a schedule, it repairs another placement only if that would end
within this share of the time limit (judged by its longest repair so far): the rest is the
model's. A 5,107-operation tower's second placement took 16 s for a dearer schedule, and
CP-SAT improved the first one 10 s after its presolve (docs/solver.md, "Time for the model")."""
WIDEN_SHARE = 0.5
"""The first placement is repaired again with the wider greed only if that would end within
this share of the time limit (taken as three times the first repair). More than another
placement gets: on the largest graphs it gains more than the model does in the same time.
A 2,557-op tower at 60 s on a slow evening: first repair 6.4 s, so 19 s judged, which 30 % of
the limit did not allow; the wider repair takes about 15 s there and gives 60.672 ms against
60.928 (docs/solver.md, "A wider repair of the first placement")."""


def _heuristic_seconds(options: SolveOptions) -> float:
    """How long the heuristic start may take: a tenth of the limit, 2 to 10 s."""
    return min(10.0, max(2.0, options.time_limit_s / 10))


def _source_name(schedule: Schedule) -> str:
    return schedule.solver.method if schedule.solver else "a heuristic"


# ----- offloading ----------------------------------------------------------------------------
PAPER_SHARE = 0.5
"""The share of the time limit the paper's model gets first when no start is given: its
schedule (with its neighbourhood search and confirmation in bytes) is never beaten by
offloading's for long, and every one of its schedules is one of the offloading model's."""


def solve_offload(
    graph: Graph,
    options: SolveOptions,
    on_progress: ProgressCallback | None = None,
    cancel: Cancel | None = None,
    start: tuple[Schedule, Timeline] | None = None,
) -> SolveResult:
    """Solve XEngine's MIQP with offloading copies allowed (``SolveOptions.offload``).

    First the paper's model runs for :data:`PAPER_SHARE` of the time limit, unless ``start``
    (a valid schedule and its replay, e.g. the paper's model's result) is given; its best
    schedule is an incumbent here, and every schedule of the paper's model is one of this
    model's (no copies), so the result is never dearer than it. Its bound is not
    offloading's and is not reported.

    Then, like the paper's model (:func:`solve_model`): the offloading formulation
    (:data:`~solver.optimize.formulation.OFFLOADING`) with its neighbourhood search beside
    it (``options.improve``), every schedule replayed, and "optimal" claimed only for an
    optimum that replays at the proven cost. Where memory rows are rounded (very large
    budgets) the relaxed model's optimum is confirmed in bytes, or the safe model searches
    for the rest of the time and the result is "feasible" with the relaxed model's bound
    (docs/spec-notes.md, "Memory in bytes").

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> result = solve_offload(unit_chain(4, budget=4), SolveOptions(time_limit_s=20))
    >>> result.status.value, result.timeline.total_ms
    ('optimal', 11.0)
    """
    begun = start_solve(graph, options, OFFLOAD_METHOD, on_progress, cancel)
    if isinstance(begun, SolveResult):
        return begun
    best = begun.best
    if start is None:
        paper = _papers_model(graph, options, begun.deadline, on_progress, cancel)
        if paper.ok and paper.schedule is not None and paper.timeline is not None:
            best.offer(paper.schedule, paper.timeline, source="the paper's model")
        if cancel is not None and cancel.is_set():
            stopped = replace(begun.base, status=SolveStatus.CANCELLED)
            return best.result(stopped, "cancelled while solving the paper's model")
    else:
        best.offer(*start, source=start[0].solver.method if start[0].solver else "the start")
    return solve_model(begun, OFFLOADING, options, on_progress, cancel)


def _papers_model(
    graph: Graph,
    options: SolveOptions,
    deadline: float,
    on_progress: ProgressCallback | None,
    cancel: Cancel | None,
) -> SolveResult:
    """The paper's model for its share of the time, its progress reported without its bound
    (a bound of the paper's model is none of offloading's: offloading may go below it)."""
    share = max(0.0, deadline - time.monotonic()) * PAPER_SHARE
    if share < 0.5:
        return SolveResult("xengine", SolveStatus.TIME_LIMIT)

    def unbounded(progress: Progress) -> None:
        assert on_progress is not None
        on_progress(replace(progress, bound=None, gap=None))

    return solve_xengine(
        graph,
        replace(options, offload=False, time_limit_s=share),
        unbounded if on_progress is not None else None,
        cancel,
    )


# ----- warm start ----------------------------------------------------------------------------
def best_baseline(
    graph: Graph,
    deadline: float | None = None,
    tried: tuple[Schedule, Timeline] | None = None,
) -> tuple[Schedule, Timeline] | None:
    """The cheapest fitting baseline (single-device ones and the greedy heterogeneous one);
    past ``deadline`` (a ``time.monotonic()`` instant) no further baseline is tried.
    ``tried``: a checkpoint-all schedule already replayed (not built again for its device)."""
    best: tuple[Schedule, Timeline] | None = tried
    greedy = best_heterogeneous(graph)
    if greedy.schedule is not None and greedy.timeline is not None:
        if best is None or greedy.timeline.total_ms < best[1].total_ms:
            best = (greedy.schedule, greedy.timeline)
    done = _source_name(tried[0]) if tried is not None else None
    for device in graph.devices:
        if deadline is not None and time.monotonic() > deadline:
            break
        candidates = []
        if done != f"checkpoint-all:{device.name}":
            schedule = checkpoint_all(graph, device.name)
            candidates.append((schedule, simulate(graph, schedule)))
        greedy = chen_greedy(graph, device.name)
        if greedy.schedule is not None and greedy.timeline is not None:
            candidates.append((greedy.schedule, greedy.timeline))
        for schedule, timeline in candidates:
            if timeline.valid and (best is None or timeline.total_ms < best[1].total_ms):
                best = (schedule, timeline)
    return best
