"""Every view survives the document's whole life: empty, a graph, a result, a different graph.

The document sets graph, selection, result and cursor together before it emits anything, so a
view reacting to ``graph_changed`` never sees the new graph beside the old graph's schedule.
"""

from __future__ import annotations

import pytest

from app.commands import DeleteCommand, RenameNodeCommand
from app.document import Document
from app.main_window import CENTRAL_VIEWS
from app.views.gantt import GanttView
from app.views.graph_view import GraphView
from app.views.memory import MemoryView
from app.views.stepper import StepperPanel
from solver.document.examples import example_path
from solver.document.generators import unit_chain
from solver.document.graph_io import load_graph

VIEWS = [
    *(view for view, _ in CENTRAL_VIEWS),  # the window's tabs, as it builds them
    GraphView,  # and its docked views
    StepperPanel,
    GanttView,  # the Schedule tab's two parts, alone
    MemoryView,
]
"""Every view class the window shows (its own list of tabs, not a copy of it)."""


@pytest.mark.parametrize("view_class", VIEWS, ids=lambda c: c.__name__)
def test_view_survives_empty_graph_result_and_graph_swap(
    qtbot, view_class, graph, handbuilt_result
):
    document = Document()
    view = view_class(document)
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    document.set_graph(graph)
    document.set_result(handbuilt_result)
    document.set_selection("a")
    document.set_cursor(3)
    # a graph with other nodes and one device arrives while the old result is still shown
    document.graph_changed.connect(lambda: view.grab())
    document.set_graph(unit_chain(3))
    assert document.result is None
    document.set_graph(load_graph(example_path("chain")))
    view.grab()


def _snapshot(document: Document, seen: list) -> None:
    graph, result = document.graph, document.result
    nodes = {op.node for op in result.timeline.ops} if result is not None else set()
    seen.append(
        (
            graph.n if graph is not None else None,
            nodes <= set(graph.index) if graph is not None else result is None,
            document.selection,
            document.cursor,
        )
    )


def test_graph_changed_is_emitted_after_result_selection_and_cursor_are_set(
    graph, handbuilt_result
):
    document = Document()
    document.set_graph(graph)
    document.set_result(handbuilt_result)
    document.set_selection("d")
    document.set_cursor(3)
    seen: list = []
    document.graph_changed.connect(lambda: _snapshot(document, seen))
    results: list = []
    document.result_changed.connect(lambda: results.append(document.result))
    selections: list = []
    document.selection_changed.connect(lambda: selections.append(document.selection))

    # an edit: node d goes, so the schedule (which runs d) and the selection go with it
    document.edit(DeleteCommand, ("d",))
    assert seen == [(3, True, None, None)]
    assert results == [None] and selections == [None]

    # undo restores the structure the result was not cached for (it was set by hand): no result
    document.undo_stack.undo()
    assert seen[-1] == (4, True, None, None)
    assert results == [None]  # None -> None: no second result_changed

    # a fresh graph while a result is shown: cleared before graph_changed goes out
    document.set_result(handbuilt_result)
    document.set_graph(unit_chain(3))
    assert seen[-1] == (7, True, None, None)  # unit_chain(3): 3 forward, loss, 3 backward
    assert results == [None, handbuilt_result, None]


def test_apply_graph_shows_the_cached_result_together_with_the_restored_graph(
    graph, handbuilt_result
):
    document = Document()
    document.set_graph(graph)
    key = document.result_key()
    document.cache_result(key, handbuilt_result)
    document.set_result(handbuilt_result)
    document.set_selection("b")
    results_at_graph_change: list = []
    document.graph_changed.connect(lambda: results_at_graph_change.append(document.result))
    document.edit(RenameNodeCommand, "b", "b2")
    assert results_at_graph_change == [None] and document.selection == "b2"
    document.undo_stack.undo()  # the old structure's token again: its cached result comes back
    assert results_at_graph_change == [None, handbuilt_result]
    assert document.result is handbuilt_result and document.selection == "b"
