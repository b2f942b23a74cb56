"""File > Import Model...: a PyTorch class or an ONNX file as a training graph, from the window.

The import is the command line's own (``main.py import-torch`` / ``import-onnx``, same options,
same one-line errors), run in a child process (:class:`app.workers.ProcessWorker`): capturing a
model holds the GIL for seconds and imports torch, which the window never loads. Capture
cannot be interrupted, so the child runs it on a thread and exits at once when the user
cancels. The graph that comes back replaces the current one as one undoable edit, like
File > Import Graph, so nothing the user had is lost.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.child_task import STATUS_TIMEOUT_MS, ChildTask, run_until_cancelled
from app.dialogs import ErrorDialog, FileDialog
from solver.document.graph import Graph

__all__ = [
    "ImportFailure",
    "ImportModelAction",
    "ImportModelDialog",
    "ModelImportRequest",
    "import_model_job",
]

logger = logging.getLogger(__name__)

ONNX_FILTERS = "ONNX models (*.onnx);;All files (*)"
PYTHON_FILTERS = "Python files (*.py);;All files (*)"


@dataclass(frozen=True)
class ModelImportRequest:
    """What to import, as the command line takes it: ``argv`` after ``main.py``."""

    argv: tuple[str, ...]
    label: str
    """The model as the user named it, for messages."""


@dataclass(frozen=True)
class ImportFailure:
    """The import ran and refused the model: the command's one-line message."""

    message: str


def import_model_job(
    request: ModelImportRequest,
    report: Callable[[object], None],
    cancel: threading.Event,
) -> Graph | ImportFailure:
    """Run the import command in the child process; the graph it wrote, or its error line."""
    from solver.cli import main
    from solver.document.graph_io import load_graph

    folder = tempfile.mkdtemp(prefix="xengine-import-")
    out = Path(folder) / "imported.graph.json"

    def run() -> dict[str, object]:
        box: dict[str, object] = {}
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                box["code"] = main([*request.argv, "-o", str(out)])
        except Exception as exc:  # noqa: BLE001 - reported as one line
            box["crash"] = f"{type(exc).__name__}: {exc}"
        box["stderr"] = errors.getvalue()
        return box

    try:
        box = run_until_cancelled(run, cancel, partial(shutil.rmtree, folder, True))
        if box.get("code") == 0:
            return load_graph(out)
        return ImportFailure(_error_line(box))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _error_line(box: dict[str, object]) -> str:
    if "crash" in box:
        return f"unexpected error: {box['crash']}"
    lines = [line for line in str(box.get("stderr", "")).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    line = (errors or lines or ["the import failed without a message"])[-1]
    return line.split("error: ", 1)[-1] if line.startswith(("error: ", "main.py")) else line


class ImportModelDialog(QDialog):
    """The import's options. A bad field is named in red inside the dialog (no second modal
    box), and the dialog stays open with everything the user typed."""

    def __init__(self, parent: QWidget | None, last_dir: str = ""):
        super().__init__(parent)
        from solver.importers.hardware import DEVICES, LINKS

        self.setWindowTitle("Import Model")
        self._last_dir = last_dir
        self.torch_button = QRadioButton("PyTorch class")
        self.onnx_button = QRadioButton("ONNX file")
        self.torch_button.setChecked(True)
        kinds = QHBoxLayout()
        kinds.addWidget(self.torch_button)
        kinds.addWidget(self.onnx_button)
        kinds.addStretch(1)
        self.model_edit = QLineEdit()
        self.browse_button = QPushButton("Browse\u2026")
        self.browse_button.clicked.connect(self._on_browse_button_clicked)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model_edit, 1)
        model_row.addWidget(self.browse_button)
        self.input_edit = QLineEdit()
        self.capture_combo = _combo(["aten", "fx"])
        self.capture_combo.setToolTip(
            "aten: PyTorch's joint forward+backward graph (any capturable model); "
            "fx: the torch.fx importer, the fallback"
        )
        self.level_combo = _combo(["layer", "op"])
        self.level_combo.setToolTip("layer: ops grouped by module; op: one node per operation")
        self.cost_combo = _combo(["roofline", "measured"])
        self.cost_combo.setToolTip(
            "roofline: from the devices' published specs; measured: time the CPU's operations "
            "on this machine (slower)"
        )
        self.gpu_combo = _combo(sorted(k for k, d in DEVICES.items() if d.kind == "gpu"))
        self.gpu_combo.setCurrentText("rtx-3090")
        self.link_combo = _combo(sorted(LINKS))
        self.link_combo.setCurrentText("pcie4-x16")
        form = QFormLayout()
        form.addRow("Source", kinds)
        self.model_label = QLabel()
        form.addRow(self.model_label, model_row)
        self.input_label = QLabel()
        form.addRow(self.input_label, self.input_edit)
        form.addRow("Capture", self.capture_combo)
        form.addRow("Level", self.level_combo)
        form.addRow("Costs", self.cost_combo)
        form.addRow("GPU", self.gpu_combo)
        form.addRow("Link", self.link_combo)
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.hide()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        buttons.accepted.connect(self._on_accepted)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self.torch_button.toggled.connect(self._on_kind_toggled)
        self._on_kind_toggled()
        self.setMinimumWidth(520)

    @property
    def is_torch(self) -> bool:
        return self.torch_button.isChecked()

    def _on_kind_toggled(self, *_: object) -> None:
        torch = self.is_torch
        self.model_label.setText("Model" if torch else "File")
        self.model_edit.setPlaceholderText(
            "package.module:Class or path/to/file.py:Class" if torch else "path/to/model.onnx"
        )
        self.input_label.setText("Inputs" if torch else "Input shape")
        self.input_edit.setPlaceholderText(
            "32x3x224x224   (one per forward argument; 4x12:int64 for token ids)"
            if torch
            else "optional: 8x3x224x224 (when the file leaves the batch size open)"
        )
        for combo in (self.capture_combo, self.cost_combo):
            combo.setEnabled(torch)
        self.error_label.hide()

    def _on_browse_button_clicked(self) -> None:
        caption = "Python file with the model" if self.is_torch else "ONNX model"
        filters = PYTHON_FILTERS if self.is_torch else ONNX_FILTERS
        path = FileDialog.open_path(self, caption, self._last_dir, filters)
        if path:
            self.model_edit.setText(f"{path}:" if self.is_torch else path)
            self.model_edit.setFocus()
            self.model_edit.setCursorPosition(len(self.model_edit.text()))

    def request(self) -> ModelImportRequest:
        """The command line for what the fields say.

        Raises
        ------
        ValueError
            Naming the field and the fix, when a field is empty or malformed.
        """
        from solver.cli.import_torch import parse_input, parse_shape

        model = self.model_edit.text().strip()
        words = self.input_edit.text().replace(",", " ").split()
        try:
            for word in words:
                (parse_input if self.is_torch else parse_shape)(word)
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"{self.input_label.text()}: {exc}") from None
        level = ["--level", self.level_combo.currentText()]
        platform = ["--gpu", self.gpu_combo.currentText(), "--link", self.link_combo.currentText()]
        if self.is_torch:
            if ":" not in model.rstrip(":") or model.endswith(":"):
                raise ValueError(
                    "Model: write package.module:Class or path/to/file.py:Class "
                    "(a class built with no arguments)"
                )
            if not words:
                raise ValueError("Inputs: give the input's shape, e.g. 32x3x224x224")
            argv = ["import-torch", model, *(a for w in words for a in ("--input", w))]
            argv += ["--capture", self.capture_combo.currentText()]
            argv += ["--cost", self.cost_combo.currentText()]
        else:
            if not model:
                raise ValueError("File: choose an .onnx file")
            if not Path(model).is_file():
                raise ValueError(f"File: {model} does not exist; check the path")
            if len(words) > 1:
                raise ValueError("Input shape: an ONNX file takes one shape, for its first input")
            argv = ["import-onnx", model, *(["--input", words[0]] if words else [])]
        return ModelImportRequest((*argv, *level, *platform), model)

    def _on_accepted(self) -> None:
        try:
            self.request()
        except ValueError as exc:
            self.error_label.setText(str(exc))
            self.error_label.show()
            return
        self.accept()

    def fields(self) -> dict[str, object]:
        """What the user typed and chose, to fill the dialog with next time."""
        return {
            "onnx": self.onnx_button.isChecked(),
            "model": self.model_edit.text(),
            "inputs": self.input_edit.text(),
            **{name: combo.currentText() for name, combo in self._combos().items()},
        }

    def set_fields(self, fields: dict[str, object]) -> None:
        """Fill the dialog with :meth:`fields` of an earlier one."""
        (self.onnx_button if fields.get("onnx") else self.torch_button).setChecked(True)
        self.model_edit.setText(str(fields.get("model", "")))
        self.input_edit.setText(str(fields.get("inputs", "")))
        for name, combo in self._combos().items():
            if name in fields:
                combo.setCurrentText(str(fields[name]))

    def show_error(self, message: str) -> None:
        """Name what went wrong in red inside the dialog."""
        self.error_label.setText(message)
        self.error_label.show()

    def _combos(self) -> dict[str, QComboBox]:
        return {
            "capture": self.capture_combo,
            "level": self.level_combo,
            "cost": self.cost_combo,
            "gpu": self.gpu_combo,
            "link": self.link_combo,
        }

    @classmethod
    def ask(
        cls,
        parent: QWidget | None,
        last_dir: str = "",
        fields: dict[str, object] | None = None,
        error: str = "",
    ) -> tuple[ModelImportRequest, dict[str, object]] | None:
        """Show the dialog, filled with ``fields`` and showing ``error`` (an import that
        failed); the request and the fields, or ``None`` if the user cancelled."""
        dialog = cls(parent, last_dir)
        if fields:
            dialog.set_fields(fields)
        if error:
            dialog.show_error(error)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        return dialog.request(), dialog.fields()


class ImportModelAction(QObject):
    """The File menu entry and its :class:`ChildTask`. Emits nothing: the graph goes to
    ``window.files.adopt_graph``."""

    def __init__(self, window, parent: QObject | None = None):
        super().__init__(parent or window)
        self.window = window
        self.task = ChildTask(window, "Import", self)
        self.task.finished.connect(self._on_task_finished)
        self.task.failed.connect(self._on_task_failed)
        self.task.cancelled.connect(self._on_task_cancelled)
        self._request: ModelImportRequest | None = None
        self.action = QAction("Import &Model\u2026", window)
        self.action.setStatusTip("A PyTorch class or an ONNX file as a training graph (undoable)")
        self.action.triggered.connect(self.ask)
        _add_after_import_graph(window, self.action)

    def ask(self, error: str = "") -> bool:
        """Ask what to import (the dialog filled as the user left it), then start it."""
        answer = ImportModelDialog.ask(
            self.window, self.window.settings.last_dir(), self._fields, error
        )
        if answer is None:
            return False
        request, self._fields = answer
        return self.start(request)

    _fields: dict[str, object] | None = None
    """The dialog's fields at the last Import: it reopened blank."""

    def start(self, request: ModelImportRequest) -> bool:
        """Run the import in a child process; a progress box offers Cancel meanwhile."""
        if not self.task.start(
            partial(import_model_job, request), f"Importing {request.label}\u2026"
        ):
            return False
        self._request = request
        self.action.setEnabled(False)
        return True

    def _on_task_finished(self, value: Graph | ImportFailure) -> None:
        self.action.setEnabled(True)
        label = self._request.label if self._request is not None else "the model"
        if isinstance(value, ImportFailure):
            # the dialog again, as the user left it, with the reason in it: a missing class
            # or a wrong shape came in a box of its own after the dialog had closed
            self.window.statusBar().showMessage(f"Could not import {label}", STATUS_TIMEOUT_MS)
            if self._fields is None and self._request is not None:
                self._fields = _fields_of(self._request)
            QTimer.singleShot(0, self, lambda: self.ask(value.message))
            return
        self.window.files.adopt_graph(value, f"Import {Path(label).name}")
        self.window.statusBar().showMessage(
            f"Imported {label}: {value.n} nodes, {len(value.edges)} edges (Undo brings "
            "back the previous graph)",
            STATUS_TIMEOUT_MS,
        )

    def _on_task_failed(self, message: str) -> None:
        self.action.setEnabled(True)
        ErrorDialog.show_error(self.window, "The import failed", message)

    def _on_task_cancelled(self) -> None:
        self.action.setEnabled(True)


def _fields_of(request: ModelImportRequest) -> dict[str, object]:
    """The dialog's fields for a request made without it (e.g. by a script).

    >>> _fields_of(ModelImportRequest(("import-torch", "m:Net", "--input", "4x6", "--input",
    ...     "4x2", "--level", "op"), "m:Net"))
    {'onnx': False, 'model': 'm:Net', 'inputs': '4x6 4x2', 'level': 'op'}
    """
    argv = list(request.argv)
    fields: dict[str, object] = {"onnx": argv[0] == "import-onnx", "model": argv[1]}
    options = {"--capture": "capture", "--level": "level", "--cost": "cost", "--gpu": "gpu"}
    options["--link"] = "link"
    inputs = [argv[k + 1] for k in range(2, len(argv) - 1) if argv[k] == "--input"]
    fields["inputs"] = " ".join(inputs)
    for k in range(2, len(argv) - 1):
        if argv[k] in options:
            fields[options[argv[k]]] = argv[k + 1]
    return fields


def _combo(items: list[str]) -> QComboBox:
    combo = QComboBox()
    combo.addItems(items)
    return combo


def _add_after_import_graph(window, action: QAction) -> None:
    """Place ``action`` right after File > Import Graph (or at the end of File)."""
    anchor = getattr(getattr(window, "window_actions", None), "import_graph", None)
    for menu in window.menuBar().findChildren(QMenu):
        if menu.title().replace("&", "") != "File":
            continue
        entries = menu.actions()
        after = entries.index(anchor) + 1 if anchor in entries else len(entries)
        menu.insertAction(entries[after] if after < len(entries) else None, action)
        return
    logger.info("no File menu; the Import Model action is not shown")
