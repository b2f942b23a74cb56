"""The graph editor: draw a graph with the window's actions, undo and redo every step, solve it.

Edits go through undo commands; the core's refusal of a cycle reaches the user as a message and
leaves the graph and the undo stack as they were.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from app.commands import ConnectCommand, SetMemoryLimitCommand
from app.panels.devices import SLIDER_STEPS
from solver.execution.simulate import simulate
from solver.status import SolveStatus


def shape(window) -> tuple[list[str], list[tuple[str, str]]]:
    graph = window.document.graph
    return [n.id for n in graph.nodes], sorted((e.source, e.target) for e in graph.edges)


def test_editor_draws_three_nodes_undoes_redoes_and_solves(qtbot, make_window, dialogs):
    window = make_window(None)
    window.window_actions.new.trigger()
    actions, view, stack = window.window_actions, window.graph_view, window.document.undo_stack
    states = [shape(window)]
    for _ in range(3):
        actions.add_node.trigger()
        states.append(shape(window))
    assert states[-1] == (["n1", "n2", "n3"], [])
    assert window.document.selection == "n3"  # a new node is selected for the inspector
    view.request_connect("n1", "n2")  # what a drag from n1 onto n2 does
    states.append(shape(window))
    view.request_connect("n2", "n3")
    states.append(shape(window))
    inspector = window.inspector.node_page
    view.click_node("n2")
    assert window.document.selection == "n2" and view.nodes["n2"].is_selected
    inspector.memory_edit.setText("3 MB")
    inspector.memory_edit.editingFinished.emit()
    assert window.document.graph.node("n2").memory == 3_000_000
    states.append(shape(window))
    assert states[-1] == (["n1", "n2", "n3"], [("n1", "n2"), ("n2", "n3")])
    assert stack.count() == len(states) - 1

    for expected in reversed(states[:-1]):
        actions.undo.trigger()
        assert shape(window) == expected
    assert window.document.graph.nodes == ()
    for expected in states[1:]:
        actions.redo.trigger()
        assert shape(window) == expected
    assert window.document.graph.node("n2").memory == 3_000_000
    assert set(view.nodes) == {"n1", "n2", "n3"} and set(view.edges) == {("n1", "n2"), ("n2", "n3")}

    with qtbot.waitSignal(window.controller.finished, timeout=60_000) as blocker:
        actions.solve.trigger()
    result = blocker.args[0]
    assert result.status is SolveStatus.OPTIMAL
    replay = simulate(window.document.graph, result.schedule)
    assert replay.valid and replay.total_ms == pytest.approx(result.objective)
    assert not dialogs.errors


def test_editor_refuses_a_cycle_with_the_cores_message(make_window, dialogs):
    window = make_window(None)
    window.window_actions.new.trigger()
    for _ in range(3):
        window.window_actions.add_node.trigger()
    window.graph_view.request_connect("n1", "n2")
    window.graph_view.request_connect("n2", "n3")
    before, count = shape(window), window.document.undo_stack.count()
    assert not window.document.edit(ConnectCommand, "n3", "n1")
    assert shape(window) == before and window.document.undo_stack.count() == count
    assert not dialogs.errors  # said in the status bar, not in a modal dialog
    message = window.statusBar().currentMessage()
    assert message.startswith("Edit refused: ")
    assert "cycle" in message and "n1 -> n2 -> n3 -> n1" in message


def test_editor_delete_and_build_training_graph(make_window):
    window = make_window(None)
    window.window_actions.new.trigger()
    for _ in range(2):
        window.window_actions.add_node.trigger()
    window.graph_view.request_connect("n1", "n2")
    window.window_actions.build_training.trigger()
    graph = window.document.graph
    assert [n.id for n in graph.nodes] == ["n1", "n2", "loss", "n2.grad", "n1.grad"]
    assert {n.kind for n in graph.nodes} == {"forward", "loss", "backward"}
    window.graph_view.click_edge(("n1", "n2"))
    window.window_actions.delete.trigger()
    assert ("n1", "n2") not in window.graph_view.edges
    window.window_actions.undo.trigger()
    window.window_actions.undo.trigger()
    assert shape(window) == (["n1", "n2"], [("n1", "n2")])


def test_devices_slider_drag_is_one_undo_entry(make_window):
    window = make_window("chain")
    row = window.devices_panel.rows["gpu"]
    start = window.document.memory_limits["gpu"]
    row.slider.setSliderDown(True)
    row._on_slider_pressed()
    for value in (700, 760, 820, 900):
        row.slider.setValue(value)  # live preview while dragging, no undo entry yet
    assert window.document.memory_limits["gpu"] != start
    assert window.document.undo_stack.count() == 0
    row.slider.setSliderDown(False)
    row._on_slider_released()
    assert window.document.undo_stack.count() == 1
    assert window.document.undo_stack.text(0).startswith("Set gpu memory")
    window.window_actions.undo.trigger()
    assert window.document.memory_limits["gpu"] == start
    assert row.slider.value() < SLIDER_STEPS


def test_devices_rename_add_remove_and_link_edits_are_undoable(make_window, dialogs):
    window = make_window("chain")
    doc, panel = window.document, window.devices_panel
    panel.add_button.click()
    assert [d.name for d in doc.graph.devices] == ["cpu", "gpu", "dev3"]
    panel.rows["dev3"].name_edit.setText("tpu")
    panel.rows["dev3"].name_edit.editingFinished.emit()
    assert "tpu" in doc.graph.device_index and "tpu" in panel.rows
    link_row = next(
        r for r in range(panel.links_table.rowCount())
        if panel.links_table.item(r, 0).text() == "cpu \u2192 tpu"
    )  # fmt: skip
    panel.links_table.item(link_row, 1).setText("4 GB/s")
    link = next(lk for lk in doc.graph.links if (lk.source, lk.target) == ("cpu", "tpu"))
    assert link.bandwidth == 4e9
    assert doc.edit(SetMemoryLimitCommand, "tpu", 123_000_000)
    for _ in range(4):
        window.window_actions.undo.trigger()
    assert [d.name for d in doc.graph.devices] == ["cpu", "gpu"]
    assert not dialogs.errors


def test_editor_double_click_places_the_new_node_where_clicked(qtbot, make_window):
    window = make_window("chain")
    canvas = window.graph_view.canvas
    qtbot.waitExposed(canvas)
    point = QPoint(canvas.viewport().width() - 40, 30)  # background, away from the nodes
    assert canvas.items(point) == []
    before = set(window.document.graph.index)
    with qtbot.waitSignal(window.document.graph_changed, timeout=5_000):
        QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=point)
    (added,) = set(window.document.graph.index) - before
    assert window.document.selection == added
    where = canvas.mapFromScene(window.graph_view.node_position(added))
    assert abs(where.x() - point.x()) <= 1 and abs(where.y() - point.y()) <= 1
