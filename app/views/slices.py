"""The slice table of a measured time range, as Perfetto's area selection gives it: how many
operations and copies of each kind run in the range, and how long, in total, within it.
No Qt here.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.execution.simulate import Timeline

__all__ = ["SliceRow", "slice_rows"]

KIND_ORDER = ("forward", "loss", "backward", "other", "recompute", "transfer", "offload")


@dataclass(frozen=True)
class SliceRow:
    """One kind's slices in the range: how many overlap it, their time within it, the range
    share of that time, and the longest slice's name."""

    kind: str
    count: int
    total_ms: float
    share: float
    longest: str


def slice_rows(timeline: Timeline | None, t0: float, t1: float) -> list[SliceRow]:
    """The kinds with a slice overlapping ``[t0, t1]`` (ms), in a fixed order; a
    recomputation counts as ``recompute``, an offloading copy as ``offload``.

    >>> from solver.document.generators import unit_chain
    >>> from solver.execution.simulate import simulate
    >>> from solver.optimize.baselines import checkpoint_all
    >>> g = unit_chain(2)
    >>> rows = slice_rows(simulate(g, checkpoint_all(g, "cpu")), 0.5, 3.0)
    >>> [(r.kind, r.count, r.total_ms) for r in rows]
    [('forward', 2, 1.5), ('loss', 1, 1.0)]
    """
    if timeline is None or t1 <= t0:
        return []
    found: dict[str, list[tuple[float, str]]] = {}
    for op in timeline.ops:
        inside = min(op.end, t1) - max(op.start, t0)
        if inside > 0 or (op.start == op.end and t0 <= op.start <= t1):
            kind = "recompute" if op.recompute else op.kind
            found.setdefault(kind, []).append((max(inside, 0.0), op.node))
    for tr in timeline.transfers:
        inside = min(tr.end, t1) - max(tr.start, t0)
        if inside > 0:
            kind = "offload" if tr.offload else "transfer"
            found.setdefault(kind, []).append((inside, f"copy {tr.tensor}"))
    span = t1 - t0
    rows = []
    for kind in sorted(found, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else 99):
        slices = found[kind]
        total = sum(t for t, _ in slices)
        longest = max(slices)[1]
        rows.append(SliceRow(kind, len(slices), round(total, 9), total / span, longest))
    return rows
