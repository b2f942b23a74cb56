"""The makespan label's concurrent layout as a child-process job; no Qt here.

Laying a 5,000-operation schedule out took 0.1 s of pure Python; on a thread of the window
it starved the GUI thread of the GIL (a 0.17 s stall when a solve ended, ``bench/draw.py
--stream``), so it runs in a child (:class:`app.workers.ProcessWorker`). This module imports
only the core, so the child does not import Qt and the views; it sends back three numbers,
not the laid-out timeline.
"""

from __future__ import annotations

from functools import partial

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.errors import XEngineError
from solver.execution.concurrent import concurrent_layout
from solver.execution.simulate import Timeline, effective_graph

__all__ = ["Makespan", "makespan_job"]

Makespan = tuple[float, float, float]
"""(serial ms, concurrent makespan ms, speedup) of a schedule."""


def makespan_job(graph: Graph, schedule: Schedule, timeline: Timeline) -> partial:
    """A :data:`app.solve_process.Job` whose value is the schedule's :data:`Makespan`, or
    ``None`` when it has no concurrent layout (one that cannot proceed)."""
    return partial(_makespan, graph, schedule, timeline)


def _makespan(
    graph: Graph, schedule: Schedule, timeline: Timeline, report, cancel
) -> Makespan | None:
    try:
        layout = concurrent_layout(effective_graph(graph, schedule), schedule, timeline)
    except XEngineError:  # as ConcurrentSource: a layout that cannot proceed is drawn serially
        return None
    return layout.serial_ms, layout.makespan_ms, layout.speedup
