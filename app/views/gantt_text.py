"""The words of the Gantt chart: its one-line summary and its hover texts (rich text)."""

from __future__ import annotations

import html

from PySide6.QtGui import QColor

from app.theme import Colors
from app.views.gantt_lanes import LaneTable, TimelineMemo, timeline_total
from solver.document.units import format_ms, format_size
from solver.execution.simulate import OpEvent, TransferEvent
from solver.optimize.solve import SolveResult

__all__ = [
    "compared_text",
    "is_offloading",
    "result_label",
    "summary_html",
    "op_tooltip",
    "transfer_tooltip",
    "legend_html",
    "range_totals",
]


def is_offloading(result: SolveResult) -> bool:
    """Whether ``result`` came from the MIQP with offloading allowed (``solve --offload``)."""
    return result.method.endswith("+offload")


_SUMS = TimelineMemo(lambda t: (t.compute_ms, t.transfer_ms, t.recomputations, t.recompute_ms))
"""The header's sums over a timeline's events, once per timeline (the header is rewritten on
every redraw: a theme, an overlay, the next incumbent's first draw)."""


def summary_html(result: SolveResult | None, colors: Colors, provisional: bool = False) -> str:
    """Method, total time and where it goes: compute, transfers, recomputations.

    A ``provisional`` result (a running solve's incumbent) says so first, in the cursor colour,
    so that nobody mistakes the best-so-far for the answer.
    """
    timeline = result.timeline if result is not None else None
    if result is None or timeline is None:
        return "<i>No schedule yet: solve the graph to see its timeline here.</i>"
    parts = []
    if provisional:  # short: at 1280x720 a third line took the chart's time axis
        parts.append(
            f'<span style="color:{colors.cursor}"><b>provisional</b> '
            f"({result.seconds:.1f} s in, still solving)</span>"
        )
    method = f"<b>{html.escape(result.method.removesuffix('+offload'))}</b>"
    if is_offloading(result):
        copies = sum(1 for tr in timeline.transfers if tr.offload)
        method += f" with offloading ({copies} offloading copies)"
    compute, transfer, recomputations, recompute = _SUMS(timeline)
    parts += [method, f"<b>{format_ms(timeline_total(timeline))}</b> total"]
    if timeline.transfers:  # without transfers, compute is the total
        parts += [
            f"compute {format_ms(compute)}",
            f"transfers {format_ms(transfer)} ({len(timeline.transfers)})",
        ]
    else:
        parts.append("no transfers")
    parts.append(f"{recomputations} recomputations ({format_ms(recompute)})")
    text = " · ".join(parts)
    if not timeline.valid:
        violation = html.escape(str(timeline.violation))
        text += f' · <span style="color:{colors.cursor}">invalid: {violation}</span>'
    return text


def result_label(result: SolveResult) -> str:
    """A stored result as the comparison lists it: method, memory limits, total time."""
    limits = ""
    if result.schedule is not None:
        limits = ", ".join(
            f"{d} {format_size(b)}" for d, b in sorted(result.schedule.memory_limits.items())
        )
    total = format_ms(timeline_total(result.timeline)) if result.timeline is not None else "-"
    return " \u00b7 ".join(p for p in (result.method, limits, total) if p)


def compared_text(shown: SolveResult, other: SolveResult) -> str:
    """The header's note on an overlaid schedule: what it is and how the one on display
    compares (rich text)."""
    if shown.timeline is None or other.timeline is None:
        return ""
    a, b = timeline_total(shown.timeline), timeline_total(other.timeline)
    change = f"{(a - b) / b:+.1%}" if b > 0 else ""
    return (
        f"<i>overlaid (lower half of each lane): {html.escape(result_label(other))}; this one "
        f"{change}</i>"
    )


def op_tooltip(op: OpEvent, operator: str, budget: int, reason: str) -> str:
    """Node, kind, stage, device, times and memory of one operation, and why it is a
    recomputation when it is one (``reason`` from
    :func:`solver.execution.explain.recompute_reason`)."""
    what = op.kind + (f" ({html.escape(operator)})" if operator else "")
    lines = [
        f"<b>{html.escape(op.node)}</b> · {what}"
        + (" · <i>recomputation</i>" if op.recompute else ""),
        f"stage {op.stage} · {op.device} · start {format_ms(op.start)} · "
        f"duration {format_ms(op.duration)}",
        f"activations on {op.device}: {format_size(op.memory)} of the {format_size(budget)} "
        "activation budget",
    ]
    if op.recompute:
        lines.append("recomputed: " + html.escape(reason))
    return "<br>".join(lines)


def transfer_tooltip(tr: TransferEvent) -> str:
    """What a copy moves, between which devices, for which operation (or, for an offloading
    copy, that it is kept on its target)."""
    if tr.offload:
        return (
            f"<b>offload of {html.escape(tr.tensor)}</b> {tr.source} → {tr.target}, kept "
            f"there<br>stage {tr.stage} (end) · start {format_ms(tr.start)} · duration "
            f"{format_ms(tr.end - tr.start)} · {format_size(tr.bytes)}"
        )
    return (
        f"<b>copy of {html.escape(tr.tensor)}</b> {tr.source} → {tr.target}, "
        f"for {html.escape(tr.consumer)}<br>stage {tr.stage} · start "
        f"{format_ms(tr.start)} · duration {format_ms(tr.end - tr.start)} · "
        f"{format_size(tr.bytes)}"
    )


def legend_html(colors: Colors, offload: bool = False) -> str:
    """The colour key; offloading copies are listed only when the timeline has some."""
    swatch = '<span style="color:{c}; font-size:14px">{g}</span>&nbsp;{t}'
    items = [(colors.kinds[k], "\u25a0", k) for k in ("forward", "loss", "backward")]
    items += [(colors.kinds["forward"], "\u25a8", "recompute")]
    items += [(colors.transfer, "\u25a0", "transfer")]
    if offload:
        items.append((QColor(colors.transfer).darker(140).name(), "\u25a9", "offload (kept)"))
    return " &nbsp; ".join(swatch.format(c=c, g=g, t=t) for c, g, t in items)


def range_summary(table: LaneTable, t0: float, t1: float) -> str:
    """The one line under the chart for a measured range: its span and each used lane's busy
    share, short enough for the tool row at 1280x720 (:func:`range_totals` is the tooltip)."""
    span = t1 - t0
    shares = [
        f"{lane} {table.busy(lane, t0, t1) / span:.0%}"
        for lane in table.lanes
        if " \u2192 " not in lane or table.is_used(lane)
    ]
    return f"{format_ms(t0)}\u2013{format_ms(t1)} ({format_ms(span)}) busy: " + ", ".join(shares)


def range_totals(table: LaneTable, t0: float, t1: float) -> str:
    """Busy and idle time per lane within ``[t0, t1]`` (plain text); unused links say nothing."""
    span = t1 - t0
    parts = [f"{format_ms(t0)}\u2013{format_ms(t1)} ({format_ms(span)}):"]
    for lane in table.lanes:
        if " \u2192 " in lane and not table.is_used(lane):
            continue
        busy = table.busy(lane, t0, t1)
        parts.append(
            f"{lane} busy {format_ms(busy)} ({busy / span:.0%}), idle {format_ms(span - busy)}"
        )
    return " \u00b7 ".join(parts)
