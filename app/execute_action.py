"""Solve > Execute on PyTorch: run the shown schedule as a real training step (issue 9).

The graph must have been imported from PyTorch: by the ATen importer (``main.py
import-torch``) or the torch.fx one (the bundled vgg16, resnet18, unet, transformer, ...); its
``meta`` names the model, the input shape, the level and the importer. The step runs in a child
process (:class:`app.child_task.ChildTask`, with a progress box and Cancel: capture and
execution would otherwise hold the GIL), by
:func:`solver.executors.execute_graph.execute_graph`, and the window shows measured
beside predicted time and per-device peak, and whether the gradients equal ``loss.backward()``.
The document is only read on the GUI thread, when the action is triggered (a snapshot).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog, QMenu, QMessageBox, QWidget

from app.child_task import ChildTask, run_until_cancelled
from app.dialogs import ErrorDialog
from app.views.measured import measured_run, prediction_basis
from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.document.units import format_size

__all__ = ["ExecuteAction", "DeviceMapDialog", "ExecutionDialog", "execute_job", "report_text"]

logger = logging.getLogger(__name__)


def execute_job(
    graph: Graph,
    schedule: Schedule,
    device_map: Mapping[str, str],
    report: Callable[[object], None],
    cancel: threading.Event,
) -> dict[str, Any]:
    """Import the graph's model again and run ``schedule`` on it (in the child process,
    which exits at once on Cancel: a training step cannot be interrupted from inside)."""
    from solver.executors.execute_graph import execute_graph

    report = run_until_cancelled(partial(execute_graph, graph, schedule, device_map), cancel)
    # the per-operation times too: the schedule views draw them as ghost bars
    return {**report.to_json(), "op_ms": [list(row) for row in report.op_ms]}


def execution_blocker(graph: Graph | None, full: bool = True) -> str:
    """Why Execute cannot run ``graph``, in one line; empty when it can.

    An ONNX import: its meta names a file and a shape, so it passed the importers' rule, asked
    for a device map and then failed with a misleading "model spec ... not module:Class"
    (there is no PyTorch module to run). Then, when ``full``, the importers' own rule (a
    synthetic graph names no model); without it, only whether the meta names a model at all:
    the importers' module takes 0.2 s to import, and the enabled state is asked at every
    result, where that import stalled the window.
    """
    if graph is None:
        return "no graph"
    if "onnx" in str(graph.meta.get("importer", "")).lower():
        return (
            f"graph '{graph.name}' was imported from an ONNX file, which holds no PyTorch module "
            "to run; import the model's PyTorch class (File > Import Model) to execute it"
        )
    if not full:
        return "" if "source" in graph.meta else f"graph '{graph.name}' names no model"
    from solver.executors.execute_graph import executable_reason

    return executable_reason(graph)


def report_text(doc: Mapping[str, Any], basis: str = "") -> str:
    """The result as lines: gradients, time, then one line per device; ``basis`` says what
    the prediction models (:func:`prediction_basis`)."""
    measured, predicted = doc["measured"], doc["predicted"]
    lines = [
        f"Gradients equal loss.backward(): {'yes' if doc['gradients_match'] else 'NO'}"
        f" (max difference {doc['max_abs_gradient_error']:.2g})",
        f"Time: measured {measured['total_ms']:.1f} ms on this machine, predicted "
        f"{predicted['total_ms']:.1f} ms" + (f" for {basis}" if basis else ""),
    ]
    for device, peak in measured["peak_bytes"].items():
        lines.append(
            f"{device} (run on {doc['device_map'][device]}): peak measured {format_size(peak)}, "
            f"predicted {format_size(predicted['peak_bytes'][device])}, "
            f"budget {format_size(doc['budget_bytes'][device])}"
        )
    return "\n".join(lines)


class DeviceMapDialog:
    """Ask which torch device each schedule device runs on (``gpu=cuda:0,cpu=cpu``)."""

    @classmethod
    def ask(cls, parent: QWidget | None, model: str, default: str) -> str | None:
        text, ok = QInputDialog.getText(
            parent,
            "Execute on PyTorch",
            f"Run one training step of {model} by this schedule.\n"
            "Torch device per schedule device (without a GPU: gpu=cpu):",
            text=default,
        )
        return text if ok else None


class ExecutionDialog:
    """Show the measured-versus-predicted report."""

    @classmethod
    def show_report(cls, parent: QWidget | None, text: str) -> None:
        box = QMessageBox(parent)
        box.setWindowTitle("XEngine Studio")
        box.setText("Executed on PyTorch")
        box.setInformativeText(text)
        box.setStyleSheet("QLabel#qt_msgbox_informativelabel { min-width: 520px; }")
        box.exec()


class ExecuteAction(QObject):
    """The menu entry and its :class:`ChildTask` (a progress box with Cancel). Listens to
    ``Document.result_changed`` (enables the entry when a schedule is shown); emits nothing."""

    def __init__(self, window, parent: QObject | None = None):
        super().__init__(parent or window)
        self.window = window
        self.document = window.document
        self.task = ChildTask(window, "Execution", self)
        self.task.finished.connect(self._on_task_finished)
        self.task.failed.connect(self._on_task_failed)
        self.task.cancelled.connect(self._on_document_result_changed)
        self._schedule: Schedule | None = None
        self.last_report: dict[str, Any] | None = None
        self.action = QAction("E&xecute on PyTorch\u2026", window)
        self.action.setStatusTip("Run the schedule as a real training step and measure it")
        self.action.triggered.connect(self.start)
        menu = _solve_menu(window)
        if menu is not None:
            menu.addSeparator()
            menu.addAction(self.action)
        self.document.result_changed.connect(self._on_document_result_changed)
        self._on_document_result_changed()

    def _on_document_result_changed(self) -> None:
        result = self.document.result
        shown = result is not None and result.schedule is not None
        blocker = execution_blocker(self.document.graph, full=False) if shown else ""
        self.action.setEnabled(shown and not blocker and not self.task.running)
        tip = "Run the schedule as a real training step and measure it"
        self.action.setStatusTip(f"Cannot execute: {blocker}" if blocker else tip)
        self.action.setToolTip(self.action.statusTip())

    def start(self) -> bool:
        """Snapshot graph and schedule, ask for the device map, start the worker."""
        graph, result = self.document.graph, self.document.result
        if graph is None or result is None or result.schedule is None or self.task.running:
            return False
        reason = execution_blocker(graph)
        if reason:
            ErrorDialog.show_error(self.window, "This graph cannot be executed", reason)
            return False
        default = ",".join(f"{d.name}=cpu" for d in graph.devices)  # no GPU assumed
        text = DeviceMapDialog.ask(self.window, graph.meta["source"], default)
        if text is None:
            return False
        from argparse import ArgumentTypeError

        from solver.cli.execute import parse_device_map

        try:
            device_map = parse_device_map(text)
        except ArgumentTypeError as exc:
            ErrorDialog.show_error(self.window, "Bad device map", str(exc))
            return False
        schedule = self._schedule = result.schedule
        job = partial(execute_job, graph, schedule, device_map)
        self.task.start(job, f"Executing the schedule of {graph.name} on PyTorch\u2026")
        self.action.setEnabled(False)
        return True

    def _on_task_finished(self, doc: dict[str, Any]) -> None:
        self.last_report = doc
        self._on_document_result_changed()
        self.window.statusBar().showMessage("Executed on PyTorch", 5000)
        self.show_measured(doc)
        basis = prediction_basis(self.document.graph)
        ExecutionDialog.show_report(self.window, report_text(doc, basis))

    def show_measured(self, doc: Mapping[str, Any]) -> None:
        """Measured beside predicted in the schedule views: ghost bars in the Gantt chart,
        the measured peak in the memory plots (while the executed schedule is on display)."""
        run = measured_run(self._schedule, doc)
        for view in _schedule_views(self.window):
            view.gantt.set_measured(run)
            view.memory.set_measured(run)

    def _on_task_failed(self, message: str) -> None:
        self._on_document_result_changed()
        ErrorDialog.show_error(self.window, "The schedule could not be executed", message)


def _schedule_views(window) -> list:
    tabs = getattr(window, "schedule_tabs", None)
    views = [tabs.widget(i) for i in range(tabs.count())] if tabs is not None else []
    return [v for v in views if hasattr(v, "gantt") and hasattr(v, "memory")]


def _solve_menu(window) -> QMenu | None:
    for menu in window.menuBar().findChildren(QMenu):
        if menu.title().replace("&", "") == "Solve":
            return menu
    logger.info("no Solve menu; the Execute action is not shown")
    return None
