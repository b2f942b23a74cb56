"""The schedule on the concurrent timeline, for the views that can draw either (issue 12).

:class:`ConcurrentSource` is a timeline source for :meth:`GanttView.set_timeline_source` and
:meth:`MemoryView.set_timeline_source`: it lays the document's result out with devices and
links in parallel (:func:`solver.execution.concurrent.concurrent_layout`) and remembers the
layout of the result on display, so both views and the makespan label share one computation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.views.plotting import has_replay
from solver.errors import XEngineError
from solver.execution.concurrent import ConcurrentLayout, concurrent_layout
from solver.execution.simulate import Timeline, effective_graph

if TYPE_CHECKING:
    from app.document import Document

__all__ = ["ConcurrentSource", "timeline_end"]


def timeline_end(timeline: Timeline | None) -> float:
    """When the last operation or copy ends (1 ms for an empty timeline).

    On the serial timeline this is the total cost; on the concurrent one, the makespan
    (``ConcurrentLayout.makespan_ms``): the x extent of a view drawing it.

    >>> timeline_end(None)
    1.0
    """
    if timeline is None or not timeline.ops:
        return 1.0
    ends = [op.end for op in timeline.ops] + [tr.end for tr in timeline.transfers]
    return max(ends)


class ConcurrentSource:
    """``source(document)``: the concurrent timeline of the result on display.

    A schedule that does not replay (or a layout that cannot proceed) has no concurrent
    timeline: the source then returns the serial one, and :meth:`layout` returns ``None``.
    """

    def __init__(self) -> None:
        self._for: tuple[object, object] = (None, None)
        self._layout: ConcurrentLayout | None = None

    def __call__(self, document: Document) -> Timeline | None:
        layout = self.layout(document)
        return layout.timeline if layout is not None else document.timeline

    def layout(self, document: Document) -> ConcurrentLayout | None:
        """The concurrent layout of the result on display, computed once per result."""
        result, graph = document.result, document.graph
        timeline = result.timeline if result is not None else None
        if self._for[0] is not timeline or self._for[1] is not graph:
            self._for, self._layout = (timeline, graph), None
            if timeline is not None and timeline.valid and has_replay(result):
                schedule = result.schedule
                try:
                    self._layout = concurrent_layout(
                        effective_graph(graph, schedule), schedule, timeline
                    )
                except XEngineError:  # e.g. a layout that cannot proceed: draw serially
                    self._layout = None
        return self._layout
