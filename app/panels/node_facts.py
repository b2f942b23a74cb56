"""What the inspector says of a selected node besides its editable fields: its properties as
the importer recorded them, and where and why its tensor is resident in the schedule on
display (what the per-tensor view only said on hover). No Qt here.
"""

from __future__ import annotations

from solver.document.graph import Graph
from solver.document.units import format_ms, format_size
from solver.execution.simulate import Timeline

__all__ = ["MAX_SPANS", "properties", "residency"]

MAX_SPANS = 6
"""Residency spans listed per device (the rest are counted)."""


def properties(graph: Graph, node_id: str) -> list[tuple[str, str]]:
    """``(label, value)`` rows: shape, dtype, output bytes, FLOPs, bytes accessed, module path,
    the ATen ops it groups, and its cost on each device.

    >>> from solver.document.generators import unit_chain
    >>> properties(unit_chain(1), "n0")
    [('Output', '1 B (1 bytes)'), ('Cost', 'cpu 1 ms')]
    """
    node = graph.node(node_id)
    extra = node.extra or {}
    rows: list[tuple[str, str]] = []
    shape = extra.get("shape")
    if isinstance(shape, list):
        dtype = extra.get("dtype") or graph.meta.get("dtype", "")
        text = "\u00d7".join(str(d) for d in shape) if shape else "scalar"
        rows.append(("Shape", f"{text} {dtype}".strip()))
    rows.append(("Output", f"{format_size(node.memory)} ({node.memory:,} bytes)"))
    if node.flops:
        rows.append(("FLOPs", _count(node.flops)))
    if node.bytes_accessed:
        rows.append(("Bytes accessed", format_size(int(node.bytes_accessed))))
    module = extra.get("module")
    if module:
        rows.append(("Module", str(module)))
    elif node.kind == "backward" and node.of:
        rows.append(("Gradient of", node.of))
    aten = extra.get("aten")
    if isinstance(aten, list) and aten:
        count = extra.get("aten_ops", len(aten))
        rows.append(("ATen ops", f"{count}: {', '.join(map(str, aten[:8]))}"))
    costs = [
        f"{d.name} {format_ms(node.cost[d.name])}" if d.name in node.cost else f"{d.name} -"
        for d in graph.devices
    ]
    rows.append(("Cost", ", ".join(costs)))
    return rows


def residency(graph: Graph, timeline: Timeline, node_id: str, at: float | None) -> list[str]:
    """Where ``node_id``'s tensor is resident, device by device: each span and why it is held
    then (the next reader there, a copy out, or kept as a checkpoint); with ``at`` (the step
    cursor's time), first what holds it at that moment."""
    from app.views.tensor_bands import resident_reason

    lines: list[str] = []
    if at is not None:
        holders = [d for d, c in timeline.memory.items() if node_id in c.at(at)[1]]
        for device in holders:
            reason = resident_reason(graph, timeline, device, node_id, at)
            lines.append(f"now on {device}: {reason}")
        if not holders:
            lines.append("now: resident nowhere")
    for device, curve in timeline.memory.items():
        spans = _spans(curve, node_id, timeline)
        for start, end in spans[:MAX_SPANS]:
            reason = resident_reason(graph, timeline, device, node_id, start)
            lines.append(f"{device} {format_ms(start)}\u2013{format_ms(end)}: {reason}")
        if len(spans) > MAX_SPANS:
            lines.append(f"{device}: {len(spans) - MAX_SPANS} more spans")
    if not lines:
        lines.append("never resident in this schedule")
    return lines


def _spans(curve, node_id: str, timeline: Timeline) -> list[tuple[float, float]]:
    """The time spans in which ``node_id`` is among ``curve``'s resident tensors."""
    end = max((op.end for op in timeline.ops), default=0.0)
    spans: list[tuple[float, float]] = []
    start = None
    for j, names in enumerate(curve.resident):
        t = float(curve.times[j])
        if node_id in names and start is None:
            start = t
        elif node_id not in names and start is not None:
            spans.append((start, t))
            start = None
    if start is not None:
        spans.append((start, end))
    return spans


def _count(value: float) -> str:
    """A FLOP count with an SI prefix.

    >>> _count(7552892928.0), _count(950.0)
    ('7.55 GFLOP', '950 FLOP')
    """
    for prefix, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.3g} {prefix}FLOP"
    return f"{value:.3g} FLOP"
