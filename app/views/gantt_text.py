"""The words of the Gantt chart: its one-line summary and its hover texts (rich text)."""

from __future__ import annotations

import html

from app.theme import Colors
from solver.document.units import format_ms, format_size
from solver.execution.simulate import OpEvent, TransferEvent
from solver.optimize.solve import SolveResult

__all__ = ["summary_html", "op_tooltip", "transfer_tooltip"]


def summary_html(result: SolveResult | None, colors: Colors, provisional: bool = False) -> str:
    """Method, total time and where it goes: compute, transfers, recomputations.

    A ``provisional`` result (a running solve's incumbent) says so first, in the cursor colour,
    so that nobody mistakes the best-so-far for the answer.
    """
    timeline = result.timeline if result is not None else None
    if result is None or timeline is None:
        return "<i>No schedule yet: solve the graph to see its timeline here.</i>"
    parts = []
    if provisional:
        parts.append(
            f'<span style="color:{colors.cursor}"><b>provisional</b>: best found after '
            f"{result.seconds:.1f} s, still solving</span>"
        )
    parts += [
        f"<b>{html.escape(result.method)}</b>",
        f"<b>{format_ms(timeline.total_ms)}</b> total",
        f"compute {format_ms(timeline.compute_ms)}",
        f"transfers {format_ms(timeline.transfer_ms)} ({len(timeline.transfers)})",
        f"{timeline.recomputations} recomputations ({format_ms(timeline.recompute_ms)})",
    ]
    text = " · ".join(parts)
    if not timeline.valid:
        violation = html.escape(str(timeline.violation))
        text += f' · <span style="color:{colors.cursor}">invalid: {violation}</span>'
    return text


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
