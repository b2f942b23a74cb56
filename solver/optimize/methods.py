"""Every way to schedule a graph, behind one function (docs/formats.md ``--method``).

Method names: ``xengine`` (the MIQP over all devices), ``greedy`` (heterogeneous heuristics:
cheapest fitting device without recomputation, or Chen's checkpointing over a placement),
``checkmate`` (the same model on each single device, the best one wins), ``checkpoint-all``,
``chen-sqrtn``, ``chen-greedy``; a single-device method may name its device, e.g.
``checkmate:gpu``. ``overlap`` (solver/optimize/overlap.py) starts from XEngine's and greedy's
schedules and minimises the concurrent makespan (devices and links in parallel) by local
search, taking up to twice the time limit (the MIQP, then the search).
Every result has been replayed by the simulator, and :func:`compare` lines them up against
the best single device, XEngine's claim.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from solver.document.graph import Graph
from solver.document.schedule import Schedule, SolverInfo
from solver.errors import XEngineError
from solver.execution.simulate import simulate
from solver.optimize.baselines import BaselineResult, checkpoint_all, chen_greedy, chen_sqrtn
from solver.optimize.bounds import explain_infeasible
from solver.optimize.greedy import best_heterogeneous
from solver.optimize.overlap import solve_overlap
from solver.optimize.solve import ProgressCallback, SolveOptions, SolveResult, solve_xengine
from solver.status import SolveStatus

__all__ = [
    "METHODS",
    "METHOD_NAMES",
    "method_label",
    "OFFLOAD_METHODS",
    "SINGLE_DEVICE_METHODS",
    "offload_applies",
    "parse_method",
    "solve",
    "Comparison",
    "compare",
]

METHOD_NAMES = {
    "xengine": "XEngine",
    "greedy": "Greedy",
    "overlap": "Overlap search",
    "checkmate": "Checkmate",
    "checkpoint-all": "Checkpoint all",
    "chen-sqrtn": "Chen \u221an",
    "chen-greedy": "Chen greedy",
}
"""Every method and the name people read for it (the window, the comparison, the explorer)."""
SINGLE_DEVICE_METHODS = ("checkmate", "checkpoint-all", "chen-sqrtn", "chen-greedy")
METHODS = tuple(METHOD_NAMES)
OFFLOAD_METHODS = ("xengine", "overlap")
"""Methods whose answer ``SolveOptions.offload`` changes (the MIQP, and the overlap search that
starts from it); the others ignore the option (a single device has nowhere to offload to)."""


def offload_applies(method: str) -> bool:
    """Whether ``SolveOptions.offload`` changes the answer of ``method`` (``name[:device]``).

    Examples
    --------
    >>> offload_applies("xengine"), offload_applies("overlap"), offload_applies("checkmate:gpu")
    (True, True, False)
    """
    return method.partition(":")[0] in OFFLOAD_METHODS


def method_label(method: str) -> str:
    """How the window names ``method`` (``name[:device]``): where it runs, in words.

    Examples
    --------
    >>> method_label("xengine"), method_label("checkmate"), method_label("chen-greedy:gpu")
    ('XEngine (all devices)', 'Checkmate (best device)', 'Chen greedy on gpu')
    """
    name, _, device = method.partition(":")
    display = METHOD_NAMES.get(name, name)
    if device:
        return f"{display} on {device}"
    return f"{display} ({'best device' if name in SINGLE_DEVICE_METHODS else 'all devices'})"


def parse_method(graph: Graph, method: str) -> tuple[str, list[str]]:
    """Split ``name[:device]`` into the method and the devices it runs on.

    Raises ``XEngineError`` naming the valid choices for an unknown method or device.
    """
    name, _, device = method.partition(":")
    if name not in METHODS:
        raise XEngineError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if device and device not in graph.device_index:
        raise XEngineError(
            f"unknown device {device!r} in method {method!r}; devices are "
            f"{', '.join(graph.device_index)}"
        )
    if name in ("xengine", "greedy", "overlap") and device:
        raise XEngineError(f"{name} runs on all devices; drop the ':device' part")
    return name, [device] if device else [d.name for d in graph.devices]


def solve(
    graph: Graph,
    method: str = "xengine",
    options: SolveOptions = SolveOptions(),
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> SolveResult:
    """Schedule ``graph`` with ``method`` under its devices' budgets; see the module docstring.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> solve(unit_chain(3, budget=100), "checkpoint-all").timeline.total_ms
    7.0
    """
    name, devices = parse_method(graph, method)
    if name == "xengine":
        return solve_xengine(graph, options, on_progress, cancel)
    if name == "overlap":
        starts = [solve(graph, "xengine", options, on_progress, cancel), solve(graph, "greedy")]
        return solve_overlap(graph, starts, options, cancel)
    if name == "greedy":
        started = time.perf_counter()
        found = best_heterogeneous(graph)
        return _from_baseline(graph, "greedy", found, time.perf_counter() - started)
    results: list[SolveResult] = []
    deadline = time.monotonic() + options.time_limit_s
    for number, device in enumerate(devices):
        if cancel is not None and cancel.is_set():
            break
        left = deadline - time.monotonic()
        if left <= 0 and results:  # the time limit holds for the method, not each device
            skipped = len(devices) - number
            result = _best(method, results)
            note = f"the time limit ran out before {skipped} of {len(devices)} devices were tried"
            return replace(result, message=f"{result.message}; {note}" if result.message else note)
        share = replace(options, time_limit_s=max(left / (len(devices) - number), 0.05))
        results.append(_single_device(graph, name, device, share, on_progress, cancel))
    return _best(method, results)


def _single_device(graph, name, device, options, on_progress, cancel) -> SolveResult:
    unable = [node.id for node in graph.nodes if device not in node.cost]
    if unable:
        shown = ", ".join(unable[:5]) + (" ..." if len(unable) > 5 else "")
        return SolveResult(
            f"{name}:{device}",
            SolveStatus.INFEASIBLE,
            message=f"{device} cannot run {shown} (no cost given there)",
        )
    if name == "checkmate":
        alone = graph.with_devices([device])
        paper = replace(options, offload=False)  # one device: nowhere to offload to
        result = solve_xengine(alone, paper, on_progress, cancel, method=f"checkmate:{device}")
        if result.schedule is None:
            return result
        schedule = replace(result.schedule, memory_limits=graph.memory_limits)
        return replace(result, schedule=schedule, timeline=simulate(graph, schedule))
    return _baseline(graph, name, device)


def _baseline(graph: Graph, name: str, device: str) -> SolveResult:
    started = time.perf_counter()
    method = f"{name}:{device}"
    if name == "chen-greedy":
        found = chen_greedy(graph, device)
        schedule, timeline, reason = found.schedule, found.timeline, found.reason
    else:
        build = checkpoint_all if name == "checkpoint-all" else chen_sqrtn
        schedule = build(graph, device)
        timeline = simulate(graph, schedule)
        reason = "" if timeline.valid else str(timeline.violation)
    return _from_baseline(
        graph,
        method,
        BaselineResult(schedule, timeline, reason),
        time.perf_counter() - started,
        device,
    )


def _from_baseline(
    graph: Graph, method: str, found: BaselineResult, seconds: float, device: str | None = None
) -> SolveResult:
    schedule, timeline, reason = found.schedule, found.timeline, found.reason
    if schedule is None or timeline is None or not timeline.valid:
        alone = graph.with_devices([device]) if device else graph
        why = explain_infeasible(alone) or reason or "no schedule fits"
        return SolveResult(method, SolveStatus.INFEASIBLE, seconds=seconds, message=why)
    info = SolverInfo(
        method=method,
        backend="heuristic",
        status=SolveStatus.FEASIBLE,
        objective=timeline.total_ms,
        seconds=seconds,
    )
    schedule = replace(schedule, solver=info)
    return SolveResult(
        method,
        SolveStatus.FEASIBLE,
        schedule,
        timeline,
        timeline.total_ms,
        seconds=seconds,
        backend="heuristic",
    )


def _best(method: str, results: list[SolveResult]) -> SolveResult:
    if not results:
        return SolveResult(method, SolveStatus.CANCELLED, message="cancelled before it started")
    valid = [r for r in results if r.ok]
    if valid:
        return min(valid, key=_total_ms)
    messages = "; ".join(f"{r.method}: {r.message or r.status.value}" for r in results)
    status = results[0].status if len({r.status for r in results}) == 1 else SolveStatus.INFEASIBLE
    return SolveResult(method, status, message=messages, seconds=sum(r.seconds for r in results))


@dataclass(frozen=True)
class Comparison:
    """Results of several methods on the same graph and budgets, and XEngine's speedup."""

    results: tuple[SolveResult, ...]

    @property
    def best_single_device(self) -> SolveResult | None:
        """The fastest valid schedule that uses one device only."""
        single = [r for r in self.results if r.ok and len(_devices_used(r.schedule)) <= 1]
        return min(single, key=_total_ms, default=None)

    def speedup(self, result: SolveResult) -> float | None:
        """How many times faster ``result`` is than the best single-device schedule."""
        best = self.best_single_device
        if best is None or not result.ok or _total_ms(result) <= 0:
            return None
        return _total_ms(best) / _total_ms(result)


def _total_ms(result: SolveResult) -> float:
    """The replayed time of a result that is ``ok`` (such a result always carries its replay)."""
    assert result.timeline is not None, result.status
    return result.timeline.total_ms


def _devices_used(schedule: Schedule | None) -> set[str]:
    return {op.device for _, op in schedule.operations} if schedule else set()


def compare(
    graph: Graph,
    options: SolveOptions = SolveOptions(),
    methods: list[str] | None = None,
    on_result: Callable[[SolveResult], None] | None = None,
    cancel: threading.Event | None = None,
) -> Comparison:
    """Solve with each single-device method on each device, then with XEngine.

    ``methods`` defaults to Checkmate, checkpoint-all and Chen sqrt(n) on every device, then
    XEngine. ``on_result`` is called as each result arrives (for a progress view).
    """
    if methods is None:
        methods = [
            f"{name}:{d.name}"
            for name in ("checkmate", "checkpoint-all", "chen-sqrtn")
            for d in graph.devices
        ] + ["xengine"]
    results = []
    for method in methods:
        if cancel is not None and cancel.is_set():
            break
        result = solve(graph, method, options, cancel=cancel)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return Comparison(tuple(results))
