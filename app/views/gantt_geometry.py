"""Pure geometry of the Gantt chart, no Qt items.

Flow arrows run from the end of each copy to the start of the operation that consumes it, as
Perfetto links a send to its receive. Hatching segments stand in for the recomputations'
pattern brush in SVG exports, where Qt writes pattern brushes as flat fills.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from app.views.gantt_lanes import TimelineMemo
from solver.execution.simulate import Timeline

__all__ = ["consumer_index", "flow_segments", "hatch_segments"]


def consumer_index(timeline: Timeline) -> list[int | None]:
    """For each transfer, the index in ``timeline.ops`` of the operation that reads the copy.

    The consumer is the operation of the same stage on the transfer's target device that
    computes ``consumer``; ``None`` if the timeline has no such operation.
    """
    where = {(op.stage, op.node, op.device): j for j, op in enumerate(timeline.ops)}
    return [where.get((tr.stage, tr.consumer, tr.target)) for tr in timeline.transfers]


_CONSUMERS: TimelineMemo[list[int | None]] = TimelineMemo(lambda t: consumer_index(t))


def flow_segments(
    timeline: Timeline | None, lane_of: Mapping[str, int], only: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Line segments (``x``, ``y`` in pairs) and arrow tips (``tip_x``, ``tip_y``).

    Each segment runs from a transfer's end on its link lane to its consumer's start on the
    device lane. ``only`` keeps the flows of one tensor or consumer node (the selection).
    """
    if timeline is None or not timeline.transfers:
        empty = np.zeros(0)
        return empty, empty, empty, empty
    xs: list[float] = []
    ys: list[float] = []
    consumers = _CONSUMERS(timeline)  # once per timeline: flows are redrawn per selection
    for tr, j in zip(timeline.transfers, consumers, strict=True):
        link = lane_of.get(f"{tr.source} \u2192 {tr.target}")
        if j is None or link is None or tr.target not in lane_of:
            continue
        if only is not None and only not in (tr.tensor, tr.consumer):
            continue
        op = timeline.ops[j]
        xs += [tr.end, op.start]
        ys += [float(link), float(lane_of[tr.target])]
    x, y = np.array(xs, dtype=float), np.array(ys, dtype=float)
    return x, y, x[1::2].copy(), y[1::2].copy()


def hatch_segments(
    rects: np.ndarray, x_range: tuple[float, float], px: float, py: float, spacing: float
) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal line segments (x, y pairs) hatching each ``(x0, width, y_centre, height)`` rect.

    Lines run at 45 degrees *on screen* (``px``, ``py``: data units per pixel), ``spacing``
    pixels apart, clipped to each rect analytically (no clip paths, which SVG viewers handle
    unevenly). Rects outside ``x_range`` or narrower than two pixels are skipped.

    >>> x, y = hatch_segments(np.array([[0.0, 4.0, 0.0, 2.0]]), (0, 10), 1.0, 1.0, 2.0)
    >>> len(x) // 2, float(x.min()), float(x.max()), float(y.min()), float(y.max())
    (3, 0.0, 4.0, -1.0, 1.0)
    """
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    lo, hi = x_range
    for left, width, centre, height in rects:
        if width / px < 2 or left > hi or left + width < lo:
            continue
        # in pixel units: the rect [a0, a1] x [b0, b1], lines a - b = c
        a0, a1 = max(left, lo) / px, min(left + width, hi) / px
        b0, b1 = (centre - height / 2) / py, (centre + height / 2) / py
        cs = np.arange(np.ceil((a0 - b1) / spacing), np.floor((a1 - b0) / spacing) + 1) * spacing
        start = np.maximum(a0, b0 + cs)
        end = np.minimum(a1, b1 + cs)
        keep = end > start
        cs, start, end = cs[keep], start[keep], end[keep]
        xs.append(np.column_stack([start, end]).ravel() * px)
        ys.append(np.column_stack([start - cs, end - cs]).ravel() * py)
    if not xs:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(xs), np.concatenate(ys)
