"""Memory per tensor as data: one band per resident tensor per step, and why it is resident.

At each step of a device's :class:`~solver.execution.simulate.MemoryCurve` the resident tensors
are stacked in graph order, topped by the workspace of the operation running then (bytes it
needs only while it runs, no tensor), so the outline of the stack is exactly the memory curve
and each band's height is one tensor's bytes or one workspace. Each band also says how it got
there (its *origin*: computed, recomputed, copied, offloaded here, or a running workspace).
No Qt: the view (:mod:`app.views.tensors`) draws these arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver.document.graph import Graph
from solver.document.units import format_ms, format_size
from solver.execution.simulate import OpEvent, Timeline

__all__ = [
    "ORIGINS",
    "WORKSPACE",
    "EMPTY",
    "Bands",
    "tensor_bands",
    "workspace_at",
    "resident_reason",
    "resident_text",
]

ORIGINS = ("computed", "recomputed", "copied", "offloaded here (kept)", "workspace")
WORKSPACE = 4
"""The origin of a workspace band: its node is the operation running, not a tensor."""


@dataclass(frozen=True)
class Bands:
    """One device's bands: rectangles ``[x0, x0 + width] x [y0, y0 + height]`` (ms, bytes), the
    tensor (node index) and origin (index into :data:`ORIGINS`) of each."""

    x0: np.ndarray
    width: np.ndarray
    y0: np.ndarray
    height: np.ndarray
    node: np.ndarray
    origin: np.ndarray

    def at(self, time: float, level: float) -> int | None:
        """The band under ``(time, level)``, if any (its index)."""
        hit = np.nonzero(
            (self.x0 <= time)
            & (time < self.x0 + self.width)
            & (self.y0 <= level)
            & (level < self.y0 + self.height)
        )[0]
        return int(hit[0]) if len(hit) else None


def tensor_bands(graph: Graph, timeline: Timeline, device: str) -> Bands:
    """Stack the resident tensors of ``device`` at each step of its memory curve.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.optimize.baselines import checkpoint_all
    >>> from solver.execution.simulate import simulate
    >>> g = unit_chain(1)
    >>> s = checkpoint_all(g, "cpu")
    >>> b = tensor_bands(g, simulate(g, s), "cpu")
    >>> [g.nodes[i].id for i in b.node], b.y0.tolist()
    (['n0', 'n0', 'n1', 'n0', 'n1', 'n2'], [0.0, 0.0, 1.0, 0.0, 1.0, 2.0])
    """
    curve = timeline.memory.get(device)
    empty = np.zeros(0)
    if curve is None or len(curve.times) == 0:
        return Bands(empty, empty, empty, empty, empty.astype(int), empty.astype(int))
    ends = np.append(curve.times[1:], max(timeline.total_ms, float(curve.times[-1])))
    origins = _origin_events(timeline, device)
    running = {op.start: op.node for op in timeline.ops if op.device == device}
    x0, width, y0, height, node, origin = [], [], [], [], [], []
    previous: set[str] = set()
    started: dict[str, int] = {}
    for j, names in enumerate(curve.resident):
        level = 0.0
        for name in sorted(names, key=lambda n: graph.index.get(n, -1)):
            k = graph.index.get(name)
            if k is None:
                continue
            if name not in previous:
                started[name] = _origin(origins.get(name, ()), float(curve.times[j]))
            size = float(graph.output_bytes[k])
            x0.append(float(curve.times[j]))
            width.append(float(ends[j] - curve.times[j]))
            y0.append(level)
            height.append(size)
            node.append(k)
            origin.append(started[name])
            level += size
        previous = set(names)
        work = int(curve.workspace[j])
        k = graph.index.get(running.get(float(curve.times[j]), ""))
        if work > 0 and k is not None:
            x0.append(float(curve.times[j]))
            width.append(float(ends[j] - curve.times[j]))
            y0.append(level)
            height.append(float(work))
            node.append(k)
            origin.append(WORKSPACE)
    return Bands(
        np.array(x0), np.array(width), np.array(y0), np.array(height),
        np.array(node, dtype=int), np.array(origin, dtype=int),
    )  # fmt: skip


def resident_reason(graph: Graph, timeline: Timeline, device: str, tensor: str, time: float):
    """Why ``tensor`` is resident on ``device`` at ``time``: the next operation there that reads
    it, a copy that takes it elsewhere, or that it is only kept."""
    k = graph.index[tensor]
    users = {graph.nodes[u].id for u in graph.users[k]}
    for op in timeline.ops:
        if op.end > time and op.device == device and op.node in users:
            if op.start <= time:
                return f"read by {op.node}, running now"
            return f"needed by {op.node} at {format_ms(op.start)}"
    for tr in timeline.transfers:
        if tr.start >= time and tr.source == device and tr.tensor == tensor:
            if tr.offload:
                return f"offloaded to {tr.target} (kept there) at {format_ms(tr.start)}"
            return f"copied to {tr.target} for {tr.consumer} at {format_ms(tr.start)}"
    return "kept (a checkpoint), not read here again"


def _origin_events(timeline: Timeline, device: str) -> dict[str, list[tuple[float, int]]]:
    events: dict[str, list[tuple[float, int]]] = {}
    for op in timeline.ops:
        if op.device == device:
            events.setdefault(op.node, []).append((op.start, 1 if op.recompute else 0))
    for tr in timeline.transfers:
        if tr.target == device:
            events.setdefault(tr.tensor, []).append((tr.start, 3 if tr.offload else 2))
    for value in events.values():
        value.sort()
    return events


def _origin(events, time: float) -> int:
    """The origin of a residency starting at ``time``: the latest event at or before it."""
    found = 0
    for when, what in events:
        if when <= time + 1e-9:
            found = what
        else:
            break
    return found


def resident_text(
    graph: Graph, timeline: Timeline, op: OpEvent, step: int | None, other: Timeline | None
) -> str:
    """What the step cursor shows: the exact set resident on every device when ``op`` starts;
    with ``other``, also what is resident in only one of the two schedules (diff mode)."""
    parts = [f"step {step}: {op.node} on {op.device} \u2014"]
    order = graph.index.get
    for device, curve in timeline.memory.items():
        used, names = curve.during(op)  # a zero-cost op's step has no width: not by time
        listed = ", ".join(sorted(names, key=lambda n: order(n, -1))) or "nothing"
        text = f"{device} holds {listed} ({format_size(used)})"
        work = int(curve.workspace[curve.index_during(op)])
        if work:
            owner = op.node if device == op.device else "the operation running there"
            text = text[:-1] + f", {format_size(work)} of it the workspace of {owner})"
        if other is not None and device in other.memory:
            # the same operation in the other schedule: its first run of this node
            same = next((o for o in other.ops if o.node == op.node), None)
            there_curve = other.memory[device]
            there_used, there = there_curve.during(same) if same else there_curve.at(op.start)
            only_here = sorted(set(names) - set(there), key=lambda n: order(n, -1))
            only_there = sorted(set(there) - set(names), key=lambda n: order(n, -1))
            here_text = ", ".join(only_here) or "none"
            there_text = ", ".join(only_there) or "none"
            text += (
                f" vs {format_size(there_used)} there; only here: {here_text}; "
                f"only there: {there_text}"
            )
        parts.append(text)
    return " ".join(parts[:1]) + " " + "; ".join(parts[1:])


def workspace_at(curve, time: float) -> int:
    """The workspace in use at ``time`` (the step :meth:`MemoryCurve.at` reads)."""
    j = int(np.searchsorted(curve.times, time, side="right")) - 1
    return int(curve.workspace[j]) if 0 <= j < len(curve.workspace) else 0


class _EmptyTimeline:
    memory: dict = {}
    total_ms = 0.0
    ops = ()
    transfers = ()


EMPTY = _EmptyTimeline()
"""A timeline with nothing resident (no schedule, or one of another graph)."""
