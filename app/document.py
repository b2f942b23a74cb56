"""The one view-model of the window: graph, budgets, results, selection and step cursor.

Views hold a reference to the document and never talk to each other: a selection or cursor
change goes through the document, which tells every view with a past-tense signal. Setters
return early on an equal value, so that views can echo changes without loops.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QObject, Signal

from solver.graph import Graph
from solver.simulate import OpEvent, Timeline
from solver.solve import SolveResult

__all__ = ["Document"]


class Document(QObject):
    """State shared by all panels and views.

    ``result`` is the schedule on display (already replayed by the simulator); ``selection`` a
    node id; ``cursor`` an index into ``result.timeline.ops`` for the step-through.
    """

    graph_changed = Signal()
    """The graph was replaced or edited (results may be stale)."""
    budgets_changed = Signal()
    """A device budget changed."""
    result_changed = Signal()
    """A new result (or none) is on display."""
    selection_changed = Signal()
    """The selected node changed."""
    cursor_changed = Signal()
    """The step-through cursor moved."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._graph: Graph | None = None
        self._result: SolveResult | None = None
        self._selection: str | None = None
        self._cursor: int | None = None

    # ----- graph and budgets ------------------------------------------------------------------
    @property
    def graph(self) -> Graph | None:
        """The current graph; its devices' ``memory`` are the current budgets."""
        return self._graph

    def set_graph(self, graph: Graph | None) -> None:
        if graph is self._graph:
            return
        self._graph = graph
        self._selection = None
        self.graph_changed.emit()
        self.set_result(None)

    @property
    def budgets(self) -> dict[str, int]:
        """Device memory in bytes by device name."""
        return {d.name: d.memory for d in self._graph.devices} if self._graph else {}

    def set_budgets(self, budgets: Mapping[str, int]) -> None:
        if self._graph is None or dict(budgets) == {k: self.budgets[k] for k in budgets}:
            return
        self._graph = self._graph.with_budgets(budgets)
        self.budgets_changed.emit()

    # ----- result, selection, cursor ------------------------------------------------------
    @property
    def result(self) -> SolveResult | None:
        return self._result

    @property
    def timeline(self) -> Timeline | None:
        """The replayed timeline of the result on display, if any."""
        return self._result.timeline if self._result is not None else None

    def set_result(self, result: SolveResult | None) -> None:
        if result is self._result:
            return
        self._result = result
        self._cursor = None
        self.result_changed.emit()
        self.cursor_changed.emit()

    @property
    def selection(self) -> str | None:
        return self._selection

    def set_selection(self, node_id: str | None) -> None:
        if node_id == self._selection:
            return
        self._selection = node_id
        self.selection_changed.emit()

    @property
    def cursor(self) -> int | None:
        return self._cursor

    @property
    def cursor_op(self) -> OpEvent | None:
        """The operation under the step cursor."""
        timeline = self.timeline
        if self._cursor is None or timeline is None or not timeline.ops:
            return None
        return timeline.ops[self._cursor]

    def set_cursor(self, index: int | None) -> None:
        timeline = self.timeline
        if index is not None:
            if timeline is None or not timeline.ops:
                index = None
            else:
                index = min(max(index, 0), len(timeline.ops) - 1)
        if index == self._cursor:
            return
        self._cursor = index
        self.cursor_changed.emit()
