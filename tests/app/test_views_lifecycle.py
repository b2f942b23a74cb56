"""Every view survives the document's whole life: empty, a graph, a result, a different graph.

During an edit the document announces the new graph before it replaces the result, so for a
moment a view sees a graph and a schedule that do not belong together; none may fail then.
"""

from __future__ import annotations

import pytest

from app.document import Document
from app.views.comparison import ComparisonView
from app.views.explorer import ExplorerView
from app.views.gantt import GanttView
from app.views.matrices import MatricesView
from app.views.memory import MemoryView
from app.views.schedule_view import ScheduleView
from app.views.stepper import StepperPanel
from solver.document.examples import example_path
from solver.document.formats import load_graph
from solver.document.generators import unit_chain

VIEWS = [
    GanttView,
    MemoryView,
    ScheduleView,
    MatricesView,
    StepperPanel,
    ComparisonView,
    ExplorerView,
]


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
