"""The Gantt chart's table of lanes and bars, built once per timeline; no Qt items.

One lane per device and, below it, one lane per outgoing device link (``"src → dst"``). Each
lane's bars are sorted by start, with their starts and ends as arrays, so hit-testing, busy
time over a range and a node's bars are array look-ups instead of walks over the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.views.timeline_nav import busy_time
from solver.document.graph import Graph
from solver.execution.simulate import Timeline

__all__ = ["Bar", "LaneTable", "lane_names", "link_lane"]

OP_HEIGHT = 0.72
"""Height of an operation's bar, in lanes (also the hit-test tolerance across the lane)."""
TRANSFER_HEIGHT = 0.5
"""Height of a copy's bar on a link lane."""


def link_lane(source: str, target: str) -> str:
    """The name of the lane of copies from ``source`` to ``target``.

    >>> link_lane("gpu", "cpu")
    'gpu → cpu'
    """
    return f"{source} \u2192 {target}"


@dataclass(frozen=True)
class Bar:
    """One drawn bar: an operation (``index`` into ``timeline.ops``) or a transfer (into
    ``timeline.transfers``)."""

    what: str
    index: int
    lane: int
    start: float
    end: float
    node: str


def lane_names(graph: Graph | None, timeline: Timeline | None) -> tuple[str, ...]:
    """Lanes from top to bottom: each device, then its outgoing links (graph order first)."""
    devices = [d.name for d in graph.devices] if graph is not None else []
    if timeline is not None:
        devices += [d for d in timeline.devices if d not in devices]
    pairs = [(lk.source, lk.target) for lk in graph.links] if graph is not None else []
    if timeline is not None:
        pairs += [(t.source, t.target) for t in timeline.transfers]
    lanes: list[str] = []
    for device in devices:
        lanes.append(device)
        lanes += [link_lane(s, t) for s, t in dict.fromkeys(pairs) if s == device]
    return tuple(lanes)


class LaneTable:
    """Lanes and their bars for one timeline (see module docstring).

    Examples
    --------
    >>> table = LaneTable((), None)
    >>> table.lanes, table.bar_at(0.0, 0.0)
    ((), None)
    """

    def __init__(self, lanes: tuple[str, ...], timeline: Timeline | None) -> None:
        self.lanes = lanes
        self.lane_of = {name: j for j, name in enumerate(lanes)}
        self.is_link = np.array([" \u2192 " in name for name in lanes], dtype=bool)
        rows: list[list[Bar]] = [[] for _ in lanes]
        if timeline is not None:
            for j, op in enumerate(timeline.ops):
                lane = self.lane_of[op.device]
                rows[lane].append(Bar("op", j, lane, op.start, op.end, op.node))
            for j, tr in enumerate(timeline.transfers):
                lane = self.lane_of[link_lane(tr.source, tr.target)]
                rows[lane].append(Bar("transfer", j, lane, tr.start, tr.end, tr.tensor))
        self.rows: list[tuple[np.ndarray, np.ndarray, list[Bar]]] = []
        for row in rows:
            row.sort(key=lambda b: b.start)
            starts = np.array([b.start for b in row], dtype=float)
            ends = np.array([b.end for b in row], dtype=float)
            self.rows.append((starts, ends, row))

    def bar_at(self, time: float, lane: float, tolerance: float = 0.0) -> Bar | None:
        """The bar under ``(time, lane)`` in plot coordinates, if any."""
        row = int(round(lane))
        if not 0 <= row < len(self.rows) or abs(lane - row) > OP_HEIGHT / 2:
            return None
        starts, ends, bars = self.rows[row]
        j = int(np.searchsorted(starts, time + tolerance, side="right")) - 1
        for k in (j, j - 1, j + 1):
            if 0 <= k < len(bars) and starts[k] - tolerance <= time <= ends[k] + tolerance:
                return bars[k]
        return None

    def bars_of(self, node: str | None) -> list[Bar]:
        """Every bar of ``node`` (its operations and copies of its tensor)."""
        if node is None:
            return []
        return [bar for _, _, row in self.rows for bar in row if bar.node == node]

    def busy(self, lane: str, t0: float, t1: float) -> float:
        """Milliseconds lane ``lane`` is busy within ``[t0, t1]``."""
        starts, ends, _ = self.rows[self.lanes.index(lane)]
        return busy_time(starts, ends, t0, t1)

    def is_used(self, lane: str) -> bool:
        """Whether any bar is drawn on ``lane``."""
        return bool(len(self.rows[self.lanes.index(lane)][0]))
