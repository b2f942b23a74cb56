"""The Gantt chart's table of lanes and bars, built once per timeline; no Qt items.

One lane per device and, below it, one lane per outgoing device link (``"src → dst"``). Each
lane's bars are sorted by start, with their starts and ends as arrays, so hit-testing, busy
time over a range and a node's bars are array look-ups instead of walks over the timeline.

A running solve puts a new 5,000-operation timeline on display up to ten times a second, so
the table is built from arrays (one pass over the operations, the sorting in numpy) and its
:class:`Bar` objects are made only when one is asked for; :meth:`LaneTable.of` keeps the
tables of the last few timelines, so a redraw of the same timeline (a theme, an overlay, a
measured run) does not build it again (``bench/draw.py --stream``, issue 20).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

import numpy as np

from app.views.concurrent_source import timeline_end
from app.views.timeline_nav import busy_time
from solver.document.graph import Graph
from solver.execution.simulate import Timeline

__all__ = [
    "Bar", "BarArrays", "LaneTable", "TimelineMemo", "lane_names", "link_lane", "timeline_extent",
    "timeline_total",
]  # fmt: skip

T = TypeVar("T")

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


class TimelineMemo(Generic[T]):
    """``memo(timeline)``: ``compute(timeline)``, kept for the last ``size`` timeline objects.

    Keyed by identity (a timeline is immutable, so whatever is derived from it stays right
    while it lives) and held weakly; a value that holds its timeline keeps it alive until
    ``size`` newer ones pushed it out.

    Examples
    --------
    >>> calls = []
    >>> memo = TimelineMemo(lambda t: calls.append(t) or len(calls))
    >>> class T: ...
    >>> a, b = T(), T()
    >>> memo(a), memo(b), memo(a), len(calls)
    (1, 2, 1, 2)
    """

    def __init__(self, compute: Callable[[Timeline], T], size: int = 4) -> None:
        self._compute = compute
        self._size = size
        self._entries: list[tuple[weakref.ref, T]] = []

    def __call__(self, timeline: Timeline) -> T:
        for ref, value in self._entries:
            if ref() is timeline:
                return value
        value = self._compute(timeline)
        self._entries = [(r, v) for r, v in self._entries if r() is not None][-self._size + 1 :]
        self._entries.append((weakref.ref(timeline), value))
        return value


@dataclass(frozen=True)
class BarArrays:
    """Every bar of one timeline as arrays: operations first (``what`` 0, ``index`` into
    ``timeline.ops``), then transfers (``what`` 1, into ``timeline.transfers``), with each
    operation's kind and recompute flag and each transfer's offload flag (the layers' split).
    """

    what: np.ndarray
    index: np.ndarray
    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    """Per bar: the operation's kind (``""`` for a transfer)."""
    flag: np.ndarray
    """Per bar: an operation's ``recompute``, a transfer's ``offload``."""
    ops: int
    """How many of the bars are operations (the first ones)."""


def bar_arrays(lane_of: dict[str, int], timeline: Timeline | None) -> BarArrays:
    """The bars of ``timeline`` on the lanes ``lane_of`` (one pass over its events)."""
    ops = timeline.ops if timeline is not None else ()
    transfers = timeline.transfers if timeline is not None else ()
    n, m = len(ops), len(transfers)
    lanes = [lane_of[op.device] for op in ops]
    lanes += [lane_of[link_lane(tr.source, tr.target)] for tr in transfers]
    starts = [op.start for op in ops] + [tr.start for tr in transfers]
    ends = [op.end for op in ops] + [tr.end for tr in transfers]
    kinds = [op.kind for op in ops] + [""] * m
    flags = [op.recompute for op in ops] + [tr.offload for tr in transfers]
    return BarArrays(
        what=np.concatenate([np.zeros(n, dtype=np.int8), np.ones(m, dtype=np.int8)]),
        index=np.concatenate([np.arange(n), np.arange(m)]).astype(np.intp),
        lane=np.array(lanes, dtype=np.intp),
        start=np.array(starts, dtype=float),
        end=np.array(ends, dtype=float),
        kind=np.array(kinds, dtype=object),
        flag=np.array(flags, dtype=bool),
        ops=n,
    )


class LaneBars(Sequence[Bar]):
    """The bars of one lane, sorted by start: each :class:`Bar` is made when it is read."""

    def __init__(self, table: LaneTable, order: np.ndarray, lane: int) -> None:
        self._table = table
        self._order = order
        """Positions in the table's :class:`BarArrays` of this lane's bars, by start."""
        self._lane = lane

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, k: int) -> Bar: ...

    @overload
    def __getitem__(self, k: slice) -> list[Bar]: ...

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self._table.bar(int(p)) for p in self._order[k]]
        return self._table.bar(int(self._order[k]))

    def __iter__(self) -> Iterator[Bar]:
        return (self._table.bar(int(p)) for p in self._order)


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
        self.timeline = timeline
        self.lane_of = {name: j for j, name in enumerate(lanes)}
        self.is_link = np.array([" \u2192 " in name for name in lanes], dtype=bool)
        self.arrays = bar_arrays(self.lane_of, timeline)
        arrays = self.arrays
        by_start = np.argsort(arrays.start, kind="stable")  # ties: operations, then copies
        lane_sorted = arrays.lane[by_start]
        self.rows: list[tuple[np.ndarray, np.ndarray, LaneBars]] = []
        for lane in range(len(lanes)):
            order = by_start[lane_sorted == lane]
            self.rows.append((arrays.start[order], arrays.end[order], LaneBars(self, order, lane)))
        self._by_node: dict[str, list[int]] | None = None

    @classmethod
    def of(cls, lanes: tuple[str, ...], timeline: Timeline | None) -> LaneTable:
        """The table of ``timeline`` on ``lanes``, built once for the last few timelines."""
        if timeline is None:
            return cls(lanes, None)
        tables = _TABLES(timeline)  # by lanes: the same timeline on another graph's lanes
        table = tables.get(lanes)
        if table is None:
            table = tables[lanes] = cls(lanes, timeline)
        return table

    def bar(self, position: int) -> Bar:
        """The bar at ``position`` of :attr:`arrays`."""
        arrays, timeline = self.arrays, self.timeline
        assert timeline is not None  # an empty table has no positions
        index = int(arrays.index[position])
        if arrays.what[position] == 0:
            op = timeline.ops[index]
            return Bar("op", index, int(arrays.lane[position]), op.start, op.end, op.node)
        tr = timeline.transfers[index]
        return Bar("transfer", index, int(arrays.lane[position]), tr.start, tr.end, tr.tensor)

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
        """Every bar of ``node`` (its operations and copies of its tensor), lane by lane."""
        if node is None or self.timeline is None:
            return []
        if self._by_node is None:  # once per table, at the first selection or hover
            timeline = self.timeline
            names = [op.node for op in timeline.ops] + [tr.tensor for tr in timeline.transfers]
            by_node: dict[str, list[int]] = {}
            for _, _, row in self.rows:
                for position in row._order.tolist():
                    by_node.setdefault(names[position], []).append(position)
            self._by_node = by_node
        return [self.bar(p) for p in self._by_node.get(node, ())]

    def busy(self, lane: str, t0: float, t1: float) -> float:
        """Milliseconds lane ``lane`` is busy within ``[t0, t1]``."""
        starts, ends, _ = self.rows[self.lanes.index(lane)]
        return busy_time(starts, ends, t0, t1)

    def is_used(self, lane: str) -> bool:
        """Whether any bar is drawn on ``lane``."""
        return bool(len(self.rows[self.lanes.index(lane)][0]))


_TABLES: TimelineMemo[dict[tuple[str, ...], LaneTable]] = TimelineMemo(lambda timeline: {})
"""The tables of the last few timelines drawn (each holds its timeline: at most 4 kept)."""

timeline_total: TimelineMemo[float] = TimelineMemo(lambda timeline: timeline.total_ms)
"""``timeline.total_ms`` once per timeline: a sum over every event that the header, the labels,
the compare box and the memory plots each asked for again on every incumbent."""
_extent: TimelineMemo[float] = TimelineMemo(timeline_end)


def timeline_extent(timeline: Timeline | None) -> float:
    """:func:`~app.views.concurrent_source.timeline_end` (the x extent of a view drawing
    ``timeline``), once per timeline."""
    return _extent(timeline) if timeline is not None else timeline_end(None)
