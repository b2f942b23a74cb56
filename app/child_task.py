"""A long job in a child process with a progress box and Cancel (imports, executions).

Capturing a model or running a training step cannot be interrupted from inside (no hook to
poll a flag), so a cancelled job's child process simply exits: :func:`run_until_cancelled`
runs the work on a thread of the child and leaves the process as soon as the cancel event is
set. :class:`ChildTask` is the window's side: a :class:`~app.workers.ProcessWorker`, a
non-modal progress box whose Cancel stops it, status-bar messages, and one signal per outcome.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QProgressDialog, QPushButton, QWidget

from app.solve_process import Job
from app.workers import ProcessWorker

__all__ = ["ChildTask", "run_until_cancelled"]

logger = logging.getLogger(__name__)

CANCEL_POLL_S = 0.05
STATUS_TIMEOUT_MS = 8000

T = TypeVar("T")
_EXIT_NOW = os._exit
"""Taken when this module loads: the import boundary (solver/importers/user_code.py) swaps
``os._exit`` for a refusal while model code runs, and a cancel must still end the child."""


def run_until_cancelled(
    work: Callable[[], T], cancel: threading.Event, on_cancel: Callable[[], None] | None = None
) -> T:
    """Run ``work`` in this (child) process and return its value; exit the process at once
    when ``cancel`` is set (after ``on_cancel``, e.g. removing a temporary folder).

    Only for a child of :func:`app.solve_process.run_in_process`: the parent sees it end
    without a value, which :class:`ChildTask` reports as cancelled.
    """
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            box["error"] = exc

    thread = threading.Thread(target=run, name="child-work", daemon=True)
    thread.start()
    while thread.is_alive():
        if cancel.is_set():
            if on_cancel is not None:
                on_cancel()
            _EXIT_NOW(0)
        thread.join(CANCEL_POLL_S)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


class ChildTask(QObject):
    """Runs one job at a time in a child process, with a progress box offering Cancel.

    Emits ``finished`` with the job's value, ``failed`` with a one-line message, or
    ``cancelled`` when the user stopped it (a cancelled job's value, if it still arrives, is
    dropped). ``running`` tells whether a job is on.
    """

    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, window: QWidget, title: str, parent: QObject | None = None):
        super().__init__(parent or window)
        self._window = window
        self._title = title
        self.worker: ProcessWorker | None = None
        self.progress: QProgressDialog | None = None

    @property
    def running(self) -> bool:
        return self.worker is not None

    def start(self, job: Job, text: str) -> bool:
        """Start ``job`` (``job(report, cancel)``, run in the child) and show ``text`` in a
        progress box; False if a job is already running."""
        if self.worker is not None:
            return False
        self.worker = ProcessWorker(job, self._title.lower())
        self.worker.signals.finished.connect(self._on_worker_finished)
        self.worker.signals.failed.connect(self._on_worker_failed)
        progress = self.progress = QProgressDialog(text, "Cancel", 0, 0, self._window)
        progress.setWindowTitle(self._title)
        progress.setWindowModality(Qt.WindowModality.NonModal)
        progress.setMinimumDuration(0)
        progress.setAutoClose(False)
        progress.canceled.connect(self.cancel)
        progress.show()
        self._status(text)
        self.worker.start()
        return True

    def cancel(self) -> None:
        """Stop the job; the window keeps what it shows."""
        if self.worker is not None and not self.worker.cancelled:
            self.worker.cancel()
            self._status(f"Cancelling: {self._title.lower()}\u2026")

    @property
    def cancel_button(self) -> QPushButton | None:
        """The progress box's Cancel button (what the user clicks; tests click it too)."""
        return self.progress.findChild(QPushButton) if self.progress is not None else None

    def _end(self) -> ProcessWorker | None:
        worker, self.worker = self.worker, None
        if self.progress is not None:
            self.progress.canceled.disconnect(self.cancel)
            self.progress.close()
            self.progress.deleteLater()
            self.progress = None
        return worker

    def _on_worker_finished(self, value: object) -> None:
        if self._ended_by_user():
            return
        self.finished.emit(value)

    def _on_worker_failed(self, message: str) -> None:
        if self._ended_by_user():
            return
        self.failed.emit(message)

    def _ended_by_user(self) -> bool:
        """Close the progress box; if the user cancelled, say so and emit ``cancelled``
        (whatever the cancelled job still delivered is dropped)."""
        worker = self._end()
        if worker is not None and worker.cancelled:
            self._status(f"{self._title} cancelled", STATUS_TIMEOUT_MS)
            self.cancelled.emit()
            return True
        self._status("")
        return False

    def _status(self, text: str, timeout_ms: int = 0) -> None:
        status_bar = getattr(self._window, "statusBar", None)
        if status_bar is None:
            return
        if text:
            status_bar().showMessage(text, timeout_ms)
        else:
            status_bar().clearMessage()
