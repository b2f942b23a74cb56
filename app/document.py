"""The one view-model of the window: graph, memory limits, results, selection and step cursor.

Views hold a reference to the document and never talk to each other: a selection or cursor
change goes through the document, which tells every view with a past-tense signal. Setters
return early on an equal value, so that views can echo changes without loops.

Edits go through :attr:`Document.undo_stack` (commands in ``app.commands``); results are cached
per (graph structure, method, memory limits) so that undoing an edit or dragging a slider back
shows the schedule already found for that setting.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from app.landmarks import Landmarks, compute_landmarks
from app.project import SolverSettings
from solver.document.graph import Graph
from solver.errors import XEngineError
from solver.execution.simulate import OpEvent, Timeline
from solver.optimize.intervals import DEFAULT_RUNS
from solver.optimize.solve import SolveResult
from solver.status import SolveStatus

__all__ = ["Document", "ResultKey"]

logger = logging.getLogger(__name__)

ResultKey = tuple[int, str, tuple[tuple[str, int], ...]]
"""(structure token, method, sorted memory limits): what a cached result was solved for. The
method reads ``name+offload`` when offloading was allowed, ``+runs3`` under another ``C``:
another model, another answer."""

_CACHEABLE = (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE, SolveStatus.INFEASIBLE)
_tokens = itertools.count(1)


class Document(QObject):
    """State shared by all panels and views.

    ``result`` is the schedule on display (already replayed by the simulator); ``selection`` a
    node id; ``cursor`` an index into ``result.timeline.ops`` for the step-through.
    ``is_provisional`` says the result is a running solve's incumbent, not its answer yet.
    """

    graph_changed = Signal()
    """The graph was replaced or edited (results may be stale)."""
    memory_limits_changed = Signal()
    """A device memory limit changed."""
    result_changed = Signal()
    """A new result (or none) is on display."""
    selection_changed = Signal()
    """The selected node changed."""
    cursor_changed = Signal()
    """The step-through cursor moved."""
    edge_selection_changed = Signal()
    """The selected edge changed (a node selection clears it and vice versa)."""
    settings_changed = Signal()
    """The solver settings (method, backend, limits, auto-solve) changed."""
    file_path_changed = Signal()
    """The project file the document is saved to changed (``None``: not saved yet)."""
    modified_changed = Signal(bool)
    """True when there are edits since the last save or open (the undo stack is not clean)."""
    edit_refused = Signal(str)
    """An edit was refused (e.g. it would make a cycle); carries the core's one-line message."""
    hover_changed = Signal()
    """The node under the mouse changed (in any view); views highlight it lightly."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._graph: Graph | None = None
        self._result: SolveResult | None = None
        self._result_limits: dict[str, int] = {}
        """The limits a result without a schedule was solved for (see ``set_result``)."""
        self._provisional = False
        self._selection: str | None = None
        self._cursor: int | None = None
        self._edge: tuple[str, str] | None = None
        self._hovered: str | None = None
        self._token = next(_tokens)
        self._settings = SolverSettings()
        self._file_path: str | None = None
        self._cache: dict[ResultKey, SolveResult] = {}
        self._landmarks: tuple[int, Landmarks] | None = None
        self.undo_stack = QUndoStack(self)
        """Every edit of graph, devices and memory limits; clean = saved."""
        self.undo_stack.cleanChanged.connect(self._on_undo_stack_clean_changed)

    # ----- graph and memory limits -----------------------------------------------------------
    @property
    def graph(self) -> Graph | None:
        """The current graph; its devices' ``memory`` are the current memory limits."""
        return self._graph

    def set_graph(self, graph: Graph | None) -> None:
        """Show another graph: no selection, no result (see :meth:`_replace_graph`)."""
        if graph is self._graph:
            return
        self._replace_graph(graph, next(_tokens), None, None, None)

    @property
    def memory_limits(self) -> dict[str, int]:
        """Device memory in bytes by device name."""
        return dict(self._graph.memory_limits) if self._graph else {}

    def set_memory_limits(self, limits: Mapping[str, int]) -> None:
        if self._graph is None or dict(limits) == {k: self.memory_limits[k] for k in limits}:
            return
        self._graph = self._graph.with_memory_limits(limits)
        self.memory_limits_changed.emit()

    def landmarks(self) -> Landmarks | None:
        """No-remat peak and lower bounds of the current graph, once per structure (they do
        not depend on the memory limits; views ask on every slider step and incumbent)."""
        if self._graph is None:
            return None
        if self._landmarks is None or self._landmarks[0] != self._token:
            self._landmarks = (self._token, compute_landmarks(self._graph))
        return self._landmarks[1]

    @property
    def structure_token(self) -> int:
        """Identifies the graph's structure (everything but memory limits) for the result cache."""
        return self._token

    def apply_graph(self, graph: Graph, token: int | None = None) -> int:
        """Show an edited graph (for undo commands); return its structure token.

        Unlike :meth:`set_graph` it keeps the selection when the node still exists, and it
        shows a cached result when the restored structure was solved before (undo).
        """
        token = next(_tokens) if token is None else token
        selection = self._selection if self._selection in graph.index else None
        edge = self._edge if self._edge and _has_edge(graph, self._edge) else None
        key = (token, self._settings.method, _memory_limit_items(graph))
        self._replace_graph(graph, token, selection, edge, self._cache.get(key))
        return token

    def _replace_graph(
        self,
        graph: Graph | None,
        token: int,
        selection: str | None,
        edge: tuple[str, str] | None,
        result: SolveResult | None,
    ) -> None:
        """Set graph, selection, result and cursor together, then tell the views.

        Every field is set before the first signal, so a view that reacts to ``graph_changed``
        never sees the new graph next to the old graph's result, selection or cursor.
        """
        old = (self._selection, self._edge, self._result, self._provisional, self._cursor)
        self._token = token
        self._graph = graph
        self._selection, self._edge = selection, edge
        self._result, self._provisional, self._cursor = result, False, None
        self.graph_changed.emit()
        if selection != old[0]:
            self.selection_changed.emit()
        if edge != old[1]:
            self.edge_selection_changed.emit()
        if result is not old[2] or old[3]:
            self.result_changed.emit()
        if result is not old[2] or old[3] or old[4] is not None:
            self.cursor_changed.emit()

    def edit(self, command_type: Callable[..., QUndoCommand], *args: object) -> bool:
        """Build ``command_type(self, *args)`` and push it: the one way views edit.

        An edit the core refuses (a cycle, a node no device can run) is not pushed; its message
        goes out through :attr:`edit_refused` and the method returns False.
        """
        try:
            command = command_type(self, *args)
        except XEngineError as exc:
            logger.info("edit refused: %s", exc)
            self.edit_refused.emit(str(exc))
            return False
        self.undo_stack.push(command)
        return True

    # ----- result, selection, cursor ------------------------------------------------------
    @property
    def result(self) -> SolveResult | None:
        return self._result

    @property
    def timeline(self) -> Timeline | None:
        """The replayed timeline of the result on display, if any."""
        return self._result.timeline if self._result is not None else None

    @property
    def is_provisional(self) -> bool:
        """The result on display is an incumbent of a solve still running (not cached)."""
        return self._provisional

    def set_result(
        self,
        result: SolveResult | None,
        provisional: bool = False,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        """Put ``result`` on display; ``provisional`` marks a running solve's incumbent.

        A provisional result keeps the step cursor when the new incumbent still has that
        operation, so stepping through a live solve is not reset by every improvement.
        ``limits`` are the memory limits ``result`` was solved for, when it has no schedule
        to say so (default: the limits now).
        """
        provisional = provisional and result is not None
        if result is self._result and provisional == self._provisional:
            return
        keep = self._provisional and provisional and self._cursor is not None
        self._result = result
        self._result_limits = dict(limits) if limits is not None else self.memory_limits
        self._provisional = provisional
        ops = result.timeline.ops if result is not None and result.timeline is not None else ()
        self._cursor = self._cursor if keep and self._cursor < len(ops) else None
        self.result_changed.emit()
        self.cursor_changed.emit()

    @property
    def selection(self) -> str | None:
        return self._selection

    def set_selection(self, node_id: str | None) -> None:
        if node_id == self._selection:
            return
        self._selection = node_id
        if node_id is not None:
            self.set_selected_edge(None)
        self.selection_changed.emit()

    @property
    def hovered(self) -> str | None:
        """The node under the mouse in some view (a transient highlight, not a selection)."""
        return self._hovered

    def set_hovered(self, node_id: str | None) -> None:
        if node_id == self._hovered:
            return
        self._hovered = node_id
        self.hover_changed.emit()

    @property
    def selected_edge(self) -> tuple[str, str] | None:
        """The selected edge as ``(source, target)``, if any."""
        return self._edge

    def set_selected_edge(self, edge: tuple[str, str] | None) -> None:
        edge = tuple(edge) if edge is not None else None
        if edge == self._edge:
            return
        self._edge = edge
        if edge is not None:
            self.set_selection(None)
        self.edge_selection_changed.emit()

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

    # ----- solver settings and the result cache ---------------------------------------------
    @property
    def settings(self) -> SolverSettings:
        """What the Solve button runs."""
        return self._settings

    def set_settings(self, settings: SolverSettings) -> None:
        if settings == self._settings:
            return
        self._settings = settings
        self.settings_changed.emit()

    def result_key(self) -> ResultKey | None:
        """The cache key of the current graph, memory limits and method."""
        if self._graph is None:
            return None
        method = _cache_method(self._settings.method, self._settings.offloads, self._settings.runs)
        return (self._token, method, _memory_limit_items(self._graph))

    def cache_result(self, key: ResultKey, result: SolveResult) -> None:
        """Remember a finished solve; cancelled and failed runs are not worth keeping."""
        if result.status in _CACHEABLE:
            self._cache[key] = result

    def cached_result(self, key: ResultKey | None = None) -> SolveResult | None:
        """The result found before for ``key`` (default: the current setting), if any."""
        key = self.result_key() if key is None else key
        return self._cache.get(key) if key is not None else None

    def cached_results(self) -> list[SolveResult]:
        """Every result cached for the current graph structure (any method or memory limits), in the
        order they were found: what a view can compare the result on display with."""
        return [r for key, r in self._cache.items() if key[0] == self._token and r.ok]

    def is_result_current(self) -> bool:
        """Whether the result on display was found for the current memory limits and structure."""
        result = self._result
        if result is None or self._graph is None:
            return result is None
        if result.schedule is not None:
            return dict(result.schedule.memory_limits) == self.memory_limits
        # no schedule to carry them: a solve that found none at these limits is current
        return self._result_limits == self.memory_limits

    # ----- files -------------------------------------------------------------------------------
    @property
    def file_path(self) -> str | None:
        """The project file this document was opened from or saved to."""
        return self._file_path

    def set_file_path(self, path: str | None) -> None:
        if path == self._file_path:
            return
        self._file_path = path
        self.file_path_changed.emit()

    @property
    def is_modified(self) -> bool:
        """Edits since the last open or save."""
        return not self.undo_stack.isClean()

    def open(
        self,
        graph: Graph | None,
        path: str | None = None,
        settings: SolverSettings | None = None,
        result: SolveResult | None = None,
    ) -> None:
        """Start over on a freshly loaded document: no undo history, no cache, clean."""
        self.undo_stack.clear()
        self._cache.clear()
        if settings is not None:
            self.set_settings(settings)
        self.set_file_path(path)
        self.set_graph(graph)
        self.set_result(result)
        if result is not None and result.schedule is not None and result.ok:
            method = result.schedule.solver.method if result.schedule.solver else result.method
            key = (self._token, method, tuple(sorted(result.schedule.memory_limits.items())))
            self.cache_result(key, result)
        self.undo_stack.setClean()

    def _on_undo_stack_clean_changed(self, clean: bool) -> None:
        self.modified_changed.emit(not clean)


def _cache_method(method: str, offload: bool, runs: int) -> str:
    """The method part of a cache key: a solve with offloading is not the paper's solve (its
    result's method, as a loaded schedule names it, is ``xengine+offload`` too), nor one
    whose interval model holds more runs per node (``+runs3``: it may find a faster one)."""
    key = f"{method}+offload" if offload else method
    return key if runs == DEFAULT_RUNS else f"{key}+runs{runs}"


def _memory_limit_items(graph: Graph) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((d.name, d.memory_limit) for d in graph.devices))


def _has_edge(graph: Graph, edge: tuple[str, str]) -> bool:
    index = graph.index
    source, target = edge
    return (
        source in index
        and target in index
        and (index[source], index[target]) in (graph.edge_number)
    )
