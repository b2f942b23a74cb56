"""File > Import Model: a PyTorch class or an ONNX file, imported in a child process."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.import_model import (
    ImportFailure,
    ImportModelDialog,
    ModelImportRequest,
    import_model_job,
)
from solver.document.graph import Graph

TINY = """
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 5)
        self.b = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
"""


@pytest.fixture
def tiny(tmp_path) -> str:
    path = tmp_path / "tiny.py"
    path.write_text(TINY)
    return f"{path}:Tiny"


def test_dialog_builds_the_command_line_of_import_torch(qtbot):
    dialog = ImportModelDialog(None)
    qtbot.addWidget(dialog)
    dialog.model_edit.setText("pkg.models:Net")
    dialog.input_edit.setText("4x16x64, 4x12:int64")
    dialog.level_combo.setCurrentText("op")
    assert dialog.request() == ModelImportRequest(
        (
            "import-torch",
            "pkg.models:Net",
            "--input",
            "4x16x64",
            "--input",
            "4x12:int64",
            "--capture",
            "aten",
            "--cost",
            "roofline",
            "--level",
            "op",
            "--gpu",
            "rtx-3090",
            "--link",
            "pcie4-x16",
        ),  # fmt: skip
        "pkg.models:Net",
    )


def test_dialog_builds_the_command_line_of_import_onnx(qtbot, tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    dialog = ImportModelDialog(None)
    qtbot.addWidget(dialog)
    dialog.onnx_button.setChecked(True)
    assert not dialog.capture_combo.isEnabled()  # the ONNX importer has one capture
    dialog.model_edit.setText(str(model))
    dialog.input_edit.setText("8x3x32x32")
    dialog.gpu_combo.setCurrentText("v100-sxm2")
    assert dialog.request().argv == (
        "import-onnx", str(model), "--input", "8x3x32x32", "--level", "layer",
        "--gpu", "v100-sxm2", "--link", "pcie4-x16",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("onnx", "model", "inputs", "message"),
    [
        (False, "Net", "4x8", "Model: write package.module:Class or path/to/file.py:Class"),
        (False, "m:Net", "", "Inputs: give the input's shape, e.g. 32x3x224x224"),
        (False, "m:Net", "4xeight", "Inputs: '4xeight' is not a shape"),
        (False, "m:Net", "4x8:complex", "Inputs: '4x8:complex' has an unknown dtype"),
        (True, "", "", "File: choose an .onnx file"),
        (True, "/nowhere/m.onnx", "", "File: /nowhere/m.onnx does not exist; check the path"),
    ],
)
def test_a_bad_field_is_named_inside_the_dialog_which_stays_open(
    qtbot, onnx, model, inputs, message
):
    dialog = ImportModelDialog(None)
    qtbot.addWidget(dialog)
    dialog.onnx_button.setChecked(onnx)
    dialog.model_edit.setText(model)
    dialog.input_edit.setText(inputs)
    dialog.show()
    dialog._on_accepted()
    assert dialog.isVisible() and dialog.result() == 0  # not accepted: nothing typed is lost
    assert dialog.error_label.isVisibleTo(dialog)
    assert dialog.error_label.text().startswith(message)


def test_job_returns_the_graph_the_command_line_writes(tiny):
    pytest.importorskip("torch")
    request = ModelImportRequest(("import-torch", tiny, "--input", "4x6"), tiny)
    graph = import_model_job(request, lambda item: None, threading.Event())
    assert isinstance(graph, Graph)
    assert {"a", "b", "loss", "a.grad", "b.grad"} <= {node.id for node in graph.nodes}
    assert graph.meta["input_shape"] == [4, 6]


def test_job_returns_the_commands_error_line(tmp_path):
    pytest.importorskip("torch")
    request = ModelImportRequest(("import-torch", "nowhere.at.all:Net", "--input", "4x6"), "x")
    failure = import_model_job(request, lambda item: None, threading.Event())
    assert isinstance(failure, ImportFailure)
    assert failure.message.startswith("model spec: cannot import 'nowhere.at.all'")


def test_import_model_replaces_the_graph_as_one_undoable_edit(qtbot, make_window, tiny):
    pytest.importorskip("torch")
    window = make_window("chain")
    action = window.import_model_action
    assert action.action in window.menuBar().actions()[0].menu().actions()
    request = ModelImportRequest(("import-torch", tiny, "--input", "4x6"), tiny)
    assert action.start(request)
    assert not action.action.isEnabled() and action.task.progress.isVisible()
    qtbot.waitUntil(lambda: window.document.graph.name == "tiny", timeout=120_000)
    assert action.task.progress is None and action.action.isEnabled()
    graph = window.document.graph
    assert (
        window.statusBar()
        .currentMessage()
        .startswith(f"Imported {tiny}: {graph.n} nodes, {len(graph.edges)} edges")
    )
    assert window.document.is_modified  # closing the window now asks to save
    window.document.undo_stack.undo()
    assert window.document.graph.name == "chain"  # nothing the user had is lost


def test_cancel_stops_the_import_and_keeps_the_graph(qtbot, make_window, tiny):
    pytest.importorskip("torch")
    window = make_window("chain")
    action = window.import_model_action
    assert action.start(ModelImportRequest(("import-torch", tiny, "--input", "4x6"), tiny))
    with qtbot.waitSignal(action.task.cancelled, timeout=30_000):
        action.task.cancel_button.click()  # the progress box's Cancel button
    assert window.statusBar().currentMessage() == "Import cancelled"
    assert action.action.isEnabled() and action.task.progress is None
    assert window.document.graph.name == "chain" and not window.document.is_modified


def test_a_refused_model_is_shown_in_one_line(qtbot, make_window, dialogs, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "branchy.py").write_text(
        "import torch\n\n\nclass B(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.f = torch.nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        return self.f(x) if x.sum() > 0 else self.f(-x)\n"
    )
    spec = f"{tmp_path / 'branchy.py'}:B"
    window = make_window("chain")
    asked = []
    monkeypatch.setattr(
        ImportModelDialog, "ask", classmethod(lambda cls, *a: asked.append(a) and None)
    )
    window.import_model_action.start(
        ModelImportRequest(("import-torch", spec, "--input", "2x4"), spec)
    )
    qtbot.waitUntil(lambda: bool(asked), timeout=120_000)
    # the dialog again, filled as it was, with the reason inside it: no box of its own
    _parent, _folder, fields, message = asked[-1]
    assert fields["model"] == spec and fields["inputs"] == "2x4"
    assert "data-dependent control flow" in message and "\n" not in message
    assert not dialogs.errors
    assert window.document.graph.name == "chain"
    assert Path(tmp_path / "branchy.py").exists()


def test_dialog_reopens_as_the_user_left_it(qtbot, make_window, monkeypatch, tmp_path):
    """The dialog reopened blank after an import (issue 20, item 7)."""
    seen = []

    def fake_ask(cls, parent, folder, fields=None, error=""):
        seen.append((fields, error))
        dialog = ImportModelDialog(parent, folder)
        qtbot.addWidget(dialog)
        if fields:
            dialog.set_fields(fields)
        if len(seen) == 1:
            dialog.model_edit.setText("pkg.mod:Net")
            dialog.input_edit.setText("8x3x32x32")
            dialog.level_combo.setCurrentText("op")
        return dialog.request(), dialog.fields()

    monkeypatch.setattr(ImportModelDialog, "ask", classmethod(fake_ask))
    window = make_window("chain")
    action = window.import_model_action
    monkeypatch.setattr(action, "start", lambda request: True)
    assert action.ask()
    assert action.ask()
    fields, _ = seen[1]
    assert fields["model"] == "pkg.mod:Net" and fields["inputs"] == "8x3x32x32"
    assert fields["level"] == "op"
