"""Explaining a replayed schedule one operation at a time (docs/model.md section 2).

The step-through panel, the graph view's node colours, the Gantt tooltips and the R/S matrices all
ask the same questions of a schedule: what is in memory while operation ``j`` runs, why is this
node computed again, what did it copy. This module answers them from the schedule and the
simulator's :class:`~solver.execution.simulate.Timeline` only (never from solver variables), so that
every view tells the same story as the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule
from solver.document.units import format_ms, format_size
from solver.execution.simulate import OpEvent, Timeline

__all__ = [
    "RESIDENT",
    "COMPUTING",
    "TRANSFERRED",
    "FREED",
    "StepState",
    "StageMatrices",
    "state_at",
    "explain_op",
    "recompute_reason",
    "stage_matrices",
]

RESIDENT = "resident"
"""The tensor is held on the device while the operation runs."""
COMPUTING = "computing"
"""The operation is producing this tensor on this device."""
TRANSFERRED = "transferred"
"""A copy of the tensor was brought to the device for this operation (it is not kept)."""
FREED = "freed"
"""The tensor was on the device earlier and has been released."""


@dataclass(frozen=True)
class StepState:
    """Memory and meaning of one operation of a timeline.

    ``residency`` has every node of the graph: ``{node_id: {device: status}}``, an empty dict for
    a node not computed yet. ``explanation`` is one sentence a person can read aloud.
    """

    index: int
    op: OpEvent
    residency: Mapping[str, Mapping[str, str]]
    explanation: str


@dataclass(frozen=True)
class StageMatrices:
    """Checkmate's R and S matrices of one device, shape ``(stages, nodes)``.

    ``R[t, i]``: node ``i`` is computed on the device in stage ``t``; ``S[t, i]``: its output is
    resident there at the start of stage ``t`` (model.md section 3).
    """

    device: str
    R: np.ndarray
    S: np.ndarray


@dataclass
class _Trace:
    """Residency replayed up to (not including) one operation; internal to this module."""

    live: dict[str, set[str]]
    seen: dict[str, set[str]]
    dropped: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    """node -> (device, stage, last user or ``""`` when not kept) of its latest release."""
    dropped_at: dict[str, float] = field(default_factory=dict)


def state_at(graph: Graph, schedule: Schedule, timeline: Timeline, index: int) -> StepState:
    """Residency of every tensor and an explanation while operation ``index`` runs.

    ``index`` counts ``timeline.ops`` (the document's step cursor).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.optimize.baselines import checkpoint_all
    >>> from solver.execution.simulate import simulate
    >>> g = unit_chain(1)
    >>> s = checkpoint_all(g, "cpu")
    >>> state = state_at(g, s, simulate(g, s), 1)
    >>> dict(state.residency["n0"]), dict(state.residency["n1"])
    ({'cpu': 'resident'}, {'cpu': 'computing'})
    >>> state.explanation
    'stage 1: compute n1 on cpu (1 ms)'
    """
    event = _event(timeline, index)
    trace = _replay(graph, schedule, timeline, index)
    residency: dict[str, dict[str, str]] = {node.id: {} for node in graph.nodes}
    for device, seen in trace.seen.items():
        for node in seen:
            residency[node][device] = RESIDENT if node in trace.live[device] else FREED
    for node, source in _copies(schedule.operations[index][1]).items():
        residency[node][event.device] = TRANSFERRED
        residency[node].setdefault(source, RESIDENT)
    residency[event.node][event.device] = COMPUTING
    return StepState(index, event, residency, _explain(graph, schedule, timeline, index, trace))


def explain_op(graph: Graph, schedule: Schedule, timeline: Timeline, index: int) -> str:
    """The explanation sentence of operation ``index`` (the same as ``state_at(...).explanation``).

    Examples: ``"stage 3: compute fc2 on gpu (0.5 ms), copying fc1 from cpu (0.67 ms)"``,
    ``"stage 7: recompute conv3 on gpu (1.2 ms) — its output was freed on gpu after conv4 used it
    in stage 4, to stay under 2.0 GiB; keeping it would need 2.3 GiB in stage 5"``.
    """
    _event(timeline, index)
    trace = _replay(graph, schedule, timeline, index)
    return _explain(graph, schedule, timeline, index, trace)


def recompute_reason(graph: Graph, schedule: Schedule, timeline: Timeline, index: int) -> str:
    """Why operation ``index`` computes its node again, or ``""`` for a first computation."""
    event = _event(timeline, index)
    if not event.recompute:
        return ""
    return _why_recompute(graph, timeline, index, _replay(graph, schedule, timeline, index))


def stage_matrices(
    graph: Graph, schedule: Schedule, timeline: Timeline
) -> dict[str, StageMatrices]:
    """R (from the replayed operations) and S (from the keep sets) per device, as booleans.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.optimize.baselines import checkpoint_all
    >>> from solver.execution.simulate import simulate
    >>> g = unit_chain(1)
    >>> s = checkpoint_all(g, "cpu")
    >>> m = stage_matrices(g, s, simulate(g, s))["cpu"]
    >>> m.R.astype(int).tolist(), m.S.astype(int).tolist()
    ([[1, 0, 0], [0, 1, 0], [0, 0, 1]], [[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    """
    n = graph.n
    R = {d.name: np.zeros((n, n), dtype=bool) for d in graph.devices}
    S = {d.name: np.zeros((n, n), dtype=bool) for d in graph.devices}
    for event in timeline.ops:
        R[event.device][event.stage, graph.index[event.node]] = True
    for t, stage in enumerate(schedule.stages[: n - 1]):
        for device, kept in stage.keep.items():
            for node in kept:
                S[device][t + 1, graph.index[node]] = True
    return {d.name: StageMatrices(d.name, R[d.name], S[d.name]) for d in graph.devices}


# ----- replay ---------------------------------------------------------------------------------
def _event(timeline: Timeline, index: int) -> OpEvent:
    if not 0 <= index < len(timeline.ops):
        raise IndexError(f"operation {index} is out of range; the timeline has {len(timeline.ops)}")
    return timeline.ops[index]


def _replay(graph: Graph, schedule: Schedule, timeline: Timeline, stop: int) -> _Trace:
    """Replay residency like the simulator (model.md §2 rules 2 and 5) up to operation ``stop``."""
    names = [d.name for d in graph.devices]
    trace = _Trace({d: set() for d in names}, {d: set() for d in names})
    operations = schedule.operations
    stage = 0
    for j, event in enumerate(timeline.ops[: stop + 1]):
        while stage < event.stage:
            _end_stage(trace, schedule, stage, event.start)
            stage += 1
        if j == stop:
            break
        trace.live[event.device].add(event.node)
        trace.seen[event.device].add(event.node)
        for node in _copies(operations[j][1]):
            trace.seen[event.device].add(node)
        for device, node in event.freed:
            trace.live[device].discard(node)
            trace.dropped[node] = (device, event.stage, event.node)
            trace.dropped_at[node] = event.end
    return trace


def _end_stage(trace: _Trace, schedule: Schedule, stage: int, now: float) -> None:
    for device, live in trace.live.items():
        kept = schedule.stages[stage].kept_on(device)
        for node in sorted(live - kept):
            trace.dropped[node] = (device, stage, "")
            trace.dropped_at[node] = now
        trace.live[device] = set(kept)


def _copies(op: Operation) -> dict[str, str]:
    """Inputs that ``op`` copies from another device: ``{node: source}``."""
    return {node: source for node, source in op.inputs.items() if source != op.device}


# ----- sentences ------------------------------------------------------------------------------
def _explain(graph: Graph, schedule: Schedule, timeline: Timeline, index: int, trace) -> str:
    event = timeline.ops[index]
    verb = "recompute" if event.recompute else "compute"
    text = (
        f"stage {event.stage}: {verb} {event.node} on {event.device} ({format_ms(event.duration)})"
    )
    copies = [
        tr
        for tr in timeline.transfers
        if tr.stage == event.stage and tr.consumer == event.node and tr.target == event.device
    ]
    by_source: dict[str, list] = {}
    for tr in sorted(copies, key=lambda tr: tr.start):
        by_source.setdefault(tr.source, []).append(tr)
    parts = [
        f"{_join([tr.tensor for tr in group])} from {source} "
        f"({format_ms(sum(tr.end - tr.start for tr in group))})"
        for source, group in by_source.items()
    ]
    if parts:
        text += ", copying " + _join(parts)
    if event.workspace:
        text += f", with a workspace of {format_size(event.workspace)} while it runs"
    if event.recompute:
        text += " — " + _why_recompute(graph, timeline, index, trace)
    return text


def _why_recompute(graph: Graph, timeline: Timeline, index: int, trace: _Trace) -> str:
    event = timeline.ops[index]
    elsewhere = [d for d, live in trace.live.items() if event.node in live and d != event.device]
    if elsewhere:
        return _resident_elsewhere(graph, event, elsewhere[0])
    if event.node not in trace.dropped:
        return "its output is not resident anywhere"
    device, stage, user = trace.dropped[event.node]
    freed = (
        f"its output was freed on {device} after {user} used it in stage {stage}"
        if user
        else f"its output was not kept on {device} after stage {stage}"
    )
    pressure = _pressure(graph, timeline, event, device, trace.dropped_at[event.node])
    if pressure is None:
        return freed
    need, budget, when, binding = pressure
    text = (
        f"{freed}, to stay under {format_size(budget)}; keeping it would need "
        f"{format_size(need)} in stage {when}"
    )
    return text + binding


def _resident_elsewhere(graph: Graph, event: OpEvent, source: str) -> str:
    """The tensor is alive on another device: say what recomputing and copying would cost."""
    k = graph.index[event.node]
    copy = [
        graph.transfer_ms(event.node, graph.nodes[u].id, source, event.device)
        for u in graph.users[k]
    ]
    copy_ms = min(copy, default=float("inf"))
    if not np.isfinite(copy_ms):
        return f"its output is on {source}, and there is no link {source} -> {event.device}"
    return (
        f"its output is on {source}; recomputing it here takes {format_ms(event.duration)}, "
        f"copying it would take {format_ms(copy_ms)}"
    )


def _pressure(
    graph: Graph, timeline: Timeline, event: OpEvent, device: str, since: float
) -> tuple[int, int, int, str] | None:
    """Peak need if the tensor had stayed on ``device`` from ``since`` until ``event``, when it
    breaks the budget: ``(bytes needed, budget, stage of the peak, what binds)``, the last a
    clause naming the workspace of the operation running at the peak when there is one (the
    bytes that bind are then that operation's transient memory, not a tensor); otherwise
    ``None``."""
    curve = timeline.memory[device]
    first = max(int(np.searchsorted(curve.times, since, side="right")) - 1, 0)
    last = int(np.searchsorted(curve.times, event.start, side="left"))
    window = curve.bytes[first:last]
    if window.size == 0:
        return None
    j = first + int(np.argmax(window))
    need = int(curve.bytes[j]) + int(graph.output_bytes[graph.index[event.node]])
    budget = int(timeline.activation_budgets[device])
    if need <= budget:
        return None
    time = float(curve.times[j])
    binding = ""
    workspace = int(curve.workspace[j])
    if workspace:
        starting = [op.node for op in timeline.ops if op.device == device and op.start == time]
        running = starting[-1] if starting else ""  # the step's last writer
        binding = f", {format_size(workspace)} of it the workspace of {running or 'an operation'}"
    return need, budget, _stage_at(timeline, time), binding


def _stage_at(timeline: Timeline, time: float) -> int:
    starts = [op.start for op in timeline.ops]
    j = max(int(np.searchsorted(starts, time, side="right")) - 1, 0)
    return timeline.ops[j].stage


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]
