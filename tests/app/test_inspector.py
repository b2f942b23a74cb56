"""The inspector renames nodes and the graph through undo commands; bad ids are refused."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt


@pytest.fixture
def window(make_window):
    return make_window("chain")


def _commit(qtbot, signal, edit, text: str) -> None:
    """Type ``text`` into ``edit`` and finish editing, as Return or a focus change does."""
    with qtbot.waitSignal(signal, timeout=5_000):
        edit.setText(text)
        edit.editingFinished.emit()


def test_inspector_renames_a_node_undo_and_redo(qtbot, window, dialogs):
    doc, view, page = window.document, window.graph_view, window.inspector.node_page
    before = [n.id for n in doc.graph.nodes]
    view.click_node("fc3")
    assert page.id_edit.text() == "fc3"

    _commit(qtbot, doc.graph_changed, page.id_edit, "dense3")
    assert [n.id for n in doc.graph.nodes] == ["dense3" if i == "fc3" else i for i in before]
    assert doc.graph.node("fc3.grad").of == "dense3"
    assert doc.selection == "dense3" and page.id_edit.text() == "dense3"
    assert window.inspector.stack.currentWidget() is page
    assert "dense3" in view.nodes and "fc3" not in view.nodes
    assert {("relu2", "dense3"), ("dense3", "loss")} <= set(view.edges)
    assert doc.undo_stack.undoText() == "Rename node fc3 to dense3"

    with qtbot.waitSignal(doc.graph_changed):
        window.window_actions.undo.trigger()
    assert [n.id for n in doc.graph.nodes] == before
    assert doc.selection == "fc3" and page.id_edit.text() == "fc3"
    qtbot.waitUntil(lambda: "fc3" in view.nodes and "dense3" not in view.nodes)

    with qtbot.waitSignal(doc.graph_changed):
        window.window_actions.redo.trigger()
    assert doc.graph.node("dense3").kind == "forward" and doc.selection == "dense3"
    qtbot.waitUntil(lambda: "dense3" in view.nodes)
    assert not dialogs.errors


@pytest.mark.parametrize(
    ("text", "message"),
    [("loss", "id 'loss' is already taken"), ("  ", "empty node id")],
)
def test_inspector_refuses_a_duplicate_or_empty_node_id(qtbot, window, dialogs, text, message):
    doc, page = window.document, window.inspector.node_page
    window.graph_view.click_node("fc3")
    graph, count = doc.graph, doc.undo_stack.count()
    with qtbot.assertNotEmitted(doc.graph_changed):
        _commit(qtbot, doc.edit_refused, page.id_edit, text)
    assert doc.graph is graph and doc.undo_stack.count() == count
    assert page.id_edit.text() == "fc3" and doc.selection == "fc3"
    assert not dialogs.errors  # inline and in the status bar, never a modal dialog
    assert f"node 'fc3': {message}" in window.statusBar().currentMessage()
    assert window.inspector.notice.isVisibleTo(window.inspector)
    assert f"node 'fc3': {message}" in window.inspector.notice.text()


def test_inspector_renames_the_graph_undoably(qtbot, window, dialogs):
    doc, page = window.document, window.inspector.graph_page
    doc.set_selection(None)
    assert window.inspector.stack.currentWidget() is page and page.name_edit.text() == "chain"
    result = doc.result

    _commit(qtbot, doc.graph_changed, page.name_edit, "my chain")
    assert doc.graph.name == "my chain" and doc.result is result  # same structure, same result
    assert "my chain" in window.windowTitle()

    with qtbot.waitSignal(doc.graph_changed):
        window.window_actions.undo.trigger()
    assert doc.graph.name == "chain" and page.name_edit.text() == "chain"

    with qtbot.assertNotEmitted(doc.graph_changed):
        _commit(qtbot, doc.edit_refused, page.name_edit, " ")
    assert doc.graph.name == "chain" and page.name_edit.text() == "chain"
    assert not dialogs.errors
    assert "empty graph name" in window.inspector.notice.text()


def test_inspector_clearing_a_cost_removes_it_from_the_graph(qtbot, window, dialogs):
    """An empty cost field means "cannot run there": the graph must agree with the screen."""
    doc, page = window.document, window.inspector.node_page
    window.graph_view.click_node("fc3")
    assert set(doc.graph.node("fc3").cost) == {"cpu", "gpu"}
    edit = page.cost_edits["cpu"]
    edit.setFocus()
    edit.selectAll()
    with qtbot.waitSignal(doc.graph_changed, timeout=5_000):
        qtbot.keyClick(edit, Qt.Key.Key_Delete)  # the field is now empty...
        qtbot.keyClick(edit, Qt.Key.Key_Return)  # ...and Return commits it
    assert dict(doc.graph.node("fc3").cost) == {"gpu": pytest.approx(page_cost(doc, "gpu"))}
    assert "cpu" not in doc.graph.node("fc3").cost
    assert edit.text() == "" and edit.placeholderText() == "cannot run"
    assert doc.undo_stack.undoText().startswith("Set ")
    assert not dialogs.errors


def test_inspector_refuses_clearing_the_last_cost_inline(qtbot, window, dialogs):
    doc, page = window.document, window.inspector.node_page
    window.graph_view.click_node("fc3")
    gpu_cost = doc.graph.node("fc3").cost["gpu"]
    with qtbot.waitSignal(doc.graph_changed, timeout=5_000):
        page.cost_edits["cpu"].setText("")
        page.cost_edits["cpu"].editingFinished.emit()
    graph = doc.graph
    with qtbot.waitSignal(doc.edit_refused, timeout=5_000) as refused:
        page.cost_edits["gpu"].setText("")
        page.cost_edits["gpu"].editingFinished.emit()
    assert doc.graph is graph and doc.graph.node("fc3").cost == {"gpu": gpu_cost}
    assert page.cost_edits["gpu"].text() == f"{gpu_cost:g}"  # the screen shows what is in force
    assert window.inspector.notice.text() == f"Not changed: {refused.args[0]}"
    assert not dialogs.errors


def page_cost(doc, device: str) -> float:
    return doc.graph.node("fc3").cost[device]


def test_inspector_sets_a_workspace_undoably_and_the_bound_counts_it(qtbot, window, dialogs):
    """A node's workspace (bytes it needs only while it runs) is edited like its memory, and
    what the window derives from the graph follows: the node needs that much more memory."""
    from solver.optimize.bounds import node_requirement

    doc, page = window.document, window.inspector.node_page
    window.graph_view.click_node("fc3")
    assert page.workspace_edit.text() == "0 B"
    k = doc.graph.index["fc3"]
    before = node_requirement(doc.graph, k)
    edit = page.workspace_edit
    edit.setFocus()
    edit.selectAll()
    with qtbot.waitSignal(doc.graph_changed, timeout=5_000):
        qtbot.keyClicks(edit, "3 GiB")
        qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert doc.graph.node("fc3").workspace == 3 * 2**30
    assert doc.undo_stack.undoText() == "Set workspace of fc3 to 3.0 GiB"
    assert node_requirement(doc.graph, k) == before + 3 * 2**30
    doc.undo_stack.undo()
    assert doc.graph.node("fc3").workspace == 0 and page.workspace_edit.text() == "0 B"
    assert not dialogs.errors


def test_inspector_shows_the_node_properties_and_why_it_is_resident(make_window):
    """A properties panel (shape, dtype, bytes, FLOPs, cost per device, module path) and
    "why resident" without a hover (issue 20)."""
    from solver.optimize.methods import solve

    window = make_window("encoder-aten")
    graph = window.document.graph
    window.document.set_result(solve(graph, "checkpoint-all:gpu"))
    window.document.set_selection("enc.layers.0.linear1")
    page = window.inspector.node_page
    text = page.properties_label.text()
    for expected in ("8\u00d7128\u00d71024 float32", "FLOP", "enc.layers.0.linear1", "gpu"):
        assert expected in text
    why = page.residency_text
    assert "Why resident" in why and "gpu" in why
    assert "needed by" in why or "read by" in why or "kept" in why
    window.document.set_cursor(2)
    assert page.residency_text.splitlines()[1].startswith("now ")
